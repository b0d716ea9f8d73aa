"""A part's end (its last writes and close) runs behind the next part's model (extract.runner.write_parts)."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from extract.families import tiny_extractor
from extract.runner import run_extraction
from extract.stage_options import ExtractOptions
from extract.store import PartWriter, ShardReader, StoreError, is_complete
from tests.corpus import write_corpus

OPTIONS = dict(config={"test": 1}, show_progress=False, options=ExtractOptions(storage_dtype="float32", batch_seconds=2.0, utterances_per_part=3))


def _corpus(tmp_path, count=7):
    rng = np.random.default_rng(0)
    waves = [(0.1 * rng.standard_normal(int(16_000 * seconds))).astype(np.float32) for seconds in np.linspace(0.5, 1.5, count)]
    return write_corpus(tmp_path, waves, speakers=3)


def _is_first_part(writer: PartWriter) -> bool:
    return writer.path.name.endswith("part00000.h5")


def _leftovers(folder):
    return sorted(path.name for path in folder.iterdir() if path.suffix in (".lock", ".tmp"))


def test_the_next_parts_model_runs_while_a_part_ends(tmp_path, monkeypatch):
    utterances, extractor = _corpus(tmp_path), tiny_extractor("s2t")
    sites = extractor.resolve_sites("all")
    first_part_closing, next_part_ran = threading.Event(), threading.Event()
    real_close, real_extract = PartWriter.close, extractor.extract

    def close(writer):
        if _is_first_part(writer):
            first_part_closing.set()
            assert next_part_ran.wait(timeout=10), "the next part's model waited for this part's end"
        return real_close(writer)

    def extract(*args, **kwargs):
        if kwargs["ids"][0] in {"u3", "u4", "u5"}:  # the second part's model: it may run before the first part's close starts
            assert first_part_closing.wait(timeout=10)
            next_part_ran.set()
        return real_extract(*args, **kwargs)

    monkeypatch.setattr(PartWriter, "close", close)
    monkeypatch.setattr(extractor, "extract", extract)
    report = run_extraction(extractor, utterances, sites, tmp_path / "store", **OPTIONS)
    assert next_part_ran.is_set()
    assert [name.rsplit("-", 1)[-1] for name in report.parts] == ["part00000.h5", "part00001.h5", "part00002.h5"]
    assert report.written == len(utterances) and len(ShardReader(tmp_path / "store")) == len(utterances)
    assert _leftovers(tmp_path / "store") == []


def test_a_part_that_fails_as_it_ends_stops_the_run_and_a_rerun_completes_it(tmp_path, monkeypatch):
    utterances, extractor = _corpus(tmp_path), tiny_extractor("s2t")
    sites = extractor.resolve_sites("all")
    run_extraction(extractor, utterances, sites, tmp_path / "clean", **OPTIONS)
    real_close = PartWriter.close

    def close(writer):
        if _is_first_part(writer):
            raise StoreError("disk trouble while the first part ended")
        return real_close(writer)

    monkeypatch.setattr(PartWriter, "close", close)
    store = tmp_path / "store"
    with pytest.raises(StoreError, match="disk trouble"):
        run_extraction(extractor, utterances, sites, store, **OPTIONS)
    parts = sorted(store.glob("*.h5"))
    assert not any(is_complete(part) for part in parts if part.name.endswith("part00000.h5"))
    assert _leftovers(store) == []  # the claims released, the failed part's temporary file gone
    monkeypatch.setattr(PartWriter, "close", real_close)
    report = run_extraction(extractor, utterances, sites, store, **OPTIONS)
    assert report.resumed + report.written == len(utterances) and report.written >= 3
    clean, resumed = ShardReader(tmp_path / "clean"), ShardReader(store)
    assert clean.ids == resumed.ids
    for site in sites:
        for utterance in clean.ids:
            np.testing.assert_array_equal(clean.get(site, utterance), resumed.get(site, utterance))


def test_an_error_in_the_next_part_waits_for_the_ending_part_and_keeps_it(tmp_path, monkeypatch):
    utterances, extractor = _corpus(tmp_path), tiny_extractor("s2t")
    sites = extractor.resolve_sites("all")
    real_close, real_extract = PartWriter.close, extractor.extract
    first_part_closing, calls = threading.Event(), []

    def close(writer):
        if _is_first_part(writer):
            first_part_closing.set()
        return real_close(writer)

    def extract(*args, **kwargs):
        if first_part_closing.is_set():
            raise KeyboardInterrupt  # the second part's model stopped while the first part ends
        calls.append(1)
        return real_extract(*args, **kwargs)

    monkeypatch.setattr(PartWriter, "close", close)
    monkeypatch.setattr(extractor, "extract", extract)
    store = tmp_path / "store"
    with pytest.raises(KeyboardInterrupt):
        run_extraction(extractor, utterances, sites, store, **OPTIONS)
    assert [part.name.rsplit("-", 1)[-1] for part in store.glob("*.h5") if is_complete(part)] == ["part00000.h5"]
    assert _leftovers(store) == []
    assert len(ShardReader(store)) == 3


def test_an_interrupted_wait_lets_the_part_end_before_its_claim_goes(tmp_path, monkeypatch):
    import extract.runner
    from extract.store import PartClaim

    utterances, extractor = _corpus(tmp_path), tiny_extractor("s2t")
    sites = extractor.resolve_sites("all")
    events, real_close, real_release, real_in_background = [], PartWriter.close, PartClaim.release, extract.runner.in_background
    closing_may_finish = threading.Event()

    def close(writer):
        closing_may_finish.wait(timeout=10)
        path = real_close(writer)
        events.append(("closed", writer.path.name))
        return path

    def release(claim):
        if claim.held:
            events.append(("released", claim.target.name))
        real_release(claim)

    class InterruptedWait:  # the first wait on the ending part is cut by Ctrl-C while the part still ends
        def __init__(self, future):
            self.future = future

        def result(self):
            threading.Timer(0.2, closing_may_finish.set).start()
            raise KeyboardInterrupt

        def done(self):
            return self.future.done()

        def exception(self):
            return self.future.exception()

    monkeypatch.setattr(PartWriter, "close", close)
    monkeypatch.setattr(PartClaim, "release", release)
    monkeypatch.setattr(extract.runner, "in_background", lambda call: InterruptedWait(real_in_background(call)))
    monkeypatch.setattr(extract.runner, "wait", lambda futures: [future.future.result() for future in futures])
    with pytest.raises(KeyboardInterrupt):
        run_extraction(extractor, utterances, sites, tmp_path / "store", **OPTIONS)
    first = [event for event in events if event[1].endswith("part00000.h5")]
    assert first == [("closed", first[0][1]), ("released", first[0][1])]
    assert _leftovers(tmp_path / "store") == []


def test_when_the_ending_part_and_the_next_part_both_fail_the_ending_parts_error_is_raised(tmp_path, monkeypatch):
    utterances, extractor = _corpus(tmp_path), tiny_extractor("s2t")
    sites = extractor.resolve_sites("all")
    real_close, real_extract = PartWriter.close, extractor.extract
    first_part_failed = threading.Event()

    def close(writer):
        if _is_first_part(writer):
            first_part_failed.set()
            raise StoreError("disk trouble while the first part ended")
        return real_close(writer)

    def extract(*args, **kwargs):
        if kwargs["ids"][0] in {"u3", "u4", "u5"}:  # the second part's model fails after the first part's end did
            assert first_part_failed.wait(timeout=10)
            raise RuntimeError("the second part's model failed")
        return real_extract(*args, **kwargs)

    monkeypatch.setattr(PartWriter, "close", close)
    monkeypatch.setattr(extractor, "extract", extract)
    store = tmp_path / "store"
    with pytest.raises(StoreError, match="disk trouble") as raised:  # the one a loop in one thread raises: part 0's, first
        run_extraction(extractor, utterances, sites, store, **OPTIONS)
    assert "the second part's model failed" in str(raised.value.__context__)  # the later error is kept beside it
    assert not any(is_complete(part) for part in store.glob("*.h5"))
    assert _leftovers(store) == []


def test_the_report_counts_skipped_audio_an_empty_part_and_a_part_another_writer_finished(tmp_path, monkeypatch):
    import shutil

    utterances, extractor = _corpus(tmp_path), tiny_extractor("s2t")
    sites = extractor.resolve_sites("all")
    for index in (1, 3, 4, 5):  # u1 in part 0; part 1 (u3, u4, u5) wholly skipped
        (tmp_path / "audio" / f"u{index}.wav").write_bytes(b"RIFF....WAVEjunk")
    clean = run_extraction(extractor, utterances, sites, tmp_path / "clean", **OPTIONS)
    assert clean.written == 3 and [entry["id"] for entry in clean.skipped] == ["u1", "u3", "u4", "u5"]
    real_close = PartWriter.close
    store = tmp_path / "store"

    def close(writer):  # another writer finishes part 2 after this run's scan, while part 0 ends
        if _is_first_part(writer):
            (last,) = (tmp_path / "clean").glob("*part00002.h5")
            shutil.copy(last, store / last.name)
        return real_close(writer)

    monkeypatch.setattr(PartWriter, "close", close)
    report = run_extraction(extractor, utterances, sites, store, **OPTIONS)
    assert (report.written, report.resumed) == (2, 1)
    assert report.skipped == clean.skipped and report.audio_notes == clean.audio_notes
    assert [Path(name).name for name in report.parts] == [Path(name).name for name in clean.parts]
    assert _leftovers(store) == []


def test_a_shard_with_no_part_to_write(tmp_path):
    utterances, extractor = _corpus(tmp_path, count=1), tiny_extractor("s2t")
    report = run_extraction(
        extractor,
        utterances,
        extractor.resolve_sites("all"),
        tmp_path / "store",
        **{**OPTIONS, "options": replace(OPTIONS["options"], num_shards=2, shard_index=1)},
    )
    assert (report.written, report.resumed, report.parts) == (0, 0, [])
    assert _leftovers(tmp_path / "store") == []


_TWICE_INTERRUPTED = """
import signal, sys, threading, time
from pathlib import Path
import numpy as np
from extract.families import tiny_extractor
from extract.runner import run_extraction
from extract.stage_options import ExtractOptions
from extract.store import PartWriter
from tests.corpus import write_corpus

# Ctrl-C as a terminal delivers it: a suite started in the background (`make test &`) passes SIGINT down ignored
signal.signal(signal.SIGINT, signal.default_int_handler)
folder = Path(sys.argv[1])
rng = np.random.default_rng(0)
waves = [(0.1 * rng.standard_normal(int(16_000 * seconds))).astype(np.float32) for seconds in np.linspace(0.5, 1.5, 7)]
utterances, extractor = write_corpus(folder, waves, speakers=3), tiny_extractor("s2t")
real_close = PartWriter.close

def close(writer):
    if writer.path.name.endswith("part00000.h5"):
        (folder / "closing").touch()
        deadline = time.monotonic() + 30  # the first part's end lasts until both interrupts have landed (however loaded the machine)
        while not (folder / "interrupted").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    return real_close(writer)

PartWriter.close = close
options = ExtractOptions(storage_dtype="float32", batch_seconds=2.0, utterances_per_part=3)
run_extraction(extractor, utterances, extractor.resolve_sites("all"), folder / "store", options, config={"test": 1}, show_progress=False)
"""


def test_a_second_interrupt_while_a_part_ends_leaves_nothing_a_rerun_trips_on(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen([sys.executable, "-c", _TWICE_INTERRUPTED, str(tmp_path)], env={**os.environ, "PYTHONPATH": str(root)}, cwd=root)
    deadline = time.monotonic() + 120
    while not (tmp_path / "closing").exists():
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    for _ in range(2):  # an impatient Ctrl-C, twice
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
    (tmp_path / "interrupted").touch()
    assert process.wait(timeout=60) != 0
    assert _leftovers(tmp_path / "store") == []  # no temporary file without its claim: a rerun would refuse it
    utterances, extractor = _corpus(tmp_path), tiny_extractor("s2t")
    report = run_extraction(extractor, utterances, extractor.resolve_sites("all"), tmp_path / "store", **OPTIONS)
    assert report.written + report.resumed == len(utterances)
