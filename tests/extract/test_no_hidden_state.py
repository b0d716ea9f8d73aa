"""No hidden global state (issue 24 item 6): loading a model leaves the caller's random generator
and transformers' verbosity as they were, figures leave the caller's matplotlib backend and rcParams
alone, there is one ``fail``, and the probe spells its two groups as the scorers do (``--groups``)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from extract.families import FAMILIES, tiny_extractor
from extract.spec import ModelSpec, load_extractor
from tests.paths import CHECKOUT

CHECKOUT = CHECKOUT


@pytest.fixture(scope="module")
def saved_s2t(tmp_path_factory):
    folder = tmp_path_factory.mktemp("s2t")
    original = tiny_extractor("s2t")
    original.model.save_pretrained(folder)
    original.processor.save_pretrained(folder)
    return folder, original


def _weights(extractor) -> list[torch.Tensor]:
    return list(extractor.model.state_dict().values())


def test_loading_a_trained_model_leaves_the_callers_generator_alone(saved_s2t):
    folder, original = saved_s2t
    torch.manual_seed(1234)
    before = torch.get_rng_state()
    loaded = load_extractor(ModelSpec("s2t", str(folder), device="cpu", seed=7))
    assert torch.equal(torch.get_rng_state(), before)
    assert all(torch.equal(a, b) for a, b in zip(_weights(loaded), _weights(original)))


def test_random_init_draws_from_its_seed_without_touching_the_callers_generator(saved_s2t):
    folder, _ = saved_s2t
    from transformers import Speech2TextConfig, Speech2TextForConditionalGeneration

    torch.manual_seed(1234)
    before = torch.get_rng_state()
    first = load_extractor(ModelSpec("s2t", str(folder), device="cpu", random_init=True, seed=1))
    assert torch.equal(torch.get_rng_state(), before)
    again = load_extractor(ModelSpec("s2t", str(folder), device="cpu", random_init=True, seed=1))
    other = load_extractor(ModelSpec("s2t", str(folder), device="cpu", random_init=True, seed=2))
    assert all(torch.equal(a, b) for a, b in zip(_weights(first), _weights(again)))
    assert not all(torch.equal(a, b) for a, b in zip(_weights(first), _weights(other)))
    torch.manual_seed(1)  # the weights the global seed drew before: random-init stores keep their values
    expected = Speech2TextForConditionalGeneration(Speech2TextConfig.from_pretrained(folder))
    assert all(torch.equal(a, b) for a, b in zip(_weights(first), expected.state_dict().values()))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_tiny_model_is_the_same_every_time_and_leaves_the_callers_generator_alone(family):
    torch.manual_seed(99)
    before = torch.get_rng_state()
    first = tiny_extractor(family)
    assert torch.equal(torch.get_rng_state(), before)
    torch.manual_seed(5)
    assert all(torch.equal(a, b) for a, b in zip(_weights(first), _weights(tiny_extractor(family))))


@pytest.mark.slow
def test_transformers_verbosity_is_restored_after_loading_and_generating():
    from transformers.utils import logging as transformers_logging

    from extract.spec import load_generator

    previous = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_info()
    try:
        generator = load_generator(ModelSpec("whisper", "bundled-tiny.en", device="cpu"))
        assert transformers_logging.get_verbosity() == transformers_logging.INFO
        during = []
        generate = generator._generate
        generator._generate = lambda *args: during.append(transformers_logging.get_verbosity()) or generate(*args)
        tone = 0.1 * np.sin(2 * np.pi * 220 * np.arange(16_000) / 16_000).astype(np.float32)
        assert len(generator.generate([tone], "en", "asr")) == 1
        assert during == [transformers_logging.ERROR]  # generate() warns about each model's own processors
        assert transformers_logging.get_verbosity() == transformers_logging.INFO
    finally:
        transformers_logging.set_verbosity(previous)


# --- figures -------------------------------------------------------------------------------------


@pytest.fixture
def chosen_backend():
    """The svg backend, as a notebook or a user would choose one; the process's backend afterwards."""
    import matplotlib

    previous = matplotlib.get_backend()
    matplotlib.use("svg")
    yield
    matplotlib.use(previous)


def test_a_figure_keeps_the_callers_backend_and_rcparams(tmp_path, chosen_backend, monkeypatch):
    import matplotlib

    from experiments.reports import plots

    drawn = []
    save = plots.save
    monkeypatch.setattr(plots, "save", lambda figure, out: drawn.append(figure.axes[0].xaxis.label.get_fontsize()) or save(figure, out))
    before = dict(matplotlib.rcParams)
    written = plots.scatter_with_fit([1, 2, 3], [2, 4, 5], ["a", "b", "c"], None, "F1_S", "E", tmp_path / "scatter")
    assert [path.name for path in written] == ["scatter.png", "scatter.pdf"] and all(path.stat().st_size > 1000 for path in written)
    assert matplotlib.get_backend() == "svg"
    assert dict(matplotlib.rcParams) == before
    assert drawn == [plots.FONT_SIZE]  # the paper's sizes still apply inside the figure


def test_a_command_line_draws_on_agg_when_nothing_chose_a_backend(tmp_path):
    code = (
        "import matplotlib; from experiments.reports import plots; "
        f"plots.scatter_with_fit([1, 2, 3], [2, 4, 5], ['a', 'b', 'c'], None, 'x', 'y', {str(tmp_path / 's')!r}); "
        "print(matplotlib.get_backend())"
    )
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"} | {"PYTHONPATH": str(CHECKOUT)}
    result = subprocess.run([sys.executable, "-c", code], cwd=CHECKOUT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().lower() == "agg" and (tmp_path / "s.png").exists()


# --- one fail, and the probe's groups ------------------------------------------------------------


def test_there_is_one_fail():
    homes = []
    for path in sorted((CHECKOUT / "experiments").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "fail":
                homes.append(str(path.relative_to(CHECKOUT)))
    assert homes == ["experiments/argkit.py"]


def _probe_config(argv):
    from experiments.probe import build_parser, probe_config

    parser = build_parser()
    return probe_config(parser, parser.parse_args(["--store", "stores/x", "--site", "encoder.final", "--out", "p.jsonl", *argv]))


def test_the_probe_takes_the_scorers_groups_and_its_old_task_flag_as_an_alias(capsys):
    default, groups = _probe_config([]), _probe_config(["--groups", "female,male"])
    assert groups.task == default.task == "female-male" and capsys.readouterr().err == ""
    old = _probe_config(["--task", "female-male"])
    assert capsys.readouterr().err == "note: --task is deprecated; use --groups\n"
    assert old.run_id() == groups.run_id() == default.run_id()
    assert _probe_config(["--groups", "Other, Male"]).task == "other-male" == _probe_config(["--task", "other-male"]).task


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--groups", "male,female"], "--groups male,female: a probe tells apart female,male or other,male"),
        (["--groups", "female"], "--groups takes two different groups"),
        (["--task", "male-female"], "argument --task: invalid choice: 'male-female'"),
        (["--groups", "female,male", "--task", "female-male"], "argument --task: not allowed with argument --groups"),
    ],
)
def test_a_probe_group_pair_it_cannot_tell_apart_is_a_usage_error(capsys, argv, message):
    with pytest.raises(SystemExit) as stopped:
        _probe_config(argv)
    assert stopped.value.code == 2 and message in capsys.readouterr().err


def _draws_a_figure(function: ast.FunctionDef) -> bool:
    """Calls ``pyplot()`` and makes a figure with it (``save`` only closes one)."""
    calls = {ast.unparse(node.func) for node in ast.walk(function) if isinstance(node, ast.Call)}
    return bool({"pyplot", "plots.pyplot"} & calls) and any(call.endswith(".subplots") for call in calls)


def test_every_figure_is_drawn_in_the_paper_style_context():
    drawing = {}
    for path in sorted((CHECKOUT / "experiments").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and _draws_a_figure(node):
                drawing[f"{path.relative_to(CHECKOUT)}:{node.name}"] = [ast.unparse(d) for d in node.decorator_list]
    assert len(drawing) >= 10
    assert {name: decorators for name, decorators in drawing.items() if not {"paper_style", "plots.paper_style"} & set(decorators)} == {}
