"""The study file's type layer (``experiments.study.study_file``, pydantic): each kind of refusal is the
one line it was before the models replaced the hand-written reader: the key path (a single mapping
without ``[0]``, a list's item with it), an unknown key before a missing one, the YAML type names of
unions, null for a required key, and the defaults a study fills in."""

import pytest
import yaml

from experiments.study.schema import StudyError, load_study

BASE = {
    "name": "t",
    "out": "runs/t",
    "models": [{"name": "wb", "family": "whisper", "checkpoint": "tiny-random"}],
    "corpora": [{"name": "cv", "task": "asr", "manifests": {"en": "en.jsonl"}}, {"name": "ms", "task": "st", "manifests": {"en-es": "ms.jsonl"}}],
}


def refusal(tmp_path, **changes) -> str:
    for manifest in ("en.jsonl", "ms.jsonl"):
        (tmp_path / manifest).write_text("")
    study = tmp_path / "s.yaml"
    study.write_text(yaml.safe_dump({**BASE, **changes}))
    with pytest.raises(StudyError) as refused:
        load_study(study)
    message = str(refused.value)
    assert message.startswith(f"{study}: ") and "\n" not in message
    return message.removeprefix(f"{study}: ")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"models": [{"nmae": "wb", "family": "whisper"}]}, "models[0]: unknown key 'nmae'; did you mean 'name'?"),
        ({"models": [None]}, "models[0]: 'name' is required"),
        ({"models": [{"name": "wb", "family": "whisper", "sites": None}]}, "models[0].sites: expected a string or a list, got nothing"),
        ({"models": [{"name": "wb", "family": "whisper", "seed": True}]}, "models[0].seed: expected an integer, got True (true or false)"),
        ({"name": None}, "top level: 'name' is required"),
        ({"device": None}, "device: expected a string, got nothing"),
        ({"corpora": [{"name": "bad name!", "task": "asr", "manifests": {"en": "en.jsonl"}}]}, "corpora[0].name: 'bad name!': a name is letters"),
        ({"probes": 3}, "probes: expected a mapping of keys, got 3 (an integer)"),
        ({"probes": [{}, None]}, "probes[1]: expected a mapping of keys, got nothing"),
        ({"extract": {"batch_seconds": True}}, "extract.batch_seconds: expected an integer or a number, got True (true or false)"),
        ({"extract": {"storage_dtype": 3}}, "extract.storage_dtype: expected a string, got 3 (an integer)"),
        ({"extract": {"storage_dtype": "float64"}}, "extract.storage_dtype: 'float64' is not one of float16, float32"),
        ({"transcribe": {"max_seconds": "x"}}, "transcribe.max_seconds: expected an integer or a number or null, got 'x' (a string)"),
        ({"behaviour": {"gap": "x"}}, "behaviour.gap: expected a mapping or a list or null, got 'x' (a string)"),
        ({"behaviour": {"gap": {"iterations": "x"}}}, "behaviour.gap.iterations: expected an integer, got 'x' (a string)"),
        ({"behaviour": {"gap": [{}, {"iterations": 0}]}}, "behaviour.gap[1].iterations: iterations must be at least 1, got 0"),
        ({"behaviour": {"st_quality": 3}}, "behaviour.st_quality: expected a mapping or null, got 3 (an integer)"),
        ({"behaviour": {"st_quality": {"gpus": -1}}}, "behaviour.st_quality.gpus: must be 0 or more, got -1"),
        ({"behaviour": {"st_quality": {"batch_size": 0}}}, "behaviour.st_quality.batch_size: must be positive, got 0"),
        ({"baselines": {"f0": 3}}, "baselines.f0: expected a mapping or null, got 3 (an integer)"),
        ({"analyses": None}, "analyses: expected a mapping of keys, got nothing"),
        ({"analyses": {"acoustic": 3}}, "analyses.acoustic: expected true or false or a mapping, got 3 (an integer)"),
        ({"analyses": {"acoustic": {"workers": 0}}}, "analyses.acoustic.workers: must be at least 1, got 0"),
        ({"analyses": {"acoustic": True, "feature_gaps": {"bootstrap": 0}}}, "analyses.feature_gaps.bootstrap: must be positive, got 0"),
    ],
)
def test_a_refusal_names_the_key_in_one_line(tmp_path, changes, expected):
    assert refusal(tmp_path, **changes).startswith(expected)


def test_a_study_fills_in_the_defaults_of_each_section_it_names(tmp_path):
    for manifest in ("en.jsonl", "ms.jsonl"):
        (tmp_path / manifest).write_text("")
    study = tmp_path / "s.yaml"
    study.write_text(yaml.safe_dump({**BASE, "behaviour": {"gap": None, "st_quality": None}, "extract": {"batch_seconds": 60}}))
    loaded = load_study(study)
    assert loaded.st_quality == {"comet_model": None, "comet_python": None, "batch_size": 16, "gpus": 0, "corpora": ("ms",)}
    assert loaded.gap["groups"] == ["female", "male"] and loaded.gap["corpora"] == ("cv",) and loaded.gap["where"] == "behaviour.gap"
    assert loaded.extract["batch_seconds"] == 60 and isinstance(loaded.extract["batch_seconds"], int)  # as written: no float conversion
    assert loaded.probes == () and loaded.f0 is None and loaded.analyses is None and loaded.report == {"site": None}
