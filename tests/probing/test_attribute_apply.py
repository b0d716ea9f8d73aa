"""``apply_to`` with an attribute task (issue 32 item 1): the probe trained on one store predicts
another's utterances and is scored on those labelled with its classes, read from the manifest that
other store records; values outside the classes are predicted, not scored."""

from __future__ import annotations

import numpy as np
import pytest

from probing.data import ProbeError
from probing.run import ProbeConfig, run_probe
from tests.attribute_corpus import SITE, write_attribute_corpus

TRAINING = {"probe": "attention", "lr": 1e-2, "max_epochs": 20}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A training store (three accents, four speakers each) and another store of other speakers: two
    of each accent, two of an accent the probe never saw (zulu) and one without the attribute. The
    values sort as in the training store, so each accent shifts the same dimension in both."""
    root = tmp_path_factory.mktemp("apply")
    _, trained = write_attribute_corpus(root / "trained")
    other = {f"o-{accent}-{s}": accent for accent in ("north", "south", "west", "zulu") for s in range(2)} | {"o-quiet": None}
    manifest, applied = write_attribute_corpus(root / "other", other, utterances=3, seed=7)
    return trained, applied, manifest


def test_a_two_class_attribute_probe_is_scored_on_the_other_stores_two_classes(stores):
    trained, applied, manifest = stores
    result = run_probe(ProbeConfig(store=str(trained), site=SITE, task="attribute:accent:north,west", apply_to=str(applied), **TRAINING))
    row = result.row
    summary = row["applied_to"]
    assert summary["utterances"] == 27 and summary["scored"] == 12  # 2 north and 2 west speakers, 3 utterances each
    assert summary["labels"] == {"attribute": "accent", "manifest": str(manifest), "manifest_sha256": summary["labels"]["manifest_sha256"], "unlabelled": 3}
    assert row["applied_f1_macro"] >= 90 and set(row["applied_recall"]) == {"west", "north"}
    assert list(result.arrays["applied_class_names"]) == ["west", "north"] and result.arrays["applied_probabilities"].shape == (27,)


def test_a_three_class_attribute_probe_predicts_every_class_and_scores_those_it_knows(tmp_path, stores):
    from probing.results import load_predictions, save_result

    trained, applied, _ = stores
    result = run_probe(ProbeConfig(store=str(trained), site=SITE, task="attribute:accent", apply_to=str(applied), **TRAINING))
    row = result.row
    assert row["classes"] == ["north", "south", "west"] and row["applied_to"]["scored"] == 18  # zulu and the unlabelled are not scored
    probabilities = result.arrays["applied_probabilities"]
    assert probabilities.shape == (27, 3) and np.allclose(probabilities.sum(axis=1), 1.0)
    assert row["applied_f1_macro"] >= 90 and set(row["applied_recall"]) == {"north", "south", "west"}
    save_result(result, tmp_path / "rows.jsonl")
    predicted = load_predictions(tmp_path / "rows.jsonl", row["run_id"])  # each utterance's most probable class
    assert len(predicted) == 27 and set(predicted.values()) <= {"north", "south", "west"}
    assert [predicted[f"o-{accent}-0-0"] for accent in ("north", "south", "west")] == ["north", "south", "west"]


def test_a_store_without_every_class_is_predicted_not_scored(tmp_path, stores):
    trained, _, _ = stores
    _, applied = write_attribute_corpus(tmp_path / "north-only", {f"n{s}": ("north", "zulu")[s % 2] for s in range(4)}, utterances=2)
    two = run_probe(ProbeConfig(store=str(trained), site=SITE, task="attribute:accent:north,west", apply_to=str(applied), **TRAINING)).row
    assert two["applied_to"]["not_scored"] == "needs utterances labelled west and north; found 4 north and 0 west"
    assert "applied_f1_macro" not in two
    three = run_probe(ProbeConfig(store=str(trained), site=SITE, task="attribute:accent", apply_to=str(applied), **TRAINING)).row
    expected = "needs utterances of every class the probe tells apart (north, south, west); found 4 north, 0 south, 0 west"
    assert three["applied_to"]["not_scored"] == expected and "applied_f1_macro" not in three


def test_the_other_stores_labels_are_checked_before_the_probe_trains(tmp_path, stores, monkeypatch):
    import probing.train

    trained, _, _ = stores
    monkeypatch.setattr(probing.train, "fit_attention", lambda *args, **kwargs: pytest.fail("trained before the apply_to store's labels were read"))
    manifest, applied = write_attribute_corpus(tmp_path / "edited", {f"e{s}": ("north", "west")[s % 2] for s in range(4)}, utterances=2)
    manifest.write_text(manifest.read_text(encoding="utf-8").replace('"north"', '"northern"', 1), encoding="utf-8")
    config = ProbeConfig(store=str(trained), site=SITE, task="attribute:accent", apply_to=str(applied), **TRAINING)
    with pytest.raises(ProbeError, match=f"{manifest} changed since the apply_to store {applied} was built from it"):
        run_probe(config)
    _, unlabelled = write_attribute_corpus(tmp_path / "dialects", {f"d{s}": ("a", "b")[s % 2] for s in range(4)}, utterances=2, attribute="dialect")
    with pytest.raises(ProbeError, match=r"no utterance of .*dialects/manifest.jsonl has extra.accent; the attributes its utterances have: dialect"):
        run_probe(ProbeConfig(store=str(trained), site=SITE, task="attribute:accent", apply_to=str(unlabelled), **TRAINING))
    manifest.unlink()
    with pytest.raises(ProbeError, match=f"the apply_to store {applied} was built from the manifest {manifest}, which is not there") as refused:
        run_probe(config)
    assert "a relative path counts from where that store was built: run from there, or restore that manifest" in str(refused.value)


def test_the_command_line_applies_an_attribute_probe(tmp_path, stores, capsys):
    import json

    from experiments import probe as probe_cli

    trained, applied, _ = stores
    out = tmp_path / "rows.jsonl"
    argv = ["--store", str(trained), "--site", SITE, "--probe", "attention", "--lr", "0.01", "--max-epochs", "20"]
    argv += ["--attribute", "accent", "--groups", "north,west", "--apply-to", str(applied), "--out", str(out)]
    assert probe_cli.main(argv) == 0, capsys.readouterr().err
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["config"]["task"] == "attribute:accent:north,west" and row["config"]["apply_to"] == str(applied) and row["applied_to"]["scored"] == 12
