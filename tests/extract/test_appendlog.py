"""Append-only JSONL outputs (extract.appendlog): one writer per file, a last line cut by a kill
removed before the next row, a file of another kind refused. Checked on the library and on every
writer that appends: transcribe, acoustics, lexical, the GRAFN done-list, the fine-tuning history
and probe results, with real second processes."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile

from extract.appendlog import AppendLog, OutputKindError, RowKind
from extract.claims import ClaimError
from extract.manifest import Utterance, write_manifest
from tests.paths import CHECKOUT

ROWS = RowKind("test row", ("id", "value"), unique="id")
FIRST = b'{"id": "a", "value": 1}\n'
ENV = {**os.environ, "PYTHONPATH": str(CHECKOUT)}


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.mark.parametrize(
    "tail",
    [
        b'{"id": "b", "val',  # killed mid-row
        '{"id": "b", "value": "é'.encode()[:-1],  # a UTF-8 sequence cut in half
        b'{"id": "b", "value": 2}',  # the row written, its newline not
        b'{"id": "b", "value": 2{"id": "c", "value": 3}\n',  # a cut row another writer ran on (the old fine-tuning history)
    ],
)
def test_a_cut_last_line_is_removed_with_a_note_and_the_next_row_starts_on_its_own_line(tmp_path, tail):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(FIRST + tail)
    notes = []
    with AppendLog(path, ROWS, note=notes.append) as log:
        assert log.rows == [{"id": "a", "value": 1}] and log.ids == {"a"}
        assert path.read_bytes() == FIRST
        log.append([{"id": "b", "value": 2}])
    assert notes == [f"{path}:2: removed an incomplete last line left by an interrupted run (a kill or a full disk); its work is redone"]
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"id": "a", "value": 1}, {"id": "b", "value": 2}]
    assert not list(tmp_path.glob("*.lock"))


@pytest.mark.parametrize(
    "content, where, problem",
    [
        (json.dumps({"id": "u1", "audio": "a.wav", "text": "x"}) + "\n", ":1:", "not a test row (no 'value')"),  # a manifest
        (json.dumps({"languages": {}, "groups": []}, indent=2) + "\n", ":1:", "not a test row (not JSON"),  # a JSON report
        ("hello", ":1:", "not a test row (not JSON"),  # one line of text without its newline: not a cut row
        ('{"id": "a", "value": 1}\n["a", "list"]\n', ":2:", "a JSON list, not an object"),
        ('{"id": "a", "value": 1}\n{"id": "a", "value": 2}\n', ":2:", "duplicate id 'a', first on line 1"),
    ],
)
def test_a_file_of_another_kind_is_refused_and_left_as_it_is(tmp_path, content, where, problem):
    path = tmp_path / "other.jsonl"
    path.write_text(content)
    with pytest.raises(OutputKindError) as refused:
        with AppendLog(path, ROWS):
            pytest.fail("opened")
    assert str(refused.value).startswith(f"{path}{where} ") and problem in str(refused.value)
    assert path.read_text() == content and not list(tmp_path.glob("*.lock"))


def test_a_second_writer_is_refused_naming_the_first_and_a_stale_claim_is_taken_over_only_when_asked(tmp_path):
    path = tmp_path / "rows.jsonl"
    with AppendLog(path, ROWS) as first:
        first.append([{"id": "a", "value": 1}])
        with pytest.raises(ClaimError, match=rf"rows.jsonl is being written by pid {os.getpid()} on host .*another process writes to this output"):
            with AppendLog(path, ROWS):
                pass
    lock = tmp_path / "rows.jsonl.lock"
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": _dead_pid(), "since": "yesterday"}))
    with pytest.raises(ClaimError, match=r"stale claim .*rows.jsonl.lock by pid \d+ .*that process is gone.*rerun with --reclaim-stale"):
        with AppendLog(path, ROWS):
            pass
    notes = []
    with AppendLog(path, ROWS, reclaim_stale=True, note=notes.append) as log:
        assert log.ids == {"a"}
    assert notes and "reclaimed the stale claim of pid" in notes[0] and not lock.exists()


# --- transcribe: two real processes on one --out, a killed run, a cut line, a manifest as --out ----------------


class StandIn:
    """A generator that writes "words N" for N samples; ``generate`` first touches ``started`` and
    waits until ``release`` exists (when given), so a test can act while the output is claimed."""

    extractor = SimpleNamespace(family="stand-in", input_seconds=float, fingerprint=None)

    def __init__(self, started: Path | None = None, release: str = ""):
        self.started, self.release = started, release

    def check(self, task, tgt_lang):
        pass

    def settings(self):
        return {"stand_in": True}

    def generate(self, audios, language, task, tgt_lang):
        if self.started is not None:
            self.started.touch()
        while self.release and not Path(self.release).exists():
            time.sleep(0.05)
        return [f"words {len(audio)}" for audio in audios]


TRANSCRIBER = """
import sys
from pathlib import Path
import extract.spec
from experiments import transcribe as cli
from tests.extract.test_appendlog import StandIn

extract.spec.load_generator = lambda spec, options: StandIn(Path(sys.argv[1]), sys.argv[2])
sys.exit(cli.main(sys.argv[3:]))
"""


def _manifest(tmp_path, count=6, language="en"):
    rows = []
    for index in range(count):
        path = tmp_path / "audio" / f"u{index}.wav"
        path.parent.mkdir(exist_ok=True)
        soundfile.write(path, 0.1 * np.sin(np.arange(8000 + 800 * index) / 7).astype(np.float32), 16_000)
        rows.append(Utterance(f"u{index}", str(path), language, f"text {index}", "female" if index % 2 else "male", f"s{index % 3}"))
    return write_manifest(tmp_path / "m.jsonl", rows)


def _transcribe(tmp_path, name, out, *extra, release=""):
    argv = ["--family", "whisper", "--task", "asr", "--manifest", str(tmp_path / "m.jsonl"), "--out", str(out), "--batch-seconds", "1", "--quiet", *extra]
    started = tmp_path / f"{name}.started"
    process = subprocess.Popen(
        [sys.executable, "-c", TRANSCRIBER, str(started), str(release), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )
    return process, started


def _wait_for(path, process, timeout=120.0):
    deadline = time.time() + timeout
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.time() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


def _ids(out):
    return [json.loads(line)["id"] for line in out.read_text().splitlines()]


def test_two_transcriptions_into_one_out_never_duplicate_ids(tmp_path):
    """#134: two processes on one --out both exited 0 with 260 ids twice."""
    _manifest(tmp_path)
    out, release = tmp_path / "hyps.jsonl", tmp_path / "release"
    first, first_started = _transcribe(tmp_path, "first", out, release=release)
    _wait_for(first_started, first)
    second, _ = _transcribe(tmp_path, "second", out)
    _, second_err = second.communicate(timeout=120)
    release.touch()
    _, first_err = first.communicate(timeout=120)
    assert first.returncode == 0, first_err
    assert second.returncode == 2 and second_err.startswith("error: ") and second_err.count("\n") == 1, second_err
    assert f"is being written by pid {first.pid} on host" in second_err
    assert sorted(_ids(out)) == [f"u{i}" for i in range(6)] and not list(tmp_path.glob("*.lock"))
    again, _ = _transcribe(tmp_path, "again", out)
    printed, _ = again.communicate(timeout=120)
    assert again.returncode == 0 and "0 of 6 utterances to do (6 already in" in printed and len(_ids(out)) == 6


def test_a_killed_transcription_leaves_a_claim_that_only_reclaim_stale_takes_over(tmp_path):
    _manifest(tmp_path)
    out = tmp_path / "hyps.jsonl"
    killed, started = _transcribe(tmp_path, "killed", out, release=tmp_path / "never")
    _wait_for(started, killed)
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=60)
    refused, _ = _transcribe(tmp_path, "refused", out)
    _, error = refused.communicate(timeout=120)
    assert refused.returncode == 2 and f"stale claim {out}.lock by pid {killed.pid}" in error and "--reclaim-stale" in error
    resumed, _ = _transcribe(tmp_path, "resumed", out, "--reclaim-stale")
    _, notes = resumed.communicate(timeout=120)
    assert resumed.returncode == 0 and f"reclaimed the stale claim of pid {killed.pid}" in notes
    assert sorted(_ids(out)) == [f"u{i}" for i in range(6)] and not list(tmp_path.glob("*.lock"))


def test_a_cut_hypothesis_line_is_redone_and_a_manifest_given_as_out_is_refused(tmp_path, capsys, monkeypatch):
    from experiments import transcribe

    monkeypatch.setattr("extract.spec.load_generator", lambda spec, options: StandIn())
    manifest = _manifest(tmp_path)
    out = tmp_path / "hyps.jsonl"
    argv = ["--family", "whisper", "--task", "asr", "--manifest", str(manifest), "--quiet", "--out"]
    assert transcribe.main([*argv, str(out)]) == 0  # a run that wrote its settings file and rows...
    capsys.readouterr()
    out.write_text(out.read_text().splitlines()[0] + "\n" + '{"id": "u1", "refer')  # ... killed after one row, mid-line
    assert transcribe.main([*argv, str(out)]) == 0
    printed = capsys.readouterr()
    assert f"{out}:2: removed an incomplete last line" in printed.err and "5 of 6 utterances to do (1 already in" in printed.out
    assert sorted(_ids(out)) == [f"u{i}" for i in range(6)]
    other = tmp_path / "other-manifest.jsonl"  # #136: a manifest as --out counted as 40 finished utterances
    other.write_bytes(manifest.read_bytes())
    assert transcribe.main([*argv, str(other)]) == 2
    error = capsys.readouterr().err
    assert error == f"error: {other}:1: not a hypothesis row (no 'hypothesis'); it is not an output of this command: write to another file\n"
    assert other.read_bytes() == manifest.read_bytes() and not Path(f"{other}.settings.json").exists()


# --- every other append-only writer: a second process holding the output is named ---------------------------

HOLDER = "import sys, time; from extract.claims import Claim; Claim(sys.argv[1]); print('held', flush=True); time.sleep(600)"


def _hold(path: Path) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True, env=ENV)
    assert holder.stdout.readline() == "held\n"
    return holder


def _acoustics(tmp_path, reclaim_stale=False):
    from experiments.analysis.acoustic import compute_acoustics
    from extract.manifest import read_manifest

    compute_acoustics(
        read_manifest(tmp_path / "m.jsonl"), tmp_path / "ac.jsonl", lambda text: 2, "words", speech="duration", show_progress=False, reclaim_stale=reclaim_stale
    )
    return tmp_path / "ac.jsonl"


def _grafn(tmp_path, reclaim_stale=False):
    from experiments.normalisation.calibration import fit_filters
    from experiments.normalisation.corpus import apply_to_manifest
    from experiments.normalisation.transform import GrafnParameters

    noise = np.random.default_rng(0).standard_normal(16_000)
    filters = fit_filters([("female", "a", noise), ("male", "b", noise[::-1].copy())], GrafnParameters()).save(tmp_path / "filters.json")
    apply_to_manifest(filters, tmp_path / "m.jsonl", tmp_path / "grafn", tmp_path / "grafn.jsonl", show_progress=False, reclaim_stale=reclaim_stale)
    return tmp_path / "grafn" / "grafn-done.jsonl"


def _history(tmp_path, reclaim_stale=False):
    from experiments.finetuning.tracking import history_log

    with history_log(tmp_path / "run" / "val_history.jsonl", reclaim_stale) as history:
        history.append([{"step": 0, "epoch": 0, "wer": 50.0}])
    return tmp_path / "run" / "val_history.jsonl"


def _lexical(tmp_path, reclaim_stale=False):
    from experiments import lexical

    argv = ["--manifest", str(tmp_path / "m.jsonl"), "--spacy-model", "fr_core_news_sm", "--out", str(tmp_path / "lex.jsonl"), "--quiet"]
    status = lexical.main([*argv, "--reclaim-stale"] if reclaim_stale else argv)
    if status != 0:
        raise ClaimError(f"lexical exited {status}")
    return tmp_path / "lex.jsonl"


def _probe_results(tmp_path, reclaim_stale=False):
    from probing.grid import run_all

    run_all([], tmp_path / "probes.jsonl", task=3, reclaim_stale=reclaim_stale)
    return tmp_path / "probes.jsonl.tasks" / "task-00003.jsonl"


WRITERS = {"acoustics": _acoustics, "grafn done-list": _grafn, "fine-tuning history": _history, "lexical": _lexical, "probe task file": _probe_results}
CLAIMED = {
    "acoustics": "ac.jsonl",
    "grafn done-list": "grafn/grafn-done.jsonl",
    "fine-tuning history": "run/val_history.jsonl",
    "lexical": "lex.jsonl",
    "probe task file": "probes.jsonl.tasks/task-00003.jsonl",
}


def _refusal(writer: str, tmp_path: Path, capsys) -> str:
    """Why ``writer`` was refused: its ClaimError, or for the lexical command its one ``error:`` line."""
    with pytest.raises(ClaimError) as refused:
        WRITERS[writer](tmp_path)
    if writer != "lexical":
        return str(refused.value)
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1, error
    return error


@pytest.mark.parametrize("writer", WRITERS)
def test_every_append_only_writer_refuses_a_second_process_and_takes_over_a_dead_one_only_when_asked(tmp_path, capsys, writer):
    """#102 (acoustics) and #41/#42 (grafn apply): two processes on one output both computed everything."""
    _manifest(tmp_path, count=2, language="fr")
    claimed = tmp_path / CLAIMED[writer]
    claimed.parent.mkdir(parents=True, exist_ok=True)
    holder = _hold(claimed)
    try:
        assert f"is being written by pid {holder.pid} on host" in _refusal(writer, tmp_path, capsys)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate(timeout=60)
    assert f"stale claim {claimed}.lock by pid {holder.pid}" in _refusal(writer, tmp_path, capsys)
    assert WRITERS[writer](tmp_path, reclaim_stale=True) == claimed
    assert f"reclaimed the stale claim of pid {holder.pid}" in capsys.readouterr().err
    assert not Path(f"{claimed}.lock").exists()


def test_probe_results_end_a_cut_line_before_appending_and_merging(tmp_path, capsys):
    """A merge or a grid task killed mid-row: the next row is not glued to the cut one, and the cut run has no row (it is redone)."""
    from probing.results import append_lines, load_rows, merge_task_results, task_results_file

    out = tmp_path / "r.jsonl"
    out.write_text('{"run_id": "a"}\n{"run_id": "b", "f1')
    append_lines(out, ['{"run_id": "c"}'])
    assert list(load_rows(out)) == ["a", "c"]
    task = task_results_file(out, 3)
    task.parent.mkdir()
    task.write_text('{"run_id": "d"}\n{"run_id": "e", "f1_mac')
    assert merge_task_results(out) == 1
    assert list(load_rows(out)) == ["a", "c", "d"] and not task.exists()
    assert capsys.readouterr().err.count("removed an incomplete last line") == 2


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/full", "folder"])
def test_an_output_that_is_no_regular_file_is_refused_unread(tmp_path, target):
    """A device given as an output was read to its end before appending (/dev/zero: forever, until memory ran out)."""
    from extract.appendlog import AppendLog, OutputKindError
    from extract.runner import HYPOTHESIS_ROWS

    path = tmp_path / "out.jsonl"
    if target == "folder":
        path.mkdir()
    elif Path(target).exists():
        path.symlink_to(target)
    else:
        pytest.skip(f"needs {target}")
    with pytest.raises(OutputKindError, match="out.jsonl: not a regular file"), AppendLog(path, HYPOTHESIS_ROWS):
        pass
