"""Round 4 of the hostile-input pass (2026-12-03), issue 42: seeds and learning rates in range
(O07, O14, Q03, Q04), settings files missing, not JSON or not an object (P57, P72, Q01, Q02, Q08,
Q11), ``extract --overwrite`` checking before it moves anything (X37, X38, X39, Q10), and Ctrl-C or
SIGTERM ending a command in one line with its claims released (K08, K16, K18)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from experiments import asr_gap, decoder_probe, erase, patch, probe, probe_data
from experiments import extract as extract_command
from extract.options import SEED_MOST
from extract.runner import SettingsMismatchError, check_settings
from tests.paths import CHECKOUT


def _one_line(capsys) -> str:
    """The error line: the last of stderr (after argparse's usage lines, a model's loading bar), with no traceback."""
    error = capsys.readouterr().err.strip()
    assert error and "Traceback" not in error
    return error.splitlines()[-1]


SEEDED = {
    "probe": (probe.main, ["--store", "s", "--site", "x", "--probe", "mean", "--out", "p.jsonl"]),
    "probe_data": (probe_data.main, ["--from", "m.jsonl", "--train", "4,4", "--dev", "2,2", "--out", "o.jsonl"]),
    "asr_gap": (asr_gap.main, ["--hypotheses", "h.jsonl", "--out", "g.json"]),
    "erase fit": (erase.main, ["fit", "--store", "s", "--site", "x", "--out", "e.safetensors"]),
    "decoder_probe": (decoder_probe.main, ["--store", "s", "--out", "d.jsonl"]),
    "patch": (patch.main, ["--family", "whisper", "--checkpoint", "c", "--manifest", "m.jsonl", "--sites", "encoder.final", "--out", "p.jsonl"]),
    "extract": (extract_command.main, ["--family", "whisper", "--checkpoint", "c", "--manifest", "m.jsonl", "--random-init", "--out", "s"]),
}


def _status(main, argv) -> int:
    """A command's exit status, whether it returns it or exits with it (argparse's errors)."""
    try:
        return main(argv)
    except SystemExit as exited:
        return exited.code


@pytest.mark.parametrize("seed", [-1, SEED_MOST + 1])
@pytest.mark.parametrize("command", sorted(SEEDED))
def test_o14_q03_q04_a_seed_out_of_range_is_one_line_in_every_command(command, seed, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main, argv = SEEDED[command]
    assert _status(main, [*argv, "--seed", str(seed)]) == 2
    error = _one_line(capsys)
    assert f"{seed}: must be at {'least 0' if seed < 0 else f'most {SEED_MOST}'}" in error, error
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_o07_a_learning_rate_too_large_for_adam_is_refused(capsys):
    assert _status(probe.main, ["--store", "s", "--site", "x", "--probe", "attention", "--lr", "1e39", "--out", "p.jsonl"]) == 2
    assert "lr must be at most 3.4e+37" in _one_line(capsys)


# --- settings files --------------------------------------------------------------------------------


SETTINGS = {"model": "m", "max_new_tokens": 6}


def _rows(tmp_path) -> tuple[Path, Path]:
    out = tmp_path / "h.jsonl"
    out.write_text(json.dumps({"id": "a"}) + "\n")
    return tmp_path / "h.jsonl.settings.json", out


def test_p72_q11_rows_without_their_settings_file_are_not_resumed(tmp_path):
    path, out = _rows(tmp_path)
    with pytest.raises(SettingsMismatchError, match=r"holds rows but not its settings file h\.jsonl\.settings\.json: .*not resumed"):
        check_settings(path, SETTINGS, out)
    assert not path.exists()  # no settings written beside rows they did not produce


@pytest.mark.parametrize(
    ("text", "expected"),
    [("garbage\n", r"not a readable settings file \(JSONDecodeError"), ("[1, 2]\n", r"holds a JSON object, and this one holds list \[1, 2\]")],
)
def test_p57_q01_q08_a_settings_file_that_is_not_a_json_object_is_one_line(tmp_path, text, expected):
    path, out = _rows(tmp_path)
    path.write_text(text)
    with pytest.raises(SettingsMismatchError, match=expected) as refused:
        check_settings(path, SETTINGS, out)
    assert "\n" not in str(refused.value) and path.read_text() == text


def test_settings_of_a_file_without_rows_are_still_written(tmp_path):
    path, out = tmp_path / "h.jsonl.settings.json", tmp_path / "h.jsonl"
    check_settings(path, SETTINGS, out)
    assert json.loads(path.read_text()) == SETTINGS


def test_q02_asr_gap_names_a_damaged_settings_file_as_damaged(tmp_path):
    from experiments.scoring.gaps import hypotheses_attribute
    from extract.attributes import LabelError

    _, out = _rows(tmp_path)
    (tmp_path / "h.jsonl.settings.json").write_text("garbage\n")
    with pytest.raises(LabelError, match=r"h\.jsonl\.settings\.json: not a readable settings file .*restore it, or pass --labels MANIFEST"):
        hypotheses_attribute(out, "accent")


# --- extract --overwrite ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def whisper_checkpoint(tmp_path_factory):
    from tests.tiny_whisper import save_tiny_whisper

    return save_tiny_whisper(tmp_path_factory.mktemp("tw"), source_positions=100, chunk_seconds=2)


def _manifest(path: Path) -> Path:
    import numpy as np
    import soundfile

    path.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for index in range(2):
        audio = path.parent / f"a{index}.wav"
        soundfile.write(audio, (0.1 * np.random.default_rng(index).standard_normal(8000)).astype(np.float32), 16000)
        rows.append({"id": f"u{index}", "audio": str(audio), "language": "en", "text": "x", "gender": "female", "speaker": f"s{index}"})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _extract(checkpoint, manifest, out) -> list[str]:
    return [
        "--family",
        "whisper",
        "--checkpoint",
        str(checkpoint),
        "--manifest",
        str(manifest),
        "--device",
        "cpu",
        "--quiet",
        "--sites",
        "encoder.final",
        "--out",
        str(out),
    ]


def test_x37_x38_x39_q10_overwrite_moves_nothing_it_should_not(tmp_path, whisper_checkpoint, capsys, monkeypatch):
    manifest = _manifest(tmp_path / "data" / "m.jsonl")
    store = tmp_path / "w" / "s"
    assert _status(extract_command.main, _extract(whisper_checkpoint, manifest, store)) == 0
    before = sorted(p.name for p in store.iterdir())
    capsys.readouterr()

    inside = store / "m.jsonl"  # X37: the manifest the run reads lies inside --out
    inside.write_text(manifest.read_text())
    assert _status(extract_command.main, [*_extract(whisper_checkpoint, inside, store), "--overwrite"]) == 2
    assert "which this run reads: it lies inside --out" in _one_line(capsys) and inside.exists()
    inside.unlink()

    (store / "notes.txt").write_text("mine")  # X39: a folder that is not (only) a store
    assert _status(extract_command.main, [*_extract(whisper_checkpoint, manifest, store), "--overwrite"]) == 2
    assert "is not a store (it holds notes.txt)" in _one_line(capsys)
    (store / "notes.txt").unlink()

    assert _status(extract_command.main, [*_extract(whisper_checkpoint, manifest, f"{store}/.."), "--overwrite"]) == 2  # Q10: the store's parent
    assert f"{tmp_path / 'w'} is not a store (it holds s)" in _one_line(capsys)

    monkeypatch.chdir(store)  # X38: --out . from inside the store
    assert _status(extract_command.main, [*_extract(whisper_checkpoint, manifest, "."), "--overwrite"]) == 2
    assert "is the folder this command runs in" in _one_line(capsys)
    assert sorted(p.name for p in store.iterdir()) == before and not (tmp_path / "w" / ".superseded").exists()

    monkeypatch.chdir(tmp_path)
    assert _status(extract_command.main, [*_extract(whisper_checkpoint, manifest, store), "--overwrite"]) == 0  # a store: set aside
    assert len(list((tmp_path / "w" / ".superseded").glob("*/s/*.h5"))) == len(before)


# --- Ctrl-C and SIGTERM ----------------------------------------------------------------------------


HOLDING = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from experiments.cli import run_cli
    from extract.appendlog import AppendLog, RowKind

    def command():
        with AppendLog(Path(sys.argv[1]), RowKind("row", ("id",))):
            Path(sys.argv[1] + ".ready").write_text("")
            time.sleep(60)
        return 0

    sys.exit(run_cli(command))
    """
)


@pytest.mark.parametrize(("signals", "status"), [([signal.SIGINT], 130), ([signal.SIGINT, signal.SIGINT], 130), ([signal.SIGTERM], 143)])
def test_k08_k16_k18_a_stopped_command_says_one_line_and_releases_its_claim(tmp_path, signals, status):
    out = tmp_path / "rows.jsonl"
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    process = subprocess.Popen([sys.executable, "-c", HOLDING, str(out)], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not Path(f"{out}.ready").exists() and time.time() < deadline:
        time.sleep(0.05)
    for number in signals:
        process.send_signal(number)
        time.sleep(0.05)
    _, error = process.communicate(timeout=60)
    assert process.returncode == status
    assert "Traceback" not in error and not Path(f"{out}.lock").exists()
    if signals[0] == signal.SIGINT:
        assert error.strip().splitlines() == [
            "error: interrupted (Ctrl-C): what was finished is kept (complete parts, written rows) and what was being written was discarded; "
            "rerun the same command to resume"
        ]


# --- the weak messages of round 4 --------------------------------------------------------------------


def test_o11_an_empty_language_is_refused(capsys):
    assert _status(probe.main, ["--store", "s", "--site", "x", "--probe", "mean", "--language", "", "--out", "p.jsonl"]) == 2
    assert "language '' is empty: give a language code" in _one_line(capsys)


def test_pd06_a_sample_without_training_segments_is_refused(tmp_path, capsys):
    manifest = _manifest(tmp_path / "m.jsonl")
    assert _status(probe_data.main, ["--from", str(manifest), "--train", "0,0", "--dev", "0,0", "--out", str(tmp_path / "o.jsonl")]) == 2
    assert "--train 0,0: a probe trains on both genders" in _one_line(capsys) and not (tmp_path / "o.jsonl").exists()


def test_n30_placeholders_into_a_file_is_one_line(tmp_path, capsys):
    from experiments.study.__main__ import main as study

    (tmp_path / "f").write_text("x")
    (tmp_path / "s.yaml").write_text(
        "name: s\nout: runs/s\nmodels: [{name: m, family: whisper, checkpoint: tiny-random}]\ncorpora: [{name: c, task: asr, manifests: {en: en.jsonl}}]\n"
    )
    assert _status(study, ["run", str(tmp_path / "s.yaml"), "--placeholders", str(tmp_path / "f")]) == 2
    assert "--placeholders" in (line := _one_line(capsys)) and "is a file; give a folder" in line


def test_x10_x11_extract_sites_mix_every_k_all_and_names():
    from extract.families.base import select_sites
    from extract.families.errors import UnknownSiteError

    table = ["embed", "layer.0", "layer.1", "layer.2", "final"]
    assert select_sites(table, ["every:2", "layer.0"], "f") == ["embed", "layer.0", "layer.1", "final"]  # every:2: embed, layer.1, final
    assert select_sites(table, ["all", "final"], "f") == table
    with pytest.raises(UnknownSiteError, match="unknown site"):
        select_sites(table, ["every:2", "nosuch"], "f")


def test_p59_a_damaged_line_among_a_commands_own_rows_says_fix_that_line(tmp_path):
    from extract.appendlog import OutputKindError, RowKind, parse_rows

    data = b'{"id": "a"}\n{garbage\n{"id": "c"}\n'
    with pytest.raises(OutputKindError, match=r":2: not a row \(not JSON: .*\), after 1 that are: fix that line, or move the file aside"):
        parse_rows(tmp_path / "r.jsonl", data, RowKind("row", ("id",)))
    with pytest.raises(OutputKindError, match="it is not an output of this command"):
        parse_rows(tmp_path / "r.jsonl", b"{garbage\n", RowKind("row", ("id",)))


def test_ctrl_c_while_the_dispatcher_loads_a_stage_is_one_line_and_130(monkeypatch, capsys):
    from experiments import __main__ as entry
    from experiments import stages

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(stages, "run", interrupted)
    previous = signal.getsignal(signal.SIGINT)
    try:
        assert entry.main(["probe", "--help"], prog="speech-gender") == 130
    finally:
        signal.signal(signal.SIGINT, previous)  # interrupted() ignores later Ctrl-Cs, as a command ending does
    assert _one_line(capsys).startswith("error: interrupted (Ctrl-C)")
