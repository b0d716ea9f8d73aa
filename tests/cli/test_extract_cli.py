"""The extraction CLI's argument errors: one line, exit 2, before any model loads."""

import pytest

from experiments import extract as cli


@pytest.fixture
def no_model(monkeypatch):
    def refuse(spec, **options):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr("extract.spec.load_extractor", refuse)


def _error_of(argv, capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    error = capsys.readouterr().err.strip()
    assert stopped.value.code == 2 and len(error.splitlines()) == 1, error
    return error


def _manifest(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"id": "a", "audio": "a.wav", "language": "en", "text": "x", "gender": "female", "speaker": "s"}\n')
    return path


def test_a_folder_given_as_the_manifest(tmp_path, capsys, no_model):
    error = _error_of(["--family", "whisper", "--manifest", str(tmp_path), "--out", str(tmp_path / "s")], capsys)
    assert error == f"error: --manifest {tmp_path} is a folder; give the manifest file (JSONL)"


def test_out_that_is_a_file(tmp_path, capsys, no_model):
    (tmp_path / "taken").write_text("x")
    error = _error_of(["--family", "whisper", "--manifest", str(_manifest(tmp_path)), "--out", str(tmp_path / "taken")], capsys)
    assert error.startswith(f"error: --out {tmp_path / 'taken'} is a file; give a folder")


@pytest.mark.parametrize(
    "shards, expected",
    [
        (["--shard-index", "3", "--num-shards", "3"], "--shard-index 3 is outside 0..2 for --num-shards 3"),
        (["--shard-index", "-1", "--num-shards", "2"], "--shard-index -1 is outside 0..1"),
        (["--num-shards", "0"], "--num-shards 0: must be at least 1"),
        (["--utterances-per-part", "0"], "--utterances-per-part 0: must be at least 1"),
    ],
)
def test_shards_out_of_range_before_the_model_loads(tmp_path, capsys, no_model, shards, expected):
    error = _error_of(["--family", "whisper", "--manifest", str(_manifest(tmp_path)), "--out", str(tmp_path / "s"), *shards], capsys)
    assert expected in error


def test_a_checkpoint_folder_that_does_not_exist(tmp_path, capsys, no_model):
    missing = tmp_path / "models" / "whisper-small"
    error = _error_of(["--family", "whisper", "--checkpoint", str(missing), "--manifest", str(_manifest(tmp_path)), "--out", str(tmp_path / "s")], capsys)
    assert error == f"error: --checkpoint {missing}: no such folder (and not a hub id such as owner/name); check the path"


def test_a_checkpoint_that_cannot_be_loaded_is_one_line(tmp_path, capsys, monkeypatch):
    def offline(spec, **options):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files.\nCheck your connection.")

    monkeypatch.setattr("extract.spec.load_extractor", offline)
    error = _error_of(
        ["--family", "whisper", "--checkpoint", "someone/whisper-x", "--manifest", str(_manifest(tmp_path)), "--out", str(tmp_path / "s")], capsys
    )
    assert error == "error: cannot load --checkpoint someone/whisper-x: We couldn't connect to 'https://huggingface.co' to load the files."
