"""Leave-one-speaker-out probes (issue 23, item 2): folds, per-fold accuracy and pooled F1 by hand, controls, refusals, run ids."""

import json

import numpy as np
import pytest

from experiments import probe as probe_cli
from extract.store import PartWriter, ShardReader
from probing import metrics
from probing.data import ProbeError, leave_one_speaker_out
from probing.grid import GridError, expand_grid, read_grid
from probing.run import ProbeConfig, run_probe
from tests.synthetic_store import write_store

SITE = "encoder.layer.0"


def _voices(folder, flipped=("male-0",), speakers=3, utterances=4, frames=5, dim=1, seed=0):
    """One dimension: +3 for female and -3 for male utterances at every frame (noise sd 0.3); the
    ``flipped`` speakers sound like the other gender. Speakers ``{gender}-{k}``, no manifest splits."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    writer = PartWriter(folder / "part-00000.h5", {SITE: dim}, "float32", {"model_id": "synthetic", "config": "{}", "skipped": "[]"})
    for gender in ("female", "male"):
        for k in range(speakers):
            speaker = f"{gender}-{k}"
            sign = (1.0 if gender == "female" else -1.0) * (-1.0 if speaker in flipped else 1.0)
            for u in range(utterances):
                states = rng.normal(0, 0.3, (frames, dim)).astype(np.float32)
                states[:, 0] += 3.0 * sign
                meta = {"gender": gender, "speaker": speaker, "language": "en", "split": "", "dataset": "toy", "duration": frames / 50}
                writer.add(f"{speaker}-{u}", {SITE: states}, meta)
    writer.close()
    return folder


@pytest.fixture(scope="module")
def voices(tmp_path_factory):
    return _voices(tmp_path_factory.mktemp("loso") / "store")


def test_folds_hold_out_every_speaker_once_and_never_train_on_it(tmp_path):
    reader = ShardReader(write_store(tmp_path / "s", speakers_per_gender=4, utterances_per_speaker=3, splits=True))
    metadata = reader.metadata()
    for dev in (False, True):
        folds = leave_one_speaker_out(metadata, reader.ids, seed=1, dev=dev)
        assert [fold.speaker for fold in folds] == sorted(set(metadata["speaker"]))  # the manifest's splits are not used
        for fold in folds:
            splits = fold.splits
            assert splits.source == "leave-one-speaker-out" and set(splits.test.speakers.tolist()) == {fold.speaker}
            assert len(splits.test) == 3 and set(splits.test.labels.tolist()) == {fold.label}  # all its utterances, one class
            train, held = set(splits.train.speakers.tolist()), set(splits.dev.speakers.tolist())
            assert fold.speaker not in train | held and not train & held
            assert splits.train.labels.mean() == 0.5  # balanced by downsampling the larger class
            if dev:
                assert len(held) == 2 and sorted(splits.dev.labels.tolist()) == [0, 0, 0, 1, 1, 1]  # one speaker per class
                assert len(train) == 5
            else:
                assert len(splits.dev) == 0 and len(train) == 7
    again = leave_one_speaker_out(metadata, reader.ids, seed=1, dev=True)
    assert [f.splits.dev.ids for f in again] == [f.splits.dev.ids for f in folds]  # seeded


def test_folds_need_enough_speakers_of_each_class(tmp_path):
    reader = ShardReader(write_store(tmp_path / "s", speakers_per_gender=2, utterances_per_speaker=2))
    assert len(leave_one_speaker_out(reader.metadata(), reader.ids)) == 4
    with pytest.raises(ProbeError, match=r"needs at least 3 male speakers \(one held out, one for the dev split, one to train on\), got 2"):
        leave_one_speaker_out(reader.metadata(), reader.ids, dev=True)
    metadata = reader.metadata()
    metadata["gender"][0] = "male"  # female-0 now has a male utterance
    with pytest.raises(ProbeError, match="speaker female-0 is labelled both male and female"):
        leave_one_speaker_out(metadata, reader.ids)


def test_pooled_scores_of_single_class_folds_by_hand():
    # three folds: a female speaker with 4 of 4 right, a male one with 1 of 4, a male one with 3 of 3
    scores = metrics.single_class_scores(np.array([1, 0, 0]), np.array([4, 1, 3]), np.array([4, 4, 3]))
    # female: TP 4, FP 3 (the male utterances called female), FN 0 -> F1 8/11; male: TP 4, FP 0, FN 3 -> 8/11
    assert scores["f1_macro"] == pytest.approx(100 * 8 / 11) and scores["accuracy"] == pytest.approx(100 * 8 / 11)
    assert scores["recall_1"] == pytest.approx(100.0) and scores["recall_0"] == pytest.approx(100 * 4 / 7) and scores["count"] == 11
    y_true = np.array([1] * 4 + [0] * 7)
    y_pred = np.array([1] * 4 + [0, 1, 1, 1] + [0] * 3)
    for key, value in metrics.position_scores(y_true, y_pred).items():  # the same as scoring the pooled predictions
        assert scores[key] == pytest.approx(value)


@pytest.mark.parametrize("probe", ["mean", "positional"])
def test_loso_row_by_hand(voices, probe):
    """Every speaker is read right except male-0, who sounds female: 5 folds at 100 and one at 0."""
    row = run_probe(ProbeConfig(str(voices), SITE, probe=probe, split="loso")).row
    folds = {fold["speaker"]: fold for fold in row["folds"]}
    assert set(folds) == {f"{g}-{k}" for g in ("female", "male") for k in range(3)}
    assert {name: fold["accuracy"] for name, fold in folds.items()} == pytest.approx({name: 0.0 if name == "male-0" else 100.0 for name in folds})
    assert folds["male-0"] | {"accuracy": 0} == {"speaker": "male-0", "class": "male", "utterances": 4, "train_speakers": 5, "accuracy": 0}
    assert row["fold_accuracy_mean"] == pytest.approx(500 / 6)
    # pooled: female TP 12, FP 4 (male-0); male TP 8, FN 4 -> F1 24/28 and 16/20
    assert row["f1_macro"] == pytest.approx(100 * (24 / 28 + 16 / 20) / 2) and row["accuracy"] == pytest.approx(100 * 20 / 24)
    assert row["recall"] == pytest.approx({"male": 100 * 8 / 12, "female": 100.0})
    assert row["splits"] == {"source": "leave-one-speaker-out", "folds": 6, "speakers": {"male": 3, "female": 3}, "utterances": 24, "dev": "none"}
    assert row["config"]["split"] == "loso" and row["schema"] == 1 and row["subject"]["dataset"] == "toy"
    if probe == "positional":
        assert row["f1_s"] == pytest.approx(row["f1_macro"]) and row["positions_used"] == 5 and row["mean_test_length"] == 5


def test_loso_saves_each_utterance_right_or_wrong_for_accuracy_per_voice(voices):
    """Per-utterance outcomes (mean probe): male-0's four utterances wrong, every other one right; a
    control run keeps the share of its control seeds that read each utterance right."""
    arrays = run_probe(ProbeConfig(str(voices), SITE, probe="mean", split="loso")).arrays
    outcome = dict(zip(arrays["test_ids"].tolist(), arrays["test_correct"].tolist()))
    assert len(outcome) == 24 and outcome == {i: 0.0 if i.startswith("male-0-") else 1.0 for i in outcome}
    control = run_probe(ProbeConfig(str(voices), SITE, probe="mean", split="loso", control="shuffled")).arrays
    assert control["test_ids"].tolist() == arrays["test_ids"].tolist()
    assert set(np.round(control["test_correct"] * 3).tolist()) <= {0.0, 1.0, 2.0, 3.0}  # three control seeds
    assert "test_correct" not in run_probe(ProbeConfig(str(voices), SITE, probe="positional", split="loso")).arrays  # per position: no one class per utterance


def test_loso_shuffled_control_runs_per_fold(voices):
    row = run_probe(ProbeConfig(str(voices), SITE, probe="mean", split="loso", control="shuffled")).row
    real = run_probe(ProbeConfig(str(voices), SITE, probe="mean", split="loso")).row
    assert row["f1_real"] == pytest.approx(real["f1_macro"]) and row["fold_accuracy_mean_real"] == pytest.approx(real["fold_accuracy_mean"])
    assert row["selectivity"] == pytest.approx(row["f1_real"] - row["f1_macro"])
    assert row["control_seeds"] == [0, 1, 2] and row["f1_macro"] == pytest.approx(np.mean(row["control_f1_per_seed"]))
    assert row["f1_macro"] < 75 and row["selectivity"] > 10  # labels agreeing with gender on half of each class carry none of it
    assert [fold["accuracy_real"] for fold in row["folds"]] == [fold["accuracy"] for fold in real["folds"]]


def test_loso_attention_holds_out_a_dev_speaker_per_class(voices):
    row = run_probe(ProbeConfig(str(voices), SITE, probe="attention", split="loso", max_epochs=15)).row
    assert row["splits"]["dev"] == "one training speaker per class, drawn per fold"
    for fold in row["folds"]:
        assert fold["train_speakers"] == 3 and len(fold["dev_speakers"]) == 2 and fold["speaker"] not in fold["dev_speakers"]
        assert {"best_epoch", "epochs"} <= set(fold)
    assert {f["speaker"]: f["accuracy"] for f in row["folds"]}["female-1"] == 100.0


def test_loso_sampled_probe_chooses_its_fraction_on_a_dev_speaker_pair(voices):
    row = run_probe(ProbeConfig(str(voices), SITE, probe="sampled", split="loso")).row
    folds = {fold["speaker"]: fold for fold in row["folds"]}
    assert all(len(fold["dev_speakers"]) == 2 and fold["train_speakers"] == 3 and "sampled_fraction" in fold for fold in folds.values())
    assert folds["male-0"]["accuracy"] == 0.0 and row["splits"]["dev"] == "one training speaker per class, drawn per fold"


def test_loso_refuses_what_does_not_combine_with_it():
    for options, message in (
        ({"mdl": True}, "MDL's online code has no test split"),
        ({"control": "speaker"}, "the speaker control is trained and scored within speakers"),
        ({"probe": "attention", "apply_to": "other"}, "apply_to predicts with one trained probe"),
        ({"allow_shared_speakers": True}, "leave-one-speaker-out never shares a speaker between train and test"),
    ):
        with pytest.raises(ProbeError, match=f"^split loso: {message}"):
            ProbeConfig("s", SITE, split="loso", **options)
    with pytest.raises(ProbeError, match=r"unknown split 'speaker'; choose from \('fixed', 'loso', 'stratified'\)"):
        ProbeConfig("s", SITE, split="speaker")


def test_run_ids_of_existing_configs_are_unchanged(monkeypatch):
    """Ids computed before ``split`` existed (the code of the commit before it, run from ``/``: a run
    id hashes the store's resolved path): the default split is left out of the hash."""
    monkeypatch.chdir("/")
    assert ProbeConfig(store="stores/wb", site="encoder.layer.3").run_id() == "dd715faa2132e4c3"
    attention = ProbeConfig(store="stores/wb", site="encoder.final", probe="attention", control="shuffled", seed=2, mdl=True)
    assert attention.run_id() == "833aa14ed2e90c7f"
    assert ProbeConfig(store="stores/wb", site="encoder.final", probe="mean", loader_workers=2).run_id() == "5fa96021c01fa2b1"
    assert ProbeConfig(store="stores/wb", site="encoder.layer.3", split="fixed").run_id() == "dd715faa2132e4c3"
    assert ProbeConfig(store="stores/wb", site="encoder.layer.3", split="loso").run_id() != "dd715faa2132e4c3"


def test_grid_option_and_cli_flag(tmp_path, voices, capsys):
    configs = expand_grid({"stores": [str(voices)], "probes": ["mean"], "options": {"split": "loso"}})
    assert [c.split for c in configs] == ["loso"]
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"out: {tmp_path / 'g.jsonl'}\nstores: [{voices}]\noptions: {{split: 3}}\n")
    with pytest.raises(GridError, match="options: split is str, got 3"):
        read_grid(grid)
    with pytest.raises(GridError, match="MDL's online code has no test split"):
        expand_grid({"stores": [str(voices)], "probes": ["mean"], "options": {"split": "loso", "mdl": True}})
    out = tmp_path / "probes.jsonl"
    assert probe_cli.main(["--store", str(voices), "--site", SITE, "--probe", "mean", "--split", "loso", "--out", str(out)]) == 0
    row = json.loads(out.read_text())
    assert row["config"]["split"] == "loso" and len(row["folds"]) == 6
    with pytest.raises(SystemExit) as exit_info:
        probe_cli.main(["--store", str(voices), "--site", SITE, "--split", "loso", "--mdl", "--out", str(out)])
    assert exit_info.value.code == 2 and "split loso: MDL's online code" in capsys.readouterr().err


def _row(run_id, split=None, f1_s=70.0):
    config = {"store": "stores/wb", "site": SITE, "probe": "positional", "control": "none", "seed": 0, "task": "female-male"}
    row = {"schema": 1, "run_id": run_id, "subject": {"model": "m", "dataset": "cv", "language": "en"}, "site_index": 0, "config": config, "f1_s": f1_s}
    if split:
        config["split"] = split
    return row


def test_collect_keeps_a_loso_row_apart_from_the_fixed_one(tmp_path):
    from experiments.results.collect import collect

    probes = tmp_path / "p.jsonl"
    probes.write_text("".join(json.dumps(row) + "\n" for row in (_row("old"), _row("new", "loso", f1_s=55.0))))  # a row from before split: fixed
    collected = collect([probes], [])
    assert sorted((row["split"], row["value"]) for row in collected.long if row["metric"] == "f1_s") == [("fixed", 70.0), ("loso", 55.0)]
    assert [row["runs"] for row in collected.unmatched["probes_without_gap"]] == ["old"]  # the joins take the fixed split only


def test_heatmaps_read_one_split():
    from experiments.reports.plots import long_condition_scores, site_condition_scores

    rows = [_row("a"), _row("b", "loso", f1_s=55.0)]
    assert site_condition_scores(rows, "stores/wb", None, "positional", None, [SITE])[0] == {(SITE, "pretrained"): 70.0}
    assert site_condition_scores(rows, "stores/wb", None, "positional", None, [SITE], split="loso")[0] == {(SITE, "pretrained"): 55.0}
    long = [
        {"kind": "probe", "model": "m", "probe": "positional", "metric": "f1_s", "applied_to": "", "control": "none", "site": SITE, "site_index": "0"}
        | {"split": split, "value": value, "dataset": "cv", "language": "en"}
        for split, value in (("fixed", "70"), ("loso", "55"))
    ]
    assert long_condition_scores(long, "m", None, "positional", None, None, "loso")[0] == {(SITE, "pretrained"): 55.0}
    assert long_condition_scores(long, "m", None, "positional", None, None)[0] == {(SITE, "pretrained"): 70.0}


def test_heatmap_sites_run_through_the_encoder_before_the_decoder():
    """A decoder store's sites (``site_role`` decoder, indices from 0 again) come after the encoder's, not between them."""
    from experiments.reports.plots import long_condition_scores

    sites = (("encoder.layer.0", "0", "layer"), ("encoder.final", "1", "final"), ("decoder.layer.0", "0", "decoder"), ("decoder.final", "1", "decoder"))
    long = [
        {"kind": "probe", "model": "m", "probe": "mean", "metric": "f1_macro", "applied_to": "", "control": "none", "site": site, "site_index": index}
        | {"site_role": role, "split": "fixed", "value": "60", "dataset": "cv", "language": "en"}
        for site, index, role in sites
    ]
    assert long_condition_scores(long, "m", None, "mean", None, None)[1] == ["encoder.layer.0", "encoder.final", "decoder.layer.0", "decoder.final"]
