"""The probe-kind registry (``probing.kinds``): every kind satisfies the contract its record states,
the run ids of existing configs are unchanged, and a new kind is one module: a runner and its record."""

import json
from dataclasses import fields, replace
from importlib import import_module

import numpy as np
import pytest

from probing import features, metrics
from probing.data import ProbeError
from probing.grid import expand_grid
from probing.kinds import HEADLINES, KINDS, ProbeKind, headline, probe_kind
from probing.run import PROBES, ProbeConfig, run_probe
from tests.synthetic_store import write_store

SITE = "encoder.layer.0"
SHARED = {"store", "site", "probe", "control", "seed", "mdl", "task", "language", "standardize", "allow_shared_speakers", "split", "device"}
QUICK = {"max_epochs": 3, "positions": 10}  # options that keep a conformance run short, where the kind reads them


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return write_store(tmp_path_factory.mktemp("kinds") / "store", strength=3.0, informative=range(0, 3), length_range=(8, 14), utterances_per_speaker=3)


def check_kind(kind: ProbeKind, store, **options) -> dict:
    """The contract of a registered kind, on a synthetic store: the record is well formed, a fixed
    split and a leave-one-speaker-out run give rows led by its headline, and apply_to is accepted
    exactly where the record says so. Returns the fixed split's row."""
    config_fields = {f.name for f in fields(ProbeConfig)}
    assert kind.headline in HEADLINES and set(kind.options) <= config_fields - SHARED, kind
    assert callable(kind.runner)
    assert kind.per_position == (kind.headline == "f1_s")
    quick = {key: value for key, value in QUICK.items() if key in kind.options} | options
    result = run_probe(ProbeConfig(str(store), SITE, kind.name, **quick))
    row = result.row
    assert 0 <= row[kind.headline] <= 100 and {"f1_macro", "accuracy", "recall"} <= set(row)
    assert row["splits"]["test"]["utterances"] == 12
    if kind.per_position:
        assert len(result.arrays["test_f1_macro"]) == row["positions_used"] and row["f1_s"] <= 100
    else:
        assert "positions_used" not in row
    loso = run_probe(ProbeConfig(str(store), SITE, kind.name, split="loso", **quick)).row
    assert loso["splits"]["folds"] == 20 and 0 <= loso[kind.headline] <= 100
    assert loso["splits"]["dev"] == ("one training speaker per class, drawn per fold" if kind.selects_on_dev else "none")
    if kind.applies_to_other_stores:
        ProbeConfig(str(store), SITE, kind.name, apply_to=str(store))
    else:
        with pytest.raises(ProbeError, match=f"apply_to works with the .* probe only, not '{kind.name}'"):
            ProbeConfig(str(store), SITE, kind.name, apply_to=str(store))
    return row


@pytest.mark.parametrize("name", list(KINDS))
def test_every_kind_runs_and_leads_with_its_headline(name, store):
    check_kind(KINDS[name], store)


def test_the_registry_is_what_the_code_dispatches_on():
    assert PROBES == ("positional", "attention", "mean", "max", "sampled") == tuple(KINDS)
    assert [name for name, kind in KINDS.items() if kind.applies_to_other_stores] == ["attention"]
    assert [name for name, kind in KINDS.items() if kind.selects_on_dev] == ["attention", "sampled"]
    assert {name: headline(name) for name in KINDS} == {
        "positional": "f1_s",
        "attention": "f1_macro",
        "mean": "f1_macro",
        "max": "f1_macro",
        "sampled": "f1_macro",
    }
    with pytest.raises(ProbeError, match=r"unknown probe 'mlp'; choose from \('positional', 'attention', 'mean', 'max', 'sampled'\)"):
        probe_kind("mlp")


def test_run_ids_of_every_kind_are_those_before_the_registry(monkeypatch):
    """Computed with the code before ``probing.kinds`` existed (run from ``/``: a run id hashes the
    store's resolved path), so a stored probes.jsonl still resumes."""
    monkeypatch.chdir("/")
    before = {
        "positional": ("5dbba6a0d85e1f91", "30c73d7ff4f16810"),
        "attention": ("15c3302f91bab68e", "bb5a15c2ad648d4e"),
        "mean": ("971958fc63e202d3", "2ab093e2ab8dab84"),
        "max": ("0738cd69ab303d0c", "53144f618d93276b"),
        "sampled": ("2ec6b458cf26c124", "51c4cfffa0fea7eb"),
    }
    for probe, (fixed, loso) in before.items():
        assert ProbeConfig(store="stores/wb", site="encoder.layer.3", probe=probe, seed=1).run_id() == fixed
        assert ProbeConfig(store="stores/wb", site="encoder.final", probe=probe, control="shuffled", split="loso").run_id() == loso
    applied = ProbeConfig(store="stores/wb", site="encoder.final", probe="attention", apply_to="stores/must")
    assert applied.run_id() == "fa0cd52fd7806285"


def centroid_probe(config, reader, splits, labels):
    """A throwaway kind's runner: the nearer class mean of the utterance's mean state."""
    x = {name: features.pooled(reader, config.site, getattr(splits, name).ids, "mean")[:, 0] for name in ("train", "test")}
    centroids = np.stack([x["train"][labels["train"] == label].mean(axis=0) for label in (0, 1)])
    predictions = np.argmin(((x["test"][:, None, :] - centroids[None]) ** 2).sum(axis=-1), axis=1)
    return metrics.summary(labels["test"], predictions, splits.class_names), {}, {}


@pytest.fixture
def throwaway(monkeypatch):
    """A kind registered the way a new one is: its runner and its record in its own module (here this one), the record in KINDS."""
    kind = ProbeKind("centroid", centroid_probe, "f1_macro", "nearest class mean of the mean state")
    monkeypatch.setitem(KINDS, kind.name, kind)
    return kind


def test_a_throwaway_kind_passes_the_conformance_checks(throwaway, store):
    row = check_kind(throwaway, store)
    assert row["f1_macro"] > 70  # the synthetic store's class signal sits in the mean state
    shuffled = run_probe(ProbeConfig(str(store), SITE, "centroid", control="shuffled")).row
    assert shuffled["f1_real"] == row["f1_macro"] and shuffled["selectivity"] == pytest.approx(row["f1_macro"] - shuffled["f1_macro"])


def test_a_throwaway_kind_is_a_cli_choice_and_a_grid_entry(throwaway, store, tmp_path, capsys):
    from experiments.probe import build_parser, main

    assert "centroid" in next(action for action in build_parser()._actions if action.dest == "probe").choices
    out = tmp_path / "probes.jsonl"
    assert main(["--store", str(store), "--site", SITE, "--probe", "centroid", "--out", str(out)]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["config"]["probe"] == "centroid" and row["f1_macro"] > 70
    configs = expand_grid({"stores": [str(store)], "sites": [SITE], "probes": ["centroid", "attention"], "options": {"apply_to": str(store)}})
    assert [(c.probe, c.apply_to) for c in configs] == [("centroid", None), ("attention", str(store))]


def test_a_throwaway_kind_reaches_collect_and_the_study_report_by_its_record(throwaway, store, tmp_path):
    """collect and the study report ask the kind's record (``per_position``, ``headline``), never its
    name: a new kind's rows are in long.csv under its headline, out of f1_vs_gap.csv (not per-position),
    and in RESULTS.md's table of probe scores without a gap."""
    from types import SimpleNamespace

    from experiments.results.collect import collect, write_collected
    from experiments.study.report import _files, _probe_section
    from probing.results import save_result

    probes = tmp_path / "probes.jsonl"
    save_result(run_probe(ProbeConfig(str(store), SITE, "centroid")), probes)
    save_result(run_probe(ProbeConfig(str(store), SITE, "positional", positions=10)), probes)
    collected = collect([probes])
    layout = SimpleNamespace(results=tmp_path / "results", figures=tmp_path / "figures")
    write_collected(collected, layout.results)
    headlines = {(row["probe"], row["metric"]) for row in collected.long if row["metric"] in HEADLINES}
    assert headlines == {("centroid", "f1_macro"), ("positional", "f1_macro"), ("positional", "f1_s")}
    assert collected.f1_vs_gap == [] and [row["site"] for row in collected.unmatched["probes_without_gap"]] == [SITE]  # the positional row only
    table = [line for line in _probe_section(_files(layout)) if line.startswith("| ")]
    shown = {line.split(" | ")[4]: line.split(" | ")[6] for line in table[1:]}  # probe -> score name (table[0]: the header)
    assert shown == {"centroid": "F1", "positional": "F1_S"}


def test_two_per_position_kinds_at_one_row_of_f1_vs_gap_are_refused_naming_both(store, tmp_path, monkeypatch):
    """A second per-position kind joins f1_vs_gap.csv as positional does; that table has no probe column,
    so its rows and positional's at one key would be averaged: refused in one error naming both rows."""
    from experiments.results.collect import CollectError, collect
    from probing.results import save_result

    copy = replace(KINDS["positional"], name="positional-copy")
    monkeypatch.setitem(KINDS, copy.name, copy)
    probes = tmp_path / "probes.jsonl"
    for name in ("positional", "positional-copy"):
        save_result(run_probe(ProbeConfig(str(store), SITE, name, positions=10)), probes)
    with pytest.raises(CollectError, match=r"probes\.jsonl:1 .* and .*probes\.jsonl:2 .* two per-position kinds \(positional, positional-copy\)"):
        collect([probes])


def test_a_config_resolves_its_kind_once():
    """The kind is looked up when the config is made; a run reads ``config.kind``, not the registry."""
    config = ProbeConfig("stores/wb", SITE, "mean")
    registered = dict(KINDS)
    del KINDS["mean"]
    try:
        assert config.kind.name == "mean" and config.kind.reads == "mean"
        with pytest.raises(ProbeError, match="unknown probe 'mean'"):
            ProbeConfig("stores/wb", SITE, "mean")
    finally:  # restored in its order (monkeypatch.delitem would put "mean" back last, and the kinds' order is shown in --help)
        KINDS.clear()
        KINDS.update(registered)


@pytest.mark.parametrize("module", ["probing.run", "probing.grid", "experiments.results.collect", "experiments.study.report", "experiments.study.schema"])
def test_the_modules_that_dispatch_on_kinds_name_none(module):
    """They ask a kind's record (or DEFAULT_KIND for a default): a kind's name spelled in them would
    be a rule that a new kind does not get."""
    from pathlib import Path

    source = Path(import_module(module).__file__).read_text(encoding="utf-8")
    assert [name for name in KINDS if f'"{name}"' in source or f"'{name}'" in source] == []
