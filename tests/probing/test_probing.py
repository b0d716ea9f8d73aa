import json

import numpy as np
import pytest

from extract.store import ShardReader
from probing import metrics
from probing.controls import selectivity, shuffled, speaker_labels
from probing.data import ProbeError, make_splits
from probing.mdl import block_ends, online_code, speaker_order
from probing.modules import interpolate_weights
from probing.run import ProbeConfig, run_probe
from tests.synthetic_store import write_store


def test_position_scores_by_hand():
    y = np.array([0, 0, 1, 1])
    pred = np.array([[0, 1], [0, 1], [1, 1], [0, 1]])
    scores = metrics.position_scores(y, pred)
    # position 0: class 0 F1 = 2*2/(4+1) = 0.8, class 1 F1 = 2*1/(2+0+1) = 2/3 -> macro 73.33
    assert scores["f1_macro"][0] == pytest.approx(100 * (0.8 + 2 / 3) / 2)
    assert scores["accuracy"][0] == pytest.approx(75.0) and scores["recall_1"][0] == pytest.approx(50.0)
    # position 1 predicts 1 everywhere: class 0 absent from predictions -> F1 0 (zero_division=0)
    assert scores["f1_macro"][1] == pytest.approx(100 * (0 + 2 * 2 / (4 + 2)) / 2)
    masked = metrics.position_scores(y, pred, np.array([[1, 1], [1, 1], [1, 1], [0, 1]], bool))
    assert masked["count"].tolist() == [3, 4] and masked["accuracy"][0] == pytest.approx(100.0)


def test_ema_and_f1_s_by_hand():
    np.testing.assert_allclose(metrics.ema(np.array([10.0, 20.0, 0.0]), 3), [10.0, 15.0, 7.5])
    assert metrics.f1_s(np.array([90.0, 80.0, 70.0, 10.0]), 2.4) == pytest.approx(80.0)  # positions 0..2


def test_summary_keys():
    row = metrics.summary(np.array([0, 1, 1]), np.array([0, 1, 0]), ("male", "female"))
    assert set(row) == {"f1_macro", "accuracy", "recall"} and row["recall"] == {"male": 100.0, "female": 50.0}


def test_splits_from_manifest_are_balanced_and_speaker_disjoint(tmp_path):
    reader = ShardReader(write_store(tmp_path / "s", utterances_per_speaker=4))
    splits = make_splits(reader.metadata(), reader.ids, seed=1)
    assert splits.source == "manifest"
    for name in ("train", "dev", "test"):
        part = getattr(splits, name)
        assert part.labels.mean() == 0.5
    speakers = [set(getattr(splits, n).speakers.tolist()) for n in ("train", "dev", "test")]
    assert not (speakers[0] & speakers[1]) and not (speakers[0] & speakers[2]) and not (speakers[1] & speakers[2])
    assert splits.sizes()["train"] == {"utterances": 48, "speakers": 12, "class_1_share": 0.5}


def test_speaker_disjoint_splits_when_the_manifest_has_none(tmp_path):
    reader = ShardReader(write_store(tmp_path / "s", splits=False, speakers_per_gender=5, utterances_per_speaker=3))
    a = make_splits(reader.metadata(), reader.ids, seed=3)
    b = make_splits(reader.metadata(), reader.ids, seed=3)
    assert a.source == "speaker-disjoint" and a.test.ids == b.test.ids
    assert not set(a.train.speakers) & set(a.test.speakers)
    assert len(set(a.test.speakers)) == 2  # 20 % of 5 speakers per class, rounded
    metadata = reader.metadata()
    metadata["gender"] = ["female" if g == "female" else "other" for g in metadata["gender"]]
    with pytest.raises(ValueError, match="no utterances labelled male: a female-male probe needs both classes"):
        make_splits(metadata, reader.ids)


def test_downsampling_spreads_over_speakers(tmp_path):
    reader = ShardReader(write_store(tmp_path / "s", speakers_per_gender=5, utterances_per_speaker=6))
    metadata = reader.metadata()
    drop = {i for i, (g, s) in enumerate(zip(metadata["gender"], metadata["speaker"])) if g == "male" and s != "male-0" and s != "male-1" and s != "male-2"}
    keep = [i for i in range(len(reader.ids)) if i not in drop or metadata["split"][i] != "train"]
    sub = {k: [v[i] for i in keep] for k, v in metadata.items()}
    splits = make_splits(sub, [reader.ids[i] for i in keep])
    female_speakers = splits.train.speakers[splits.train.labels == 1]
    counts = {s: int((female_speakers == s).sum()) for s in set(female_speakers.tolist())}
    assert sum(counts.values()) == 18 and max(counts.values()) - min(counts.values()) <= 1


def test_mdl_blocks_snap_to_speakers_and_bits_add_up():
    speakers = np.array(["a"] * 4 + ["b"] * 4 + ["c"] * 2)
    order = speaker_order(speakers, seed=0)
    assert all(len(set(speakers[order][i : i + 2].tolist())) >= 1 for i in range(0, 10, 2))
    ends = block_ends(speakers[order], (10.0, 50.0, 100.0))
    assert ends[-1] == 10 and all(speakers[order][e - 1] != speakers[order][e] for e in ends[:-1])
    labels = np.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 1])
    # a "probe" that always says P(class 1) = 0.75: every coded example costs -log2(0.75) or -log2(0.25)
    code = online_code(
        labels, np.ones((10, 1), bool), speakers, fit=lambda idx: None, probabilities=lambda m, idx: np.full(len(idx), 0.75), seed=0, fractions=(40.0, 100.0)
    )
    first = code.block_ends[0]
    ordered = labels[speaker_order(speakers, 0)]
    expected = first * 1.0
    if len(set(ordered[:first].tolist())) < 2:
        expected += (10 - first) * 1.0
        assert code.uniform_blocks == [1]
    else:
        expected += sum(-np.log2(0.75) if y == 1 else -np.log2(0.25) for y in ordered[first:])
    assert code.online_bits[0] == pytest.approx(expected) and code.uniform_bits[0] == 10.0


def test_mdl_with_every_later_block_uniform_trains_nothing():
    speakers = np.array(["a"] * 3 + ["b"] * 3)
    labels = np.array([1, 1, 1, 0, 0, 0])  # two speakers, one class each: block 2 follows one class only

    def never(_):
        raise AssertionError("no probe should be trained")

    code = online_code(labels, np.ones((6, 1), bool), speakers, fit=None, probabilities=lambda m, idx: None, fractions=(50.0, 100.0), fit_many=never)
    assert code.uniform_blocks == [1] and code.online_bits[0] == pytest.approx(6.0) == code.uniform_bits[0]


def test_controls():
    labels = np.array([0, 0, 1, 1, 1, 0])
    assert sorted(shuffled(labels, 0).tolist()) == sorted(labels.tolist())
    mapping = speaker_labels(np.array(["a", "b", "c", "d", "a"]), seed=2)
    assert sorted(mapping) == ["a", "b", "c", "d"] and sum(mapping.values()) == 2
    assert selectivity(90.0, 55.0) == 35.0


def test_interpolated_attention_weights():
    curves = interpolate_weights([[1.0, 0.0], [0.2, 0.2, 0.6]], points=5)
    np.testing.assert_allclose(curves[0], [1.0, 0.75, 0.5, 0.25, 0.0])
    np.testing.assert_allclose(curves[1], [0.2, 0.2, 0.2, 0.4, 0.6])


@pytest.fixture(scope="module")
def separable(tmp_path_factory):
    return write_store(tmp_path_factory.mktemp("sep") / "store", strength=4.0, informative=range(0, 30))


@pytest.fixture(scope="module")
def signal_at_start(tmp_path_factory):
    return write_store(tmp_path_factory.mktemp("start") / "store", strength=4.0, informative=range(0, 3), length_range=(20, 40), utterances_per_speaker=20)


def test_separable_data_gives_f1_near_100_and_high_compression(separable):
    result = run_probe(ProbeConfig(store=str(separable), site="encoder.layer.0", probe="mean", mdl=True))
    row = result.row
    assert row["f1_macro"] > 97 and row["compression"] > 3
    assert set(row["recall"]) == {"male", "female"} and row["splits"]["test"]["utterances"] == 40


def test_shuffled_labels_give_chance_f1_and_compression_near_1(separable):
    result = run_probe(ProbeConfig(store=str(separable), site="encoder.layer.0", probe="mean", mdl=True, control="shuffled"))
    row = result.row
    assert 30 < row["f1_macro"] < 70 and row["f1_real"] > 97 and row["selectivity"] > 27
    assert 0.7 < row["compression"] < 1.3
    control = run_probe(ProbeConfig(store=str(separable), site="encoder.layer.0", probe="mean", mdl=True, control="speaker"))
    assert 0.7 < control.row["compression"] < 1.3 and control.row["selectivity"] > 20


def test_positional_probes_agree_with_scikit_learn(signal_at_start):
    from sklearn.linear_model import LogisticRegression

    from probing import features

    config = ProbeConfig(store=str(signal_at_start), site="encoder.layer.0", probe="positional", positions=25)
    result = run_probe(config)
    reader = ShardReader(signal_at_start)
    splits = make_splits(reader.metadata(), reader.ids, seed=0)
    width = result.row["positions_used"]
    x_train, l_train = reader.leading(config.site, width, splits.train.ids)
    x_test, l_test = reader.leading(config.site, width, splits.test.ids)
    m_train, m_test = features.valid_mask(l_train, width), features.valid_mask(l_test, width)
    scaler = features.Standardizer.fit(x_train, m_train)
    x_train, x_test = scaler(x_train), scaler(x_test)
    ours = result.arrays["test_f1_macro"]
    for p in range(width):
        rows = m_train[:, p]
        model = LogisticRegression(max_iter=1000).fit(x_train[rows, p], splits.train.labels[rows])
        sk = metrics.position_scores(splits.test.labels[m_test[:, p]], model.predict(x_test[m_test[:, p], p]))["f1_macro"]
        assert abs(float(sk) - ours[p]) <= 2.0, p
    assert np.mean(ours[:3]) > 90 and np.mean(ours[5:15]) < 75
    assert result.row["f1_s"] == pytest.approx(float(np.mean(ours[: int(np.ceil(result.row["mean_test_length"]))])))


def test_attention_concentrates_on_informative_positions(signal_at_start):
    # lr above the paper's 1e-4 so that the test converges in seconds; the mechanism is the same
    result = run_probe(ProbeConfig(store=str(signal_at_start), site="encoder.layer.0", probe="attention", max_epochs=300, lr=1e-3))
    assert result.row["f1_macro"] > 95
    weights = result.attention["weights"]
    assert len(weights) == result.row["splits"]["test"]["utterances"]
    mass_on_signal = np.mean([w[:3].sum() for w in weights])
    assert mass_on_signal > 0.3  # three informative frames out of 20-40: uniform attention would give ~0.1


def test_cli_grid_appends_rows_and_skips_finished_runs(tmp_path, separable, capsys):
    from experiments.probe import main

    grid = tmp_path / "grid.yaml"
    out = tmp_path / "results.jsonl"
    grid.write_text(f"out: {out}\nstores: [{separable}]\nsites: all\nprobes: [mean, sampled]\ncontrols: [none]\nseeds: [0, 1]\noptions: {{positions: 10}}\n")
    assert main(["--grid", str(grid)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4 and len({r["run_id"] for r in rows}) == 4
    for row in rows:
        assert {"config", "seed", "splits", "f1_macro", "accuracy", "recall", "package_version", "git_commit"} <= set(row)
    assert (tmp_path / "results.jsonl.arrays" / f"{rows[0]['run_id']}.npz").exists()
    assert main(["--grid", str(grid)]) == 0
    assert len(out.read_text().splitlines()) == 4 and "0 to do" in capsys.readouterr().out


def test_run_id_depends_on_seed_and_config():
    a = ProbeConfig(store="s", site="x")
    assert a.run_id() != ProbeConfig(store="s", site="x", seed=1).run_id()
    assert a.run_id() == ProbeConfig(store="s", site="x", device="cuda").run_id()
    with pytest.raises(ValueError, match="unknown probe"):
        ProbeConfig(store="s", site="x", probe="mlp")


# --- the probe results format (probing.results) ------------------------------------------------------


def _result(run_id, f1, attention=None, **arrays):
    from probing.run import ProbeResult

    return ProbeResult({"run_id": run_id, "f1_macro": f1}, arrays, attention or {})


def test_results_round_trip_keeps_the_latest_row_and_ragged_attention(tmp_path):
    from probing.results import arrays_folder, load_arrays, load_attention, load_rows, save_result

    out = tmp_path / "sub" / "r.jsonl"
    out.parent.mkdir()
    weights = [np.array([0.25, 0.75]), np.array([1.0]), np.array([0.5, 0.25, 0.25])]
    save_result(
        _result("a", 60.0, {"ids": ["u1", "u2", "u3"], "weights": weights, "probabilities": [0.9, 0.2, 0.6]}, test_f1_macro=np.array([50.0, 70.0])), out
    )
    save_result(_result("b", 55.0), out)
    save_result(_result("a", 61.0), out)  # recomputed: the later row is the one readers get
    assert len(out.read_text().splitlines()) == 3
    assert load_rows(out) == {"a": {"run_id": "a", "f1_macro": 61.0}, "b": {"run_id": "b", "f1_macro": 55.0}}
    assert arrays_folder(out) == tmp_path / "sub" / "r.jsonl.arrays"
    np.testing.assert_array_equal(load_arrays(out, "a")["test_f1_macro"], [50.0, 70.0])
    ids, loaded, probabilities = load_attention(out, "a")
    assert ids == ["u1", "u2", "u3"] and [w.tolist() for w in loaded] == [w.tolist() for w in weights]
    np.testing.assert_allclose(probabilities, [0.9, 0.2, 0.6])


def test_predictions_come_from_the_applied_store_where_there_is_one(tmp_path):
    from probing.results import load_predictions, save_result

    out = tmp_path / "r.jsonl"
    attention = {"ids": ["t1", "t2"], "weights": [np.ones(2) / 2, np.ones(1)], "probabilities": [0.7, 0.5]}
    save_result(_result("test-only", 50.0, attention, test_f1_macro=np.zeros(1)), out)
    assert load_predictions(out, "test-only") == {"t1": "female", "t2": "male"}  # 0.5 is not above 0.5: class 0
    save_result(
        _result(
            "applied",
            50.0,
            attention,
            applied_ids=np.array(["m1", "m2"]),
            applied_probabilities=np.array([0.1, 0.8]),
            applied_class_names=np.array(["male", "other"]),
        ),
        out,
    )
    assert load_predictions(out, "applied") == {"m1": "male", "m2": "other"}


def test_predictions_on_the_test_split_are_named_by_the_rows_classes(tmp_path):
    """An attribute run's row names its classes; a gender run's task names its own (other-male: other is class 1)."""
    from probing.results import load_predictions, save_result
    from probing.run import ProbeResult

    out = tmp_path / "r.jsonl"
    weights = [np.ones(1), np.ones(1)]
    three = {"ids": ["t1", "t2"], "weights": weights, "probabilities": np.array([[0.2, 0.5, 0.3], [0.7, 0.1, 0.2]])}
    save_result(ProbeResult({"run_id": "three", "f1_macro": 50.0, "classes": ["north", "south", "west"]}, {}, three), out)
    assert load_predictions(out, "three") == {"t1": "south", "t2": "north"}
    two = {"ids": ["t1", "t2"], "weights": weights, "probabilities": [0.7, 0.2]}
    save_result(ProbeResult({"run_id": "other", "f1_macro": 50.0, "config": {"task": "other-male"}}, {}, two), out)
    assert load_predictions(out, "other") == {"t1": "other", "t2": "male"}


def test_load_rows_names_the_line_that_is_not_a_row(tmp_path):
    from probing.results import ResultsError, load_rows

    out = tmp_path / "r.jsonl"
    out.write_text('{"run_id": "a"}\n\n{"no_run_id": 1}\n')
    with pytest.raises(ResultsError, match=r"r\.jsonl:3: not a result row"):
        load_rows(out)


def test_finished_ids_skip_only_rows_read_from_the_stores_as_they_are(tmp_path, separable):
    from probing.data import config_store_identity
    from probing.results import finished_ids

    same, changed, missing = (ProbeConfig(store=str(separable), site="encoder.layer.0", seed=seed) for seed in (0, 1, 2))
    rows = {same.run_id(): {"store_identity": config_store_identity(same)}, changed.run_id(): {"store_identity": "an older store"}}
    assert finished_ids([same, changed, missing], rows) == {same.run_id()}
    assert finished_ids([same], {}) == set()


def _voices(speakers: dict[str, tuple[str, str]], clips: int = 3, language: str = "en") -> tuple[dict, list[str]]:
    """Store metadata of ``clips`` utterances per speaker: name -> (gender, manifest split or "")."""
    rows = [(f"{name}-{clip}", gender, name, split) for name, (gender, split) in speakers.items() for clip in range(clips)]
    metadata = {"gender": [r[1] for r in rows], "speaker": [r[2] for r in rows], "split": [r[3] for r in rows], "language": [language] * len(rows)}
    return metadata, [r[0] for r in rows]


FOUR = {"s1": ("female", "train"), "s2": ("female", "test"), "s3": ("male", "train"), "s4": ("male", "test")}


def test_a_probe_that_selects_nothing_on_dev_needs_no_dev_speaker():
    """The audit's corpus: 2 speakers per gender. Positional, mean and max probes select nothing on dev,
    so one speaker per gender trains and one tests; a probe that selects on dev needs a third."""
    metadata, ids = _voices({name: (gender, "") for name, (gender, _) in FOUR.items()})
    splits = make_splits(metadata, ids, dev_needed=False)
    assert len(splits.dev) == 0 and len(set(splits.train.speakers)) == 2 and len(set(splits.test.speakers)) == 2
    assert not set(splits.train.speakers) & set(splits.test.speakers)
    with pytest.raises(ProbeError) as refused:
        make_splits(metadata, ids, dev_needed=True, language="en")
    message = str(refused.value)
    assert message.startswith("the speakers in language en (the manifest gives no train and test split): the fixed split needs at least 3 ")
    assert "speakers (one to test, one for the dev split, one to train), and has 2 (" in message
    assert "or leave one speaker out (--split loso; split: loso in a study or grid)" in message


def test_the_manifest_train_split_is_counted_as_such_when_dev_is_carved_from_it():
    metadata, ids = _voices(FOUR)
    splits = make_splits(metadata, ids, dev_needed=False)
    assert splits.source == "manifest" and set(splits.train.speakers) == {"s1", "s3"} and len(splits.dev) == 0
    with pytest.raises(ProbeError) as refused:
        make_splits(metadata, ids, dev_needed=True)
    message = str(refused.value)
    assert message.startswith("the manifest's train split in language en (its dev split is carved from it): the fixed split needs at least 2 ")
    assert "(one for the dev split, one to train), and has 1 (s" in message and "split: loso" in message
    metadata["split"] = ["train" if name in ("s1", "s2", "s3") else "test" for name in metadata["speaker"]]
    with pytest.raises(ProbeError, match=r"the test split in language en lacks one of the classes male/female \(its speakers: s4\); give both"):
        make_splits(metadata, ids, dev_needed=False)


def test_with_enough_speakers_the_split_does_not_depend_on_the_kind(tmp_path):
    """Existing results stay: a dev split is carved wherever it could be before, whatever the kind."""
    reader = ShardReader(write_store(tmp_path / "s", speakers_per_gender=5, utterances_per_speaker=3))
    metadata = reader.metadata()
    metadata["split"] = [""] * len(reader.ids)
    for seed in (0, 1):
        needed, not_needed = (make_splits(metadata, reader.ids, seed=seed, dev_needed=flag) for flag in (True, False))
        for part in ("train", "dev", "test"):
            assert getattr(needed, part).ids == getattr(not_needed, part).ids
