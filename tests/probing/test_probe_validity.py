"""Probe results that can be trusted: scored --apply-to stores, checked splits, fresh rows after a
store changes, validated grids, and one clear error line for bad input (issues 10 and 11)."""

import json
import shutil
from dataclasses import replace

import h5py
import numpy as np
import pytest

from extract.store import PartWriter, ShardReader
from probing import metrics
from probing.data import ProbeError, make_splits, store_identity
from probing.kinds import KINDS
from probing.kinds.attention import _apply
from probing.run import ProbeConfig, run_probe
from tests.synthetic_store import write_store

SITE = "encoder.layer.0"


def write_rows(folder, rows, dim=4, seed=0):
    """A one-part store from (id, gender, speaker, split) rows, noise states of 5 frames each."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    with PartWriter(folder / "part-00000.h5", {SITE: dim}, "float32", {"model_id": "synthetic", "config": "{}", "skipped": "[]"}) as writer:
        for utterance_id, gender, speaker, split in rows:
            writer.add(
                utterance_id,
                {SITE: rng.standard_normal((5, dim)).astype(np.float32)},
                {"gender": gender, "speaker": speaker, "split": split, "language": "en", "dataset": "synthetic", "duration": 0.1},
            )
    return folder


def run_cli(argv, capsys):
    """(exit status, stderr) of ``experiments.probe`` with ``argv``."""
    from experiments.probe import main

    try:
        status = main([str(a) for a in argv])
    except SystemExit as stop:
        status = stop.code
    return status, capsys.readouterr().err


def assert_one_error_line(status, err, *fragments):
    """Exit 2, no traceback, and the message on one line (argparse's own errors follow its usage lines)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and "Traceback" not in err, err
    if lines[0].startswith("usage:"):
        assert ": error: " in lines[-1], err
    else:
        assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[-1], (fragment, err)


# --- issue 10 item 11: the macro F1 docstring is true ---------------------------------------------


def test_macro_f1_counts_both_classes_like_scikit_learn_with_labels():
    from sklearn.metrics import f1_score

    cases = [
        ([1, 1, 1], [1, 1, 1]),  # class 0 absent from labels and predictions
        ([1, 1, 1], [1, 0, 1]),  # class 0 predicted, never true
        ([0, 1, 1, 0], [0, 1, 0, 0]),
    ]
    for y_true, y_pred in cases:
        ours = float(metrics.position_scores(np.array(y_true), np.array(y_pred))["f1_macro"])
        assert ours == pytest.approx(100 * f1_score(y_true, y_pred, average="macro", labels=[0, 1], zero_division=0))
    # by hand: the absent class scores 0, the present one 1 -> 50; scikit-learn without labels= gives 100
    assert float(metrics.position_scores(np.array([1, 1, 1]), np.array([1, 1, 1]))["f1_macro"]) == 50.0
    assert f1_score([1, 1, 1], [1, 1, 1], average="macro", zero_division=0) == 1.0


# --- issue 10 item 2: the applied store is scored where it is labelled ------------------------------


class FixedProbabilities:
    def __init__(self, probabilities):
        self.probabilities = np.asarray(probabilities, dtype=float)

    def predict(self, sequences):
        assert len(sequences) == len(self.probabilities)
        return self.probabilities, None


def test_applied_scores_by_hand(tmp_path):
    rows = [
        ("f1", "female", "a", ""),
        ("f2", "female", "b", ""),
        ("m1", "male", "c", ""),
        ("m2", "male", "d", ""),
        ("o1", "other", "e", ""),
        ("u1", "", "f", ""),
    ]
    store = write_rows(tmp_path / "applied", rows)
    config = ProbeConfig(store="unused", site=SITE, probe="attention", apply_to=str(store))
    # predictions 1, 0, 0, 0 on the labelled four: male F1 = 2*2/(4+1) = 0.8, female F1 = 2*1/(2+0+1) = 2/3
    row, arrays = _apply(config, FixedProbabilities([0.9, 0.2, 0.1, 0.3, 0.8, 0.6]), None, ("male", "female"))
    subject = {
        "model": "synthetic",
        "family": None,
        "checkpoint": "synthetic",
        "revision": None,
        "manifest_sha256": None,
        "dataset": "synthetic",
        "language": "en",
    }
    assert row["applied_to"] == {"store": str(store), "subject": subject, "utterances": 6, "scored": 4}
    assert row["applied_f1_macro"] == pytest.approx(100 * (0.8 + 2 / 3) / 2)
    assert row["applied_accuracy"] == pytest.approx(75.0)
    assert row["applied_recall"] == {"male": pytest.approx(100.0), "female": pytest.approx(50.0)}
    assert arrays["applied_ids"].tolist() == ["f1", "f2", "m1", "m2", "o1", "u1"]


def test_applied_store_with_one_class_is_predicted_not_scored(tmp_path):
    store = write_rows(tmp_path / "applied", [("f1", "female", "a", ""), ("f2", "female", "b", ""), ("o1", "other", "c", "")])
    config = ProbeConfig(store="unused", site=SITE, probe="attention", apply_to=str(store))
    row, arrays = _apply(config, FixedProbabilities([0.9, 0.2, 0.5]), None, ("male", "female"))
    assert row["applied_to"]["scored"] == 0 and "2 female and 0 male" in row["applied_to"]["not_scored"]
    assert not [key for key in row if key.startswith("applied_") and key != "applied_to"]
    assert len(arrays["applied_probabilities"]) == 3


def test_apply_to_needs_the_attention_probe():
    with pytest.raises(ProbeError, match="attention probe only"):
        ProbeConfig(store="s", site=SITE, probe="mean", apply_to="other")


# --- issue 10 item 4: splits are checked -----------------------------------------------------------


def _manifest_rows(leaked_test_speaker=None):
    rows = []
    for gender in ("female", "male"):
        for s, split in enumerate(("train", "train", "dev", "test")):
            speaker = f"{gender}-{s}"
            if split == "test" and leaked_test_speaker == gender:
                speaker = f"{gender}-0"  # a training speaker in the manifest's test split
            rows += [(f"{gender}-{s}-{u}", gender, speaker, split) for u in range(3)]
    return rows


def test_manifest_test_split_sharing_a_training_speaker_is_an_error(tmp_path):
    reader = ShardReader(write_rows(tmp_path / "s", _manifest_rows(leaked_test_speaker="female")))
    with pytest.raises(ProbeError, match=r"the manifest's test split shares 1 speaker\(s\) with the training split: female-0.*--allow-shared-speakers"):
        make_splits(reader.metadata(), reader.ids)
    splits = make_splits(reader.metadata(), reader.ids, allow_shared_speakers=True)
    assert splits.shared_speakers == {"test": ["female-0"]}
    clean = ShardReader(write_rows(tmp_path / "clean", _manifest_rows()))
    assert make_splits(clean.metadata(), clean.ids).shared_speakers == {}


def test_shared_speakers_are_recorded_in_the_row_when_allowed(tmp_path):
    store = write_rows(tmp_path / "s", _manifest_rows(leaked_test_speaker="male"))
    with pytest.raises(ProbeError, match="male-0"):
        run_probe(ProbeConfig(store=str(store), site=SITE, probe="mean"))
    row = run_probe(ProbeConfig(store=str(store), site=SITE, probe="mean", allow_shared_speakers=True)).row
    assert row["shared_speakers"] == {"test": ["male-0"]} and row["config"]["allow_shared_speakers"] is True


def test_apply_to_store_sharing_training_speakers_is_an_error(tmp_path, capsys):
    train = write_rows(tmp_path / "train", _manifest_rows())
    applied = write_rows(tmp_path / "applied", [("x1", "female", "female-1", ""), ("x2", "male", "someone-else", "")])
    common = [
        "--store",
        train,
        "--site",
        SITE,
        "--probe",
        "attention",
        "--apply-to",
        applied,
        "--out",
        tmp_path / "r.jsonl",
        "--max-epochs",
        "2",
        "--lr",
        "1e-2",
    ]
    status, err = run_cli(common, capsys)
    assert_one_error_line(status, err, "the apply_to store", "female-1", "--allow-shared-speakers")
    assert not (tmp_path / "r.jsonl").exists() or not (tmp_path / "r.jsonl").read_text().strip()
    status, _ = run_cli(common + ["--allow-shared-speakers"], capsys)
    row = json.loads((tmp_path / "r.jsonl").read_text())
    assert status == 0 and row["shared_speakers"] == {"apply_to": ["female-1"]}
    assert row["applied_to"]["subject"]["dataset"] == "synthetic" and "applied_f1_macro" in row
    assert {k: v for k, v in row["applied_to"].items() if k != "subject"} == {"store": str(applied), "utterances": 2, "scored": 2}


def test_apply_to_store_of_another_width_at_the_site_is_one_line_before_training(tmp_path, capsys, monkeypatch):
    """Another model's store (its states at the site 6 wide, the probe's 4): refused in one line naming
    both widths before the probe trains (it was a numpy broadcast traceback after training)."""
    train = write_rows(tmp_path / "train", _manifest_rows())
    applied = write_rows(tmp_path / "applied", [("x1", "female", "f-other", ""), ("x2", "male", "m-other", "")], dim=6)
    monkeypatch.setitem(KINDS, "attention", replace(KINDS["attention"], runner=lambda *args: pytest.fail("the probe trained")))
    argv = ["--store", train, "--site", SITE, "--probe", "attention", "--apply-to", applied, "--out", tmp_path / "r.jsonl", "--max-epochs", "2"]
    status, err = run_cli(argv, capsys)
    assert_one_error_line(status, err, f"the apply_to store {applied}", f"{SITE} is 6 wide", f"{train}'s is 4")


# --- issue 11 item 6: a rerun after the store changed recomputes ------------------------------------


def test_rerun_after_the_store_changed_recomputes_the_row(tmp_path, capsys):
    from probing.results import load_rows

    store, out = tmp_path / "store", tmp_path / "r.jsonl"
    write_store(store, speakers_per_gender=5, utterances_per_speaker=4, strength=4.0)
    argv = ["--store", store, "--site", SITE, "--probe", "mean", "--out", out]
    assert run_cli(argv, capsys)[0] == 0
    first = json.loads(out.read_text())
    assert first["store_identity"] == store_identity(store)
    assert run_cli(argv, capsys)[0] == 0 and len(out.read_text().splitlines()) == 1  # unchanged: skipped
    shutil.rmtree(store)
    write_store(store, speakers_per_gender=5, utterances_per_speaker=4, strength=0.0, seed=1)  # same ids, no signal
    assert store_identity(store) != first["store_identity"]
    assert run_cli(argv, capsys)[0] == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 and rows[1]["run_id"] == first["run_id"] and rows[1]["store_identity"] == store_identity(store)
    assert rows[1]["f1_macro"] != first["f1_macro"]
    assert load_rows(out)[first["run_id"]] == rows[1]  # readers get the fresh row
    assert run_cli(argv, capsys)[0] == 0 and len(out.read_text().splitlines()) == 2


def test_store_identity_ignores_reading_and_tracks_parts(tmp_path):
    store = write_store(tmp_path / "s", speakers_per_gender=2, utterances_per_speaker=2)
    before = store_identity(store)
    ShardReader(store).get(SITE, ShardReader(store).ids[0])
    assert store_identity(store) == before
    write_store(tmp_path / "s2", speakers_per_gender=2, utterances_per_speaker=2)
    shutil.copy(tmp_path / "s2" / "part-00000.h5", store / "part-00001.h5")
    assert store_identity(store) != before


# --- issue 11 item 5: grid files are validated ------------------------------------------------------


@pytest.mark.parametrize(
    "line, fragments",
    [
        ("control: [shuffled]", ["unknown key 'control'", "did you mean 'controls'?"]),
        ("seed: [1]", ["unknown key 'seed'", "did you mean 'seeds'?"]),
        ("mdl: true", ["unknown key 'mdl'", "options: {mdl: ...}"]),
        ("options: {positons: 10}", ["options: unknown key 'positons'", "did you mean 'positions'?"]),
        ("seeds: 3", ["'seeds' is a non-empty list"]),
        ('options: {mdl: "false"}', ["options: mdl is bool, got 'false' (str)", "mdl: true"]),
        ('options: {positions: "10"}', ["options: positions is int, got '10' (str)"]),
        ("options: {c: true}", ["options: c is float, got True (bool)"]),
    ],
)
def test_grid_typos_are_errors_with_the_nearest_name(tmp_path, capsys, line, fragments):
    store = write_store(tmp_path / "s", speakers_per_gender=2, utterances_per_speaker=2)
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"out: {tmp_path / 'r.jsonl'}\nstores: [{store}]\n{line}\n")
    status, err = run_cli(["--grid", grid], capsys)
    assert_one_error_line(status, err, str(grid), *fragments)
    assert not (tmp_path / "r.jsonl").exists()


def test_malformed_grid_yaml_names_the_file_and_line(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text("out: r.jsonl\nstores: [a, b\nprobes: [mean]\n")
    status, err = run_cli(["--grid", grid], capsys)
    assert_one_error_line(status, err, f"{grid}:", "malformed YAML")
    assert_one_error_line(*run_cli(["--grid", tmp_path / "none.yaml"], capsys), "does not exist")


# --- issue 11 items 2 and 7: one clear line, exit 2 -------------------------------------------------


def test_cli_input_errors_are_one_line_each(tmp_path, capsys):
    good = write_store(tmp_path / "good", speakers_per_gender=3, utterances_per_speaker=2)
    female_only = write_rows(tmp_path / "female", [(f"f{i}", "female", f"s{i}", "") for i in range(6)])
    one_speaker_each = write_rows(tmp_path / "one", [(f"{g}{i}", g, f"{g}-speaker", "") for g in ("female", "male") for i in range(4)])
    out = tmp_path / "r.jsonl"
    base = ["--site", SITE, "--probe", "mean"]
    cases = [
        (["--store", good, "--out", out, "--positions", "0"], ["--positions must be a positive number"]),
        (["--store", female_only, "--out", out], [str(female_only), "no utterances labelled male"]),
        (
            ["--store", one_speaker_each, "--out", out],
            [str(one_speaker_each), "the fixed split needs at least 2 male speakers (one to test, one to train), and has 1 (male-speaker)"],
        ),
        (["--store", good, "--out", tmp_path], ["is a folder"]),
        (["--store", tmp_path / "missing", "--out", out], ["missing does not exist"]),
        (["--store", good, "--out", out, "--site", "encoder.layer.9"], ["no site 'encoder.layer.9'"]),
    ]
    for argv, fragments in cases:
        assert_one_error_line(*run_cli(base + argv, capsys), *fragments)
    assert not out.exists() or not out.read_text().strip()


@pytest.mark.parametrize("probe", ["attention", "positional"])
def test_probes_on_a_store_holding_nan_fail_naming_store_site_and_utterance(tmp_path, capsys, probe):
    store = write_store(tmp_path / "s", speakers_per_gender=5, utterances_per_speaker=2)
    bad_id = ShardReader(store).ids[0]  # female-0-0: a training utterance (manifest split, classes already balanced)
    with h5py.File(store / "part-00000.h5", "r+") as handle:  # as a part written before the finiteness check and its checksums holds it
        handle[f"sites/{SITE}/data"][1, 2] = np.nan  # inside the first utterance
        for key in ("content_sha256", "format_version"):
            del handle.attrs[key]
    status, err = run_cli(["--store", store, "--site", SITE, "--probe", probe, "--out", tmp_path / "r.jsonl", "--max-epochs", "2", "--positions", "10"], capsys)
    assert_one_error_line(status, err, str(store), SITE, bad_id)
    assert not (tmp_path / "r.jsonl").exists() or not (tmp_path / "r.jsonl").read_text().strip()


# --- issue 10 item 1: F1_S, the MDL span and mean_test_length count speech, not padding ------------


def write_padded_store(folder, stored=60, speech=(10, 21), speakers_per_gender=6, utterances_per_speaker=5, dim=4, seed=0):
    """Every utterance stored with ``stored`` frames as with ``--keep-padding``; only its first 10-20
    (speech) frames carry the gender (+-3 on dimension 0), the padding is the same noise for both.
    Returns the folder and the speech length of every utterance."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    lengths = {}
    with PartWriter(folder / "part-00000.h5", {SITE: dim}, "float32", {"model_id": "synthetic", "config": "{}", "skipped": "[]"}) as writer:
        for gender, sign in (("female", 1.0), ("male", -1.0)):
            for s in range(speakers_per_gender):
                split = "train" if s < 4 else "dev" if s < 5 else "test"
                for u in range(utterances_per_speaker):
                    utterance_id = f"{gender}-{s}-{u}"
                    lengths[utterance_id] = int(rng.integers(*speech))
                    states = rng.standard_normal((stored, dim)).astype(np.float32)
                    states[: lengths[utterance_id], 0] += sign * 3.0
                    writer.add(
                        utterance_id,
                        {SITE: states},
                        {"gender": gender, "speaker": f"{gender}-{s}", "split": split, "language": "en", "dataset": "synthetic", "duration": 30.0},
                        speech_frames={SITE: lengths[utterance_id]},
                    )
    return folder, lengths


def test_f1_s_and_mdl_span_cover_the_speech_positions_of_a_padded_store(tmp_path):
    store, speech = write_padded_store(tmp_path / "padded")
    result = run_probe(ProbeConfig(store=str(store), site=SITE, probe="positional", positions=100, mdl=True))
    row, curve = result.row, result.arrays["test_f1_macro"]
    test_ids = make_splits(ShardReader(store).metadata(), ShardReader(store).ids).test.ids
    expected_length = sum(speech[i] for i in test_ids) / len(test_ids)
    assert row["mean_test_length"] == pytest.approx(expected_length) and 10 <= expected_length < 21
    assert row["stored_positions"] == 60.0 and row["positions_used"] == 60
    span = int(np.ceil(expected_length))
    assert row["f1_s"] == pytest.approx(float(np.mean(curve[:span])))
    assert row["f1_macro"] == pytest.approx(row["f1_s"]) and row["mdl_positions"] == [0, span]
    assert row["codelength_online_bits"] == pytest.approx(float(np.sum(result.arrays["mdl_online_bits"][:span])))
    assert row["f1_s"] > 90 and float(np.mean(curve)) < 75  # the padding carries nothing: averaging it in would drag F1_S down


def test_unpadded_rows_have_no_stored_positions(tmp_path):
    store = write_store(tmp_path / "s", speakers_per_gender=3, utterances_per_speaker=3)
    row = run_probe(ProbeConfig(store=str(store), site=SITE, probe="mean")).row
    reader = ShardReader(store)
    test_ids = make_splits(reader.metadata(), reader.ids).test.ids
    assert row["mean_test_length"] == pytest.approx(np.mean([reader.length(SITE, i) for i in test_ids]))
    assert "stored_positions" not in row


def test_pooled_and_attention_inputs_cover_speech_frames_only(tmp_path):
    """With kept padding, mean/max/sampled pooling and the attention probe's sequences stop at the
    speech length: the padding frames (here a constant 100 on every dimension) never enter them."""
    from probing import features

    folder = tmp_path / "padded-constant"
    folder.mkdir()
    states = np.full((8, 2), 100.0, dtype=np.float32)
    states[:3] = [[1.0, 2.0], [3.0, 4.0], [5.0, 9.0]]
    with PartWriter(folder / "part-00000.h5", {SITE: 2}, "float32", {"model_id": "synthetic", "config": "{}", "skipped": "[]"}) as writer:
        writer.add("u", {SITE: states}, {"gender": "female", "speaker": "s", "duration": 30.0}, speech_frames={SITE: 3})
    reader = ShardReader(folder)
    np.testing.assert_allclose(features.pooled(reader, SITE, ["u"], "mean")[0, 0], [3.0, 5.0])
    np.testing.assert_allclose(features.pooled(reader, SITE, ["u"], "max")[0, 0], [5.0, 9.0])
    np.testing.assert_allclose(features.pooled(reader, SITE, ["u"], "sampled")[0], [[1, 2], [1, 2], [3, 4], [5, 9], [5, 9]])
    (sequence,) = features.speech_states(reader, SITE, ["u"])
    np.testing.assert_allclose(sequence, states[:3])
