"""The family registry, the typed model spec, and the model-loading error path of the command lines."""

import pytest
import torch

from extract.families import FAMILIES, FAMILY_MODULES, tiny_extractor
from extract.families.base import Family
from extract.spec import ModelSpec, ModelSpecError, default_device, load_extractor


def test_the_registry_lists_one_self_contained_module_per_family():
    assert list(FAMILIES) == ["whisper", "seamless", "zeroswot", "s2t", "ssl"] == list(FAMILY_MODULES)
    for name, family in FAMILIES.items():
        assert isinstance(family, Family)
        assert family.name == family.extractor.family == family.generator.family == name
        assert family.extractor.__module__ == family.generator.__module__ == f"extract.families.{name}"


@pytest.mark.parametrize("name", [name for name, family in FAMILIES.items() if family.demo_sites])
def test_the_demo_sites_of_a_family_are_sites_of_its_tiny_model(name):
    assert set(FAMILIES[name].demo_sites) <= set(tiny_extractor(name).resolve_sites("all"))


def test_a_spec_names_a_known_family_and_dtype():
    with pytest.raises(ModelSpecError, match="unknown model family 'wav2vec'; known: s2t, seamless, ssl, whisper, zeroswot"):
        ModelSpec("wav2vec")
    with pytest.raises(ModelSpecError, match="unknown dtype 'int8'"):
        ModelSpec("whisper", dtype="int8")


def test_checkpoint_resolution(tmp_path):
    assert ModelSpec("s2t").resolved_checkpoint() == "facebook/s2t-medium-mustc-multilingual-st"
    assert ModelSpec("s2t", str(tmp_path)).resolved_checkpoint() == str(tmp_path)
    assert ModelSpec("s2t", "owner/model").resolved_checkpoint() == "owner/model"
    with pytest.raises(ModelSpecError, match="bundled weights exist only for whisper"):
        ModelSpec("seamless", "bundled-base").resolved_checkpoint()
    missing = tmp_path / "models" / "x"
    with pytest.raises(ModelSpecError, match=f"{missing}: no such folder"):
        ModelSpec("whisper", str(missing)).resolved_checkpoint()


def test_the_device_default_is_cuda_only_when_a_gpu_is_visible(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_device() == "cpu" == ModelSpec("whisper").device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_device() == "cuda"


def test_every_cli_with_a_device_flag_takes_the_one_default(monkeypatch):
    """``--device auto`` (the default) is resolved once the flags are parsed, not when the parser is
    built (building it imports no torch: tests/cli/test_entry_point.py)."""
    from experiments import extract, probe, transcribe

    required = {
        extract: ["--family", "whisper", "--manifest", "m.jsonl", "--out", "s"],
        transcribe: ["--family", "whisper", "--manifest", "m.jsonl", "--task", "asr", "--out", "h.jsonl"],
        probe: [],
    }
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    for available, expected in ((True, "cuda"), (False, "cpu")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda available=available: available)
        for cli, argv in required.items():
            assert cli.build_parser().get_default("device") == "auto"
            assert cli.build_parser().parse_args(argv).device == expected
            assert cli.build_parser().parse_args([*argv, "--device", "auto"]).device == expected
            if available:
                assert cli.build_parser().parse_args([*argv, "--device", "cuda:1"]).device == "cuda:1"
            else:  # a device this machine lacks: one line, unless --executor sends the work elsewhere
                with pytest.raises(SystemExit):
                    cli.build_parser().parse_args([*argv, "--device", "cuda:1"])


def test_the_family_names_a_parser_offers_are_the_registry_without_loading_it():
    from extract.families import FAMILIES, FAMILY_NAMES

    assert set(FAMILY_NAMES) == set(FAMILIES)


def test_a_saved_checkpoint_loads_through_the_spec_with_its_weights(tmp_path, capsys):
    original = tiny_extractor("s2t")
    original.model.save_pretrained(tmp_path)
    original.processor.save_pretrained(tmp_path)
    loaded = load_extractor(ModelSpec("s2t", str(tmp_path), device="cpu", trust_remote_code=True), keep_padding=True)
    assert (loaded.family, loaded.checkpoint, loaded.dtype) == ("s2t", str(tmp_path), torch.float32)
    for (name, mine), (_, theirs) in zip(original.model.state_dict().items(), loaded.model.state_dict().items()):
        assert torch.equal(mine, theirs), name
    notes = capsys.readouterr().err
    assert "--trust-remote-code has no effect for this family" in notes and "--keep-padding has no effect for this family" in notes
    random = load_extractor(ModelSpec("s2t", str(tmp_path), device="cpu", random_init=True, seed=1))
    again = load_extractor(ModelSpec("s2t", str(tmp_path), device="cpu", random_init=True, seed=1))
    first = next(iter(original.model.state_dict()))
    assert not torch.equal(random.model.state_dict()[first], original.model.state_dict()[first])
    assert random.random_init and not original.random_init  # a control's encoder outputs are not kept (extract.encoder_reuse)
    assert all(torch.equal(a, b) for a, b in zip(random.model.state_dict().values(), again.model.state_dict().values()))


def _manifest(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"id": "a", "audio": "a.wav", "language": "en", "text": "x", "gender": "female", "speaker": "s"}\n')
    return path


def _whisper_asr_argv(tmp_path, checkpoint: str, *extra: str) -> list[str]:
    """The transcription command's arguments: Whisper ``checkpoint`` transcribing :func:`_manifest` into h.jsonl."""
    return [
        "--family",
        "whisper",
        "--checkpoint",
        checkpoint,
        "--task",
        "asr",
        "--manifest",
        str(_manifest(tmp_path)),
        "--out",
        str(tmp_path / "h.jsonl"),
        *extra,
    ]


def _one_line_exit_2(main, argv, capsys) -> str:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    error = capsys.readouterr().err.strip()
    assert stopped.value.code == 2 and len(error.splitlines()) == 1, error
    return error


def test_transcribe_names_a_checkpoint_that_cannot_be_loaded_in_one_line(tmp_path, capsys, monkeypatch):
    from experiments import transcribe as cli

    def offline(spec, options=None):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files.\nCheck your connection.")

    monkeypatch.setattr("extract.spec.load_generator", offline)
    error = _one_line_exit_2(cli.main, _whisper_asr_argv(tmp_path, "someone/whisper-x"), capsys)
    assert error == "error: cannot load --checkpoint someone/whisper-x: We couldn't connect to 'https://huggingface.co' to load the files."


@pytest.mark.parametrize("cli_name, extra", [("extract", []), ("transcribe", ["--task", "st", "--tgt-lang", "es"])])
def test_remote_code_without_permission_is_one_line_in_both_clis(tmp_path, capsys, cli_name, extra):
    import importlib

    cli = importlib.import_module(f"experiments.{cli_name}")
    argv = ["--family", "zeroswot", "--manifest", str(_manifest(tmp_path)), "--out", str(tmp_path / "o"), *extra]
    assert _one_line_exit_2(cli.main, argv, capsys).startswith("error: ZeroSwot runs custom code from the hub: pass --trust-remote-code")


@pytest.mark.parametrize("cli_name, extra", [("extract", []), ("transcribe", ["--task", "asr"])])
def test_bundled_weights_of_a_family_without_them_is_one_line(tmp_path, capsys, cli_name, extra):
    import importlib

    cli = importlib.import_module(f"experiments.{cli_name}")
    argv = ["--family", "s2t", "--checkpoint", "bundled-base", "--manifest", str(_manifest(tmp_path)), "--out", str(tmp_path / "o"), *extra]
    assert _one_line_exit_2(cli.main, argv, capsys) == "error: bundled weights exist only for whisper"


def test_a_local_folder_without_tokenizer_files_is_one_line(tmp_path, capsys):
    """Real loading, no stand-in: a folder with the model but no tokenizer files used to end in a
    TypeError traceback inside transformers."""
    from experiments import transcribe as cli

    folder = tmp_path / "no-tokenizer"
    tiny = tiny_extractor("whisper")
    tiny.model.save_pretrained(folder)
    tiny.processor.save_pretrained(folder)  # a feature extractor only: no tokenizer files
    error = _one_line_exit_2(cli.main, _whisper_asr_argv(tmp_path, str(folder), "--device", "cpu"), capsys)
    assert error.startswith(f"error: cannot load --checkpoint {folder} (") and "complete transformers checkpoint" in error


def test_transcribe_refuses_a_folder_as_out_before_loading(tmp_path, capsys):
    from experiments import transcribe as cli

    argv = ["--family", "whisper", "--checkpoint", "nobody/never-loaded", "--task", "asr", "--manifest", str(_manifest(tmp_path)), "--out", str(tmp_path)]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.strip() == f"error: --out {tmp_path} is a folder; give the path of the hypotheses JSONL file"


def test_a_device_this_machine_lacks_is_refused_unless_the_work_is_submitted_elsewhere(monkeypatch, capsys):
    """A login node has no GPU; the job array it submits runs where one is (docs/scale.md)."""
    from experiments import extract

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    argv = ["--family", "whisper", "--manifest", "m.jsonl", "--out", "s", "--device", "cuda"]
    with pytest.raises(SystemExit) as stopped:
        extract.build_parser().parse_args(argv)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip() == "error: --device cuda: no GPU is visible here (torch.cuda.is_available() is false); use cpu"
    assert extract.build_parser().parse_args([*argv, "--executor", "slurm"]).device == "cuda"
    with pytest.raises(SystemExit):
        extract.build_parser().parse_args([*argv, "--executor", "local"])  # local jobs run on this machine
    with pytest.raises(SystemExit):
        extract.build_parser().parse_args([*argv[:-1], "tpu"])  # not a device at all: refused wherever the work runs


def test_a_family_s_site_names_from_its_config_are_the_site_table_of_the_built_model(tmp_path):
    import json

    from extract.families.whisper import TINY_CONFIG, WhisperExtractor
    from extract.weights import bundled_whisper

    whisper = FAMILIES["whisper"]
    assert (
        WhisperExtractor.site_names(TINY_CONFIG)
        == list(whisper.tiny_extractor().site_table())
        == ["encoder.embed", "encoder.layer.0", "encoder.layer.1", "encoder.final"]
    )
    folder = bundled_whisper("base")
    config = json.loads((folder / "config.json").read_text())
    sites = ModelSpec("whisper", str(folder), device="cpu").offline_sites()
    assert sites == WhisperExtractor.site_names(config) and len(sites) == config["encoder_layers"] + 2 == 8
    assert sites == list(load_extractor(ModelSpec("whisper", str(folder), device="cpu")).site_table())  # the model's own table
    assert WhisperExtractor.site_names({"encoder_layers": "six"}) is None  # not told by the config: the plan builds the model on the meta device


def test_a_local_config_s_sites_are_read_without_the_model_s_code(tmp_path):
    """What a study's plan does for a local Whisper: it reads config.json, not transformers' Whisper modules (seconds to import)."""
    import subprocess
    import sys

    from tests.paths import CHECKOUT

    (tmp_path / "config.json").write_text('{"encoder_layers": 3, "model_type": "whisper"}')
    script = (
        "import sys; from extract.spec import ModelSpec; "
        f"print(ModelSpec('whisper', {str(tmp_path)!r}, device='cpu').offline_sites()); "
        "print('transformers.models.whisper.modeling_whisper' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=CHECKOUT).stdout.split("\n")
    assert out[0] == "['encoder.embed', 'encoder.layer.0', 'encoder.layer.1', 'encoder.layer.2', 'encoder.final']"
    assert out[1] == "False"


def test_random_init_of_the_tiny_random_model_is_refused():
    from extract.spec import ModelSpec, ModelSpecError

    with pytest.raises(ModelSpecError, match="tiny-random has random weights already, drawn from a fixed seed"):
        ModelSpec("whisper", "tiny-random", random_init=True, seed=2)
    assert not ModelSpec("whisper", "tiny-random").random_init
