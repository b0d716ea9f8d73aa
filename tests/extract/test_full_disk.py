"""A full disk (or a file size limit) ends a command with one line naming the file, nothing half
written is left behind, and the rerun with space finishes the work: extraction (#127), transcription
(#135), GRAFN apply (#43), and any command through ``run_cli``."""

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments.cli import run_cli
from extract.diskfull import DiskFullError, disk_full, is_disk_full, naming_full_disk, write_text_whole
from extract.manifest import write_manifest
from extract.store import PartClaim, PartWriter, ShardReader, StoreError
from tests.extract.test_store_hardening import _corpus
from tests.paths import CHECKOUT

SITE = "encoder.final"
DEV_FULL = Path("/dev/full")  # every write to it fails with ENOSPC, as on a full disk
needs_dev_full = pytest.mark.skipif(not DEV_FULL.exists(), reason="needs /dev/full (Linux)")

LIMITED_EXTRACTION = r"""
import resource, signal, sys
import extract.spec
from experiments import extract as cli
from extract.families import tiny_extractor

limit = int(sys.argv[1])
if limit:  # writes past this size fail with EFBIG, through the same HDF5 paths as a full disk
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
extract.spec.load_extractor = lambda spec, **options: tiny_extractor("whisper")
sys.exit(cli.main(sys.argv[2:]))
"""


def _extract(out, manifest, limit=0):
    argv = ["--family", "whisper", "--manifest", str(manifest), "--sites", "all", "--out", str(out), "--quiet", "--utterances-per-part", "2"]
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    return subprocess.run([sys.executable, "-c", LIMITED_EXTRACTION, str(limit), *argv], capture_output=True, text=True, env=env, timeout=300)


def _assert_one_line(stderr, start):
    lines = [line for line in stderr.splitlines() if "pkg_resources" not in line]
    assert len(lines) == 1 and lines[0].startswith(start), stderr[-3000:]


def test_hdf5_failing_to_write_a_part_ends_with_one_line_and_the_rerun_completes(tmp_path):
    """A real failed write inside HDF5 (here a file size limit: portable, no root needed) used to
    print hundreds of traceback lines from freed datasets and crash the process (exit 139)."""
    manifest = write_manifest(tmp_path / "m.jsonl", _corpus(tmp_path, seconds=(0.5, 0.6, 0.7)))
    out = tmp_path / "s"
    failed = _extract(out, manifest, limit=256 * 1024)
    assert failed.returncode == 2, failed.stderr[-3000:]
    _assert_one_line(failed.stderr, f"error: cannot write shard0000of0001-part00000.h5 in {out} (File too large): the part was discarded")
    assert not list(out.iterdir())  # no part, no temporary file, no claim
    finished = _extract(out, manifest)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert len(ShardReader(out)) == 3


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_really_full_disk_during_extraction_ends_with_one_line(tmp_path):
    """#127 as the audit ran it: a tmpfs too small for the store; then the same disk with no room for the claim."""
    manifest = write_manifest(tmp_path / "m.jsonl", _corpus(tmp_path, seconds=(0.5, 0.6, 0.7)))
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        out = disk / "s"
        failed = _extract(out, manifest)
        assert failed.returncode == 2, failed.stderr[-3000:]
        _assert_one_line(failed.stderr, f"error: disk full while writing shard0000of0001-part00000.h5 in {out}: the part was discarded")
        assert not list(out.iterdir())
        with pytest.raises(OSError), open(disk / "filler", "wb") as filler:
            while True:
                filler.write(bytes(1 << 16))
        failed = _extract(out, manifest)
        assert failed.returncode == 2, failed.stderr[-3000:]
        _assert_one_line(failed.stderr, f"error: disk full while writing the claim {out / 'shard0000of0001-part00000.h5.lock'}")
        assert not list(out.iterdir())  # an empty claim would read as another writer's
        (disk / "filler").unlink()
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        finished = _extract(out, manifest)
        assert finished.returncode == 0, finished.stderr[-3000:]
        assert len(ShardReader(out)) == 3
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=True)


def test_a_claim_that_cannot_be_written_is_removed_and_named(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(json, "dump", full)
    part = tmp_path / "part-00000.h5"
    with pytest.raises(StoreError, match=f"disk full while writing the claim {part}.lock: nothing was written"):
        PartClaim(part)
    assert not list(tmp_path.iterdir())


def test_a_part_that_cannot_even_be_created_leaves_nothing_and_is_named(tmp_path, monkeypatch):
    import h5py

    def created_then_full(path, mode, **kwargs):
        Path(path).write_bytes(b"")  # exclusive create succeeded, writing the superblock did not
        raise OSError(errno.ENOSPC, "Unable to synchronously create file (file write failed: errno = 28)")

    monkeypatch.setattr(h5py, "File", created_then_full)
    with pytest.raises(StoreError, match="disk full while writing part-00000.h5 in"):
        PartWriter(tmp_path / "part-00000.h5", {SITE: 2}, "float32", {})
    assert not list(tmp_path.iterdir())


def test_a_failed_index_write_discards_the_part_with_its_message(tmp_path, monkeypatch):
    def full(self):
        raise RuntimeError("Unable to synchronously flush file (file write failed: errno = 28, error message = 'No space left on device')")

    monkeypatch.setattr(PartWriter, "_write_index", full)
    with pytest.raises(StoreError, match="disk full while writing part-00000.h5"):
        with PartWriter(tmp_path / "part-00000.h5", {SITE: 2}, "float32", {}) as writer:
            writer.add("a", {SITE: np.ones((3, 2), np.float32)}, {})
    assert not list(tmp_path.iterdir())


def test_what_counts_as_a_full_disk():
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert is_disk_full(RuntimeError("Can't decrement id ref count (file write failed: ..., errno = 28, error message = 'No space left on device')"))
    assert not is_disk_full(OSError(errno.EFBIG, "File too large"))
    assert not is_disk_full(ValueError("No space left on device"))


def test_naming_full_disk_names_the_file_and_keeps_other_errors():
    with pytest.raises(DiskFullError) as error:
        with naming_full_disk("out.jsonl", "rows so far are kept"):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert str(error.value) == "disk full while writing out.jsonl: free space and rerun; rows so far are kept"
    assert error.value.errno == errno.ENOSPC and error.value.filename == "out.jsonl"
    with pytest.raises(PermissionError):
        with naming_full_disk("out.jsonl", "x"):
            raise PermissionError(errno.EACCES, "Permission denied")


def test_transcription_on_a_full_disk_names_its_output(tmp_path, tone, monkeypatch):
    """#135: the OSError of the output file's close escaped as a 23-line traceback."""
    from extract.appendlog import AppendLog
    from extract.families import tiny_extractor
    from extract.families.s2t import S2TGenerator
    from extract.runner import run_transcription
    from tests.extract.test_transcribe import IdTokenizer, _utterances

    def full(self, rows):
        raise OSError(errno.ENOSPC, "No space left on device")  # as a write or a flush on a full disk reports it, without the file

    monkeypatch.setattr(AppendLog, "append", full)
    out = tmp_path / "hyps.jsonl"
    generator = S2TGenerator(tiny_extractor("s2t"), IdTokenizer(), max_new_tokens=2)
    with pytest.raises(DiskFullError) as error:
        run_transcription(generator, _utterances(tone, count=2), out, "asr", None, "tiny", batch_seconds=10, max_seconds=30, show_progress=False)
    assert str(error.value) == f"disk full while writing {out}: free space and rerun; the rows written so far are kept and the rerun continues after them"


@pytest.mark.parametrize("command", ["transcribe", "extract"])
def test_the_transcribe_and_extract_commands_end_any_os_error_with_one_line(command, capsys):
    import argparse
    import importlib

    from experiments.cli import command_main

    module = importlib.import_module(f"experiments.{command}")

    def full(args):
        raise disk_full("/x/out", "finished work is kept")

    main = command_main(argparse.ArgumentParser, full)
    assert module.main.__qualname__ == main.__qualname__  # the command's main is command_main's: its run's errors end the same way
    assert main([]) == 2
    assert capsys.readouterr().err == "error: disk full while writing /x/out: free space and rerun; finished work is kept\n"


@needs_dev_full
def test_grafn_apply_on_a_full_disk_names_the_wav_and_resumes(tmp_path, capsys):
    """#43: libsndfile's "System error." escaped as a traceback; now Python's ENOSPC names the file."""
    from experiments import grafn
    from experiments.normalisation.corpus import output_name

    utterances = _corpus(tmp_path, seconds=(0.5, 0.6, 0.7, 0.8))
    manifest = write_manifest(tmp_path / "m.jsonl", utterances)
    filters, audio = tmp_path / "filters.json", tmp_path / "ga"
    assert grafn.main(["fit", "--manifest", str(manifest), "--out", str(filters), "--quiet"]) == 0
    audio.mkdir()
    (audio / (output_name("u2") + ".tmp")).symlink_to(DEV_FULL)  # the third WAV hits the full disk
    argv = ["apply", "--filters", str(filters), "--manifest", str(manifest), "--audio-dir", str(audio), "--out", str(tmp_path / "ga.jsonl"), "--quiet"]
    capsys.readouterr()
    assert grafn.main(argv) == 2
    error = capsys.readouterr().err
    assert error == (
        f"error: disk full while writing {audio / output_name('u2')}: free space and rerun; "
        "the utterances normalised so far are kept and the rerun continues after them\n"
    )
    assert sorted(p.name for p in audio.glob("*.wav*")) == sorted(output_name(u) for u in ("u0", "u1"))  # the partial file is gone
    assert grafn.main(argv) == 0
    assert "2 done by an earlier run" in capsys.readouterr().out
    assert len((tmp_path / "ga.jsonl").read_text().splitlines()) == 4


def test_run_cli_names_a_full_disk_and_libsndfile_errors_in_one_line(tmp_path, capsys):
    import soundfile

    def unnamed_full_disk():
        raise OSError(errno.ENOSPC, "No space left on device")

    def named_full_disk():
        raise OSError(errno.ENOSPC, "No space left on device", "out.json")

    def multi_line():
        raise OSError(errno.EIO, "Can't write data (file write failed: time = Tue\n, filename = 'x.h5')")

    def unreadable_audio():
        bad = tmp_path / "bad.wav"
        bad.write_bytes(b"RIFF\0\0\0\0WAVEfmt garbage")
        soundfile.read(bad)

    assert run_cli(unnamed_full_disk) == 2 and capsys.readouterr().err == "error: disk full: free space and rerun\n"
    assert run_cli(named_full_disk) == 2 and capsys.readouterr().err == "error: disk full while writing out.json: free space and rerun\n"
    assert run_cli(multi_line) == 2 and capsys.readouterr().err == "error: [Errno 5] Can't write data (file write failed: time = Tue , filename = 'x.h5')\n"
    assert run_cli(unreadable_audio) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: libsndfile: Error opening '{tmp_path / 'bad.wav'}'") and error.count("\n") == 1


def test_a_settings_file_the_full_disk_cuts_is_named(tmp_path, monkeypatch):
    """#135 as rerun after the fixes: with a few KB free the settings file was the first write to fail,
    and its error named no file (`disk full: free space and rerun`)."""
    from pathlib import Path as PathType

    from extract.runner import check_settings

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(PathType, "write_text", full)
    path = tmp_path / "h.jsonl.settings.json"
    with pytest.raises(DiskFullError, match=f"disk full while writing {path}: free space and rerun; no row was transcribed yet"):
        check_settings(path, {"model": "m"}, tmp_path / "h.jsonl")


def test_a_text_written_whole_keeps_the_old_file_on_a_full_disk(tmp_path, monkeypatch):
    """write_text_whole (a patch run's summary and pairs, the real-voice card): the new text replaces
    the file only once written; a full disk is one DiskFullError naming the file, the old text stays
    and no temporary file is left."""
    path = write_text_whole(tmp_path / "summary.json", "old\n")
    assert path.read_text(encoding="utf-8") == "old\n" and write_text_whole(path, "new\n").read_text(encoding="utf-8") == "new\n"
    real_write = Path.write_text

    def full(self, *args, **kwargs):
        real_write(self, "half", encoding="utf-8")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(DiskFullError, match=f"disk full while writing {path}: free space and rerun; it was not written"):
        write_text_whole(path, "newer\n")
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == "new\n" and sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
