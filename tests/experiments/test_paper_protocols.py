"""The papers' probing protocols as options beside the package's stricter defaults: Attanasio et
al. 2024's speaker-stratified sampling (speakers heard in training are scored in test, B.3) and
scikit-learn's defaults (no standardisation, C = 1, MDL at that C without the guard)."""

import numpy as np
import pytest

from extract.store import ShardReader
from probing.data import speaker_stratified_splits
from probing.mdl import UNGUARDED
from probing.run import ProbeConfig, run_probe
from tests.synthetic_store import write_store

SITE = "encoder.layer.0"


def _metadata(counts: dict[str, int]) -> tuple[dict, list[str]]:
    """Speakers ``f*`` female and ``m*`` male with ``counts[speaker]`` utterances each, no manifest splits."""
    ids, meta = [], {"gender": [], "speaker": [], "split": [], "language": []}
    for speaker, count in counts.items():
        for k in range(count):
            ids.append(f"{speaker}-{k}")
            meta["gender"].append("female" if speaker.startswith("f") else "male")
            meta["speaker"].append(speaker)
            meta["split"].append("test")  # ignored: the paper samples from the concatenation of validation and test
            meta["language"].append("en")
    return meta, ids


def test_speaker_stratified_splits_spread_every_speaker_over_train_and_test_by_hand():
    meta, ids = _metadata({"f0": 10, "f1": 10, "m0": 10, "m1": 10, "m2": 1})
    splits = speaker_stratified_splits(meta, ids, seed=3)
    assert splits.source == "speaker-stratified"
    for name, share in (("test", 2), ("dev", 1)):  # 20 % and 10 % of each speaker's 10 utterances; m2's single one stays in train
        part = getattr(splits, name)
        assert sorted(part.speakers.tolist()) == sorted([s for s in ("f0", "f1", "m0", "m1") for _ in range(share)]), name
    assert len(splits.train) == 2 * 14 and splits.train.labels.mean() == 0.5  # 14 female in train; 15 male downsampled to 14
    assert splits.shared_speakers == {"dev": ["f0", "f1", "m0", "m1"], "test": ["f0", "f1", "m0", "m1"]}
    everything = splits.train.ids + splits.dev.ids + splits.test.ids
    assert len(set(everything)) == len(everything)  # an utterance is in one split only
    assert speaker_stratified_splits(meta, ids, seed=3).test.ids == splits.test.ids  # seeded
    assert speaker_stratified_splits(meta, ids, seed=4).test.ids != splits.test.ids


def test_a_stratified_run_records_its_shared_speakers_and_has_its_own_run_id(tmp_path):
    store = write_store(tmp_path / "s", speakers_per_gender=4, utterances_per_speaker=10, splits=False)
    fixed = ProbeConfig(str(store), SITE, probe="mean")
    stratified = ProbeConfig(str(store), SITE, probe="mean", split="stratified")
    assert fixed.run_id() != stratified.run_id()
    row = run_probe(stratified).row
    assert row["splits"]["source"] == "speaker-stratified" and row["config"]["split"] == "stratified"
    assert set(row["shared_speakers"]["test"]) == set(ShardReader(store).metadata()["speaker"])


def test_scikit_learn_defaults_variant_matches_sklearn_and_codes_mdl_at_c_1_unguarded(tmp_path):
    from sklearn.linear_model import LogisticRegression

    from probing import features

    store = write_store(tmp_path / "s", speakers_per_gender=6, utterances_per_speaker=6, strength=0.4, splits=False)
    config = ProbeConfig(str(store), SITE, probe="mean", split="stratified", standardize=False, c=1.0, mdl=True, mdl_guard=False, max_iter=1000)
    guarded = ProbeConfig(str(store), SITE, probe="mean", split="stratified", standardize=False, c=1.0, mdl=True)
    assert config.run_id() != guarded.run_id()
    result = run_probe(config)
    row = result.row
    assert row["mdl_guard"] == UNGUARDED and "mdl_c_grid" not in row
    assert run_probe(guarded).row["mdl_guard"].startswith("Bayesian mixture")
    # the same split fitted by scikit-learn with its defaults (C = 1, lbfgs, no scaling): the same predictions
    reader = ShardReader(store)
    splits = speaker_stratified_splits(reader.metadata(), reader.ids, seed=0)
    x = {name: features.pooled(reader, SITE, getattr(splits, name).ids, "mean")[:, 0].astype(float) for name in ("train", "test")}
    predicted = LogisticRegression(max_iter=1000).fit(x["train"], splits.train.labels).predict(x["test"])
    accuracy = 100 * float(np.mean(predicted == splits.test.labels))
    assert row["accuracy"] == pytest.approx(accuracy, abs=100 / len(splits.test) + 1e-9)  # at most one utterance apart (solver tolerance)


def test_the_study_report_correlates_and_draws_each_split_apart(tmp_path):
    """The paper's protocol (split stratified) and the stricter one (fixed) of one model, dataset and
    site: two correlations and two figures, never one pooled over both."""
    import json
    from types import SimpleNamespace

    from experiments.results.collect import F1_VS_GAP, F1_VS_MUSTSHE, write_csv
    from experiments.study.report import write_correlations, write_figures

    results, figures = tmp_path / "results", tmp_path / "figures"
    results.mkdir()
    f1 = {"stratified": (90.0, 80.0, 70.0), "fixed": (60.0, 65.0, 50.0)}
    gaps = (-10.0, 0.0, 15.0)
    rows = [
        {"model": "w", "dataset": "cv", "language": language, "site": "encoder.final", "site_index": 2, "site_role": "final", "task": "female-male"}
        | {"split": split, "f1_s": f1[split][k], "gap_relative": gaps[k], "gap_estimate": "resampled", "seeds": "0"}
        for split in f1
        for k, language in enumerate(("en", "es", "it"))
    ]
    write_csv(rows, F1_VS_GAP, results / "f1_vs_gap.csv")
    write_csv([], F1_VS_MUSTSHE, results / "f1_vs_mustshe.csv")
    (results / "long.csv").write_text("kind,model,dataset,language,site,probe,control,metric,applied_to,site_index,value\n")
    layout = SimpleNamespace(results=results, figures=figures, out=tmp_path)
    study = SimpleNamespace(report={"site": "encoder.final"})
    correlations = json.loads(write_correlations(layout, study).read_text())["f1_vs_gap"]
    assert [(entry["split"], entry["n"], round(entry["pearson_r"], 6)) for entry in correlations] == [
        ("fixed", 3, round(float(np.corrcoef(f1["fixed"], gaps)[0, 1]), 6)),
        ("stratified", 3, round(float(np.corrcoef(f1["stratified"], gaps)[0, 1]), 6)),
    ]
    drawn = json.loads(write_figures(layout, study).read_text())["figures"]
    assert sorted(figure["paths"][0] for figure in drawn if figure["kind"] == "f1_vs_gap") == [
        "f1_vs_gap-w-cv-stratified.png",
        "f1_vs_gap-w-cv.png",
    ]


def test_mdl_in_random_order_cuts_blocks_at_the_fractions_as_the_paper():
    from probing.mdl import DEFAULT_FRACTIONS, block_ends, example_order

    # 108 examples, fractions 0.2 .. 100 %: round(108 f), at least 1 -> 0.2 %, 0.4 %, 0.8 %: 1 (kept once); 1.6 %: 1.73 -> 2;
    # 3.2 %: 3.46 -> 3; 6.25 %: 6.75 -> 7; 12.5 %: 13.5 -> 14; 25 %: 27; 50 %: 54; 100 %: 108
    speakers = np.repeat(np.arange(12), 9)
    order = example_order(speakers, 0, "random")
    assert sorted(order.tolist()) == list(range(108)) and order.tolist() == example_order(speakers, 0, "random").tolist()
    assert block_ends(speakers[order], DEFAULT_FRACTIONS, snap=False) == [1, 2, 3, 7, 14, 27, 54, 108]
    # the package's default: whole speakers of 9 examples, each end moved forward to the next speaker boundary
    grouped = example_order(speakers, 0, "speaker")
    assert block_ends(speakers[grouped], DEFAULT_FRACTIONS) == [9, 18, 27, 54, 108]
    with pytest.raises(ValueError, match="MDL order must be one of speaker, random, got 'sorted'"):
        example_order(speakers, 0, "sorted")


def test_the_paper_protocol_codes_mdl_in_random_order_and_the_default_keeps_its_run_id(tmp_path):
    from probing.data import ProbeError

    store = write_store(tmp_path / "s", speakers_per_gender=6, utterances_per_speaker=6, strength=0.4, splits=False)
    common = {"probe": "mean", "split": "stratified", "standardize": False, "c": 1.0, "mdl": True, "mdl_guard": False, "max_iter": 1000}
    paper = ProbeConfig(str(store), SITE, mdl_order="random", **common)
    grouped = ProbeConfig(str(store), SITE, **common)
    assert paper.run_id() != grouped.run_id() == ProbeConfig(str(store), SITE, mdl_order="speaker", **common).run_id()
    row, speaker_row = run_probe(paper).row, run_probe(grouped).row
    assert row["mdl_order"] == "random" and speaker_row["mdl_order"] == "speaker"
    assert row["mdl_blocks"] > speaker_row["mdl_blocks"]  # blocks at the fractions, not snapped to the 12 speakers
    with pytest.raises(ProbeError, match="unknown mdl_order 'sorted'"):
        ProbeConfig(str(store), SITE, mdl_order="sorted")
