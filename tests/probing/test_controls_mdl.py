"""Controls that can fail both ways, and an online code guarded against accidental overconfidence."""

from __future__ import annotations

import numpy as np
import pytest

from extract.store import PartWriter, ShardReader
from probing import controls, features
from probing.data import ProbeError, make_splits
from probing.mdl import mixture_bits, online_code, online_code_logistic, prequential_choice, speaker_order, uniform_block_count
from probing.run import ProbeConfig, run_probe
from tests.synthetic_store import write_store

SITE = "encoder.layer.0"


# ---------------------------------------------------------------- shuffled control labels


def _agreement(control, labels, members):
    return int((control[members] == labels[members]).sum())


@pytest.mark.parametrize("seed", range(6))
def test_shuffled_agrees_on_exactly_half_of_each_class_and_speaker(seed):
    speakers = np.array([f"f{i // 6}" for i in range(24)] + [f"m{i // 4}" for i in range(24)])  # 4 x 6 and 6 x 4 utterances
    labels = np.array([1] * 24 + [0] * 24)
    control = controls.shuffled(labels, seed, speakers)
    for label in (0, 1):
        assert _agreement(control, labels, labels == label) == 12
    for name in set(speakers.tolist()):
        assert _agreement(control, labels, speakers == name) == (speakers == name).sum() // 2
    assert sorted(control.tolist()) == sorted(labels.tolist())  # equal classes: the counts are kept, as by a permutation


@pytest.mark.parametrize("seed", range(6))
def test_shuffled_with_odd_sizes_is_within_one_of_half(seed):
    speakers = np.array(["a"] * 3 + ["b"] * 3 + ["c"] * 5 + ["d"] * 3 + ["e"] * 4 + ["f"] * 4)
    labels = np.concatenate([np.ones(11, int), np.zeros(11, int)])  # two odd classes of 11: speakers a-c, d-f
    control = controls.shuffled(labels, seed, speakers)
    for label in (0, 1):
        assert _agreement(control, labels, labels == label) in (5, 6)
    for name in set(speakers.tolist()):
        count = (speakers == name).sum()
        assert abs(_agreement(control, labels, speakers == name) - count / 2) <= 0.5
    assert control.sum() == labels.sum()  # the odd extra flip is drawn once for both classes


def test_shuffled_is_seeded_and_rejects_non_binary_labels():
    labels = np.repeat([0, 1], 20)
    assert np.array_equal(controls.shuffled(labels, 3), controls.shuffled(labels, 3))
    assert not np.array_equal(controls.shuffled(labels, 3), controls.shuffled(labels, 4))
    assert controls.shuffled(np.array([], dtype=int), 0).shape == (0,)
    with pytest.raises(ValueError, match="binary"):
        controls.shuffled(np.array([0, 2]), 0)


def test_control_seeds_are_derived_from_the_run_seed():
    assert controls.control_seeds(0) == [0, 1, 2] and controls.control_seeds(1) == [3, 4, 5]


def test_shuffled_control_permutes_dev_labels_too(tmp_path):
    reader = ShardReader(write_store(tmp_path / "s"))
    splits = make_splits(reader.metadata(), reader.ids)
    labels = controls.split_labels(splits, "shuffled", 0)
    assert np.array_equal(labels["test"], splits.test.labels)
    for name in ("train", "dev"):
        true = getattr(splits, name).labels
        assert (labels[name] == true).sum() * 2 == len(true)


@pytest.fixture(scope="module")
def strong(tmp_path_factory):
    return write_store(tmp_path_factory.mktemp("strong") / "store", speakers_per_gender=14, strength=4.0, informative=range(0, 30))


def test_shuffled_control_reads_chance_on_a_strong_signal(strong):
    row = run_probe(ProbeConfig(store=str(strong), site=SITE, probe="mean", control="shuffled")).row
    assert row["control_seeds"] == [0, 1, 2] and len(row["control_f1_per_seed"]) == 3
    assert row["f1_macro"] == pytest.approx(np.mean(row["control_f1_per_seed"]))
    assert 35 < row["f1_macro"] < 65 and row["f1_real"] > 97
    assert row["selectivity"] == pytest.approx(row["f1_real"] - row["f1_macro"])


# ---------------------------------------------------------------- speaker control


def write_voices(folder, *, signature: float, speakers_per_gender=10, utterances_per_speaker=10, dim=32, strength=3.0, seed=0):
    """Each speaker's frames carry a fixed random offset of scale ``signature`` (a voice a probe can
    memorise), and gender ``+-strength`` on dimension 0; splits left to the probe."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    writer = PartWriter(folder / "part-00000.h5", {SITE: dim}, "float32", {"model_id": "synthetic", "config": "{}", "skipped": "[]"})
    for gender, sign in (("female", 1.0), ("male", -1.0)):
        for s in range(speakers_per_gender):
            voice = signature * rng.standard_normal(dim)
            for u in range(utterances_per_speaker):
                length = int(rng.integers(12, 30))
                states = (rng.standard_normal((length, dim)) + voice).astype(np.float32)
                states[:, 0] += sign * strength
                writer.add(
                    f"{gender}-{s}-{u}",
                    {SITE: states},
                    {"gender": gender, "speaker": f"{gender}-{s}", "language": "en", "split": "", "dataset": "synthetic", "duration": length / 50},
                )
    writer.close()
    return folder


def test_speaker_labels_are_balanced_within_each_gender():
    speakers = np.array([f"f{i}" for i in range(7)] + [f"m{i}" for i in range(7)])
    labels = np.array([1] * 7 + [0] * 7)
    for seed in range(5):
        mapping = controls.speaker_labels(speakers, seed, labels)
        female = sum(mapping[f"f{i}"] for i in range(7))
        male = sum(mapping[f"m{i}"] for i in range(7))
        assert {female, male} == {3, 4}  # half of each gender, the odd one rounded opposite ways
    assert sum(controls.speaker_labels(np.array(["a", "b", "c", "d"]), 0).values()) == 2


def test_within_speaker_assignment_divides_every_speaker():
    speakers = np.array(["solo"] + ["pair"] * 2 + ["trio"] * 3 + ["ten"] * 10)
    assignment = controls.within_speaker_assignment(speakers, seed=0)
    by_speaker = {name: sorted(assignment[speakers == name].tolist()) for name in set(speakers.tolist())}
    assert by_speaker["solo"] == ["train"]
    assert by_speaker["pair"] == ["test", "train"]
    assert by_speaker["trio"] == ["dev", "test", "train"]
    assert by_speaker["ten"].count("test") == 2 and by_speaker["ten"].count("dev") == 1
    assert np.array_equal(assignment, controls.within_speaker_assignment(speakers, seed=0))
    assert not np.array_equal(assignment, controls.within_speaker_assignment(speakers, seed=1))


def test_speaker_control_needs_voices_heard_twice(tmp_path):
    reader = ShardReader(write_voices(tmp_path / "once", signature=1.0, utterances_per_speaker=1))
    splits = make_splits(reader.metadata(), reader.ids)
    with pytest.raises(ProbeError, match="within-speaker test split lacks one of the classes male/female: it needs speakers"):
        controls.within_speaker_splits(splits, 0)


@pytest.fixture(scope="module")
def memorisable(tmp_path_factory):
    return write_voices(tmp_path_factory.mktemp("voices") / "store", signature=2.0)


@pytest.fixture(scope="module")
def voiceless(tmp_path_factory):
    return write_voices(tmp_path_factory.mktemp("novoice") / "store", signature=0.0)


def test_speaker_control_reads_memorised_voices(memorisable):
    row = run_probe(ProbeConfig(store=str(memorisable), site=SITE, probe="mean", control="speaker")).row
    assert row["f1_macro"] > 85  # every test voice was heard in training with its random label
    assert row["splits"]["source"] == "within-speaker" and row["control_split"] == {"source": "within-speaker", "seed": 0, "shares": {"test": 0.2, "dev": 0.1}}
    assert row["splits"]["test"]["speakers"] == 20 and row["splits"]["train"]["speakers"] == 20
    assert row["f1_real"] > 97 and row["selectivity"] == pytest.approx(row["f1_real"] - row["f1_macro"])


def test_speaker_control_reads_chance_without_voices(voiceless):
    row = run_probe(ProbeConfig(store=str(voiceless), site=SITE, probe="mean", control="speaker")).row
    assert 30 < row["f1_macro"] < 65 and row["f1_real"] > 97 and row["selectivity"] > 30


# ---------------------------------------------------------------- MDL guard


def test_mixture_bits_by_hand():
    # two candidates with codelengths 10 and 12 bits: -log2((2^-10 + 2^-12) / 2) = 10 + 1 - log2(1.25)
    assert mixture_bits(np.array([[10.0], [12.0]]))[0] == pytest.approx(11 - np.log2(1.25))
    assert mixture_bits(np.array([[7.0, 3.0]])).tolist() == [7.0, 3.0]  # one candidate: its own code
    totals = np.array([[100.0], [40.0], [41.0], [500.0]])
    assert 40.0 < mixture_bits(totals)[0] <= 40.0 + np.log2(4)  # at most log2(grid) bits above the best


def test_the_mixture_code_is_the_per_example_bayesian_code():
    """Coding example after example with posterior-weighted predictions gives the closed form."""
    rng = np.random.default_rng(1)
    speakers = np.repeat([f"s{i}" for i in range(30)], 2)
    labels = np.repeat(rng.integers(0, 2, 30), 2)
    fit, probabilities = _fake_probe(labels)
    grid = (0.0, 0.5, 1.0)
    code = online_code(labels, np.ones((60, 1), bool), speakers, fit, probabilities, grid=grid)
    order = speaker_order(speakers, 0)
    starts = [0, *code.block_ends[:-1]]
    total, log_weights = 0.0, np.zeros(len(grid))
    for number, (start, end) in enumerate(zip(starts, code.block_ends)):
        prefix = order[:start]
        for index in order[start:end]:
            if number == 0 or len(set(labels[prefix].tolist())) < 2:
                total += 1.0
                continue
            p1 = np.array([probabilities(fit(prefix, value), [index])[0] for value in grid])
            p_true = p1 if labels[index] == 1 else 1 - p1
            weights = np.exp2(log_weights - log_weights.max())
            total += -np.log2(np.sum(weights / weights.sum() * p_true))
            log_weights += np.log2(p_true)
    assert code.online_bits[0] == pytest.approx(total)


def test_prequential_choice_never_looks_at_the_block_being_coded():
    # candidate 1 would code block 2 for free, but block 2 is the one being coded: its evidence is blocks 0-1
    bits = np.array([[[5.0], [1.0], [9.0]], [[4.0], [3.0], [0.0]]])
    assert prequential_choice(bits)[:, 0].tolist() == [0, 1, 0]  # block 0: no evidence, most regularised


def _fake_probe(labels):
    """A probe whose confidence is its candidate value, pointing at the majority class of its prefix."""

    def fit(prefix, value):
        return value, labels[prefix].mean()

    def probabilities(model, indices):
        value, share = model
        return np.full(len(indices), 0.5 + value * (share - 0.5) * 0.98)

    return fit, probabilities


def test_the_recorded_c_for_a_block_does_not_depend_on_that_block_or_later():
    rng = np.random.default_rng(0)
    speakers = np.repeat([f"s{i}" for i in range(300)], 2)
    labels = np.repeat(rng.integers(0, 2, 300), 2)
    grid = (0.0, 0.5, 1.0)
    fit, probabilities = _fake_probe(labels)
    seen = []
    code = online_code(labels, np.ones((600, 1), bool), speakers, lambda p, v: seen.append(p) or fit(p, v), probabilities, grid=grid)
    order = speaker_order(speakers, 0)
    ends = code.block_ends
    assert all(set(p.tolist()) == set(order[: len(p)].tolist()) for p in seen)  # every probe trains on a prefix
    coded = [n for n in range(1, len(ends)) if n not in code.uniform_blocks]
    assert len(coded) >= 4 and len(set(code.chosen[coded, 0].tolist())) > 1
    for number in coded:
        changed = labels.copy()
        later = order[ends[number - 1] :]
        changed[later] = rng.integers(0, 2, len(later))
        fit2, probabilities2 = _fake_probe(changed)
        again = online_code(changed, np.ones((600, 1), bool), speakers, fit2, probabilities2, grid=grid)
        np.testing.assert_array_equal(again.chosen[: number + 1], code.chosen[: number + 1])


def test_the_guard_needs_a_sorted_grid_and_no_fixed_c():
    labels, speakers = np.repeat([0, 1], 10), np.repeat(["a", "b", "c", "d"], 5)
    with pytest.raises(ValueError, match="sorted"):
        online_code(labels, np.ones((20, 1), bool), speakers, lambda p, v: None, lambda m, i: np.full(len(i), 0.5), grid=(1.0, 0.1))
    with pytest.raises(ValueError, match="either a fixed c"):
        online_code_logistic(np.zeros((20, 1, 2), np.float32), labels, np.ones((20, 1), bool), speakers, c=1.0)


def voices_features(*, speakers_per_gender=30, utterances=8, dim=512, gender=2.0, seed=0, shuffle=False):
    """Mean-pooled voices: a per-speaker offset (unit scale per dimension), gender +-``gender`` along
    one random direction, unit noise: a real signal in 512 dimensions, noisy for few voices."""
    rng = np.random.default_rng(seed)
    direction = rng.standard_normal(dim)
    direction /= np.linalg.norm(direction)
    x, y, speakers = [], [], []
    for label in (0, 1):
        for s in range(speakers_per_gender):
            voice = rng.standard_normal(dim)
            for _ in range(utterances):
                x.append(voice + (2 * label - 1) * gender * direction + rng.standard_normal(dim))
                y.append(label)
                speakers.append(f"{label}-{s}")
    x, y = np.array(x, dtype=np.float32)[:, None, :], np.array(y)
    valid = np.ones((len(y), 1), bool)
    return features.Standardizer.fit(x, valid)(x), (y[rng.permutation(len(y))] if shuffle else y), valid, np.array(speakers)


@pytest.fixture(scope="module")
def noisy_voices():
    return voices_features()


def test_fixed_c_1_is_overconfident_and_the_guard_compresses(noisy_voices):
    x, y, valid, speakers = noisy_voices
    fixed = online_code_logistic(x, y, valid, speakers, c_grid=None, c=1.0)
    guarded = online_code_logistic(x, y, valid, speakers)
    assert fixed.compression[0] < 1 < guarded.compression[0]  # the cause: C = 1 codes worse than uniform
    assert guarded.grid == (1e-4, 1e-3, 1e-2, 1e-1, 1.0) and np.isnan(guarded.chosen[0, 0])
    assert set(guarded.chosen[~np.isnan(guarded.chosen)].tolist()) <= set(guarded.grid)


def test_the_guard_codes_shuffled_labels_near_uniform():
    x, y, valid, speakers = voices_features(speakers_per_gender=12, shuffle=True)
    code = online_code_logistic(x, y, valid, speakers)
    assert 0.9 < code.compression[0] < 1.1


def _noise_in_the_demo_design(seed=2):
    """Features that carry no gender, in the demo's MDL design: 8 training speakers of 15 utterances
    (blocks of 1, 1, 2 and 4 speakers), D = 512, 3 positions (science audit D3)."""
    rng = np.random.default_rng(seed)
    count, utterances, width = 8, 15, 512
    speakers = np.repeat([f"s{i:02d}" for i in range(count)], utterances)
    labels = np.repeat([0] * 4 + [1] * 4, utterances)
    x = (np.repeat(rng.normal(size=(count, 3, width)), utterances, axis=0) + rng.normal(size=(count * utterances, 3, width))).astype(np.float32)
    return (x - x.mean(0)) / x.std(0), labels, np.ones((count * utterances, 3), bool), speakers


def test_the_guard_does_not_bound_the_code_by_the_uniform_one():
    """The intercept is unpenalised: the most regularised C predicts the last block (45 male, 15
    female) with its prefix's share (15 male, 45 female) and pays 1.6 bits an utterance; on pure noise
    the guarded compression is 0.75, and 3 of the 4 blocks are coded uniformly (the first, always; the
    second and third because the speakers before them were of one gender)."""
    x, labels, valid, speakers = _noise_in_the_demo_design()
    strongest = online_code_logistic(x, labels, valid, speakers, seed=2, c_grid=None, c=1e-4)
    assert strongest.online_bits / strongest.uniform_bits == pytest.approx([1.306, 1.305, 1.304], abs=2e-3)
    guarded = online_code_logistic(x, labels, valid, speakers, seed=2)
    assert guarded.compression == pytest.approx([0.755, 0.755, 0.755], abs=3e-3)
    assert guarded.block_ends == [15, 30, 60, 120] and guarded.uniform_blocks == [1, 2]
    assert guarded.uniform_block_count == 3 == uniform_block_count(guarded.uniform_blocks)


def test_mdl_rows_count_the_blocks_coded_uniformly(strong):
    row = run_probe(ProbeConfig(store=str(strong), site=SITE, probe="mean", mdl=True)).row
    assert row["mdl_uniform_block_count"] == 1 + len(row["mdl_uniform_blocks"])


def test_mdl_rows_record_the_guard(strong):
    row = run_probe(ProbeConfig(store=str(strong), site=SITE, probe="mean", mdl=True)).row
    assert row["mdl_guard"] == "Bayesian mixture over the C grid" and row["mdl_c_grid"] == [1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    assert len(row["mdl_c_per_block"]) == row["mdl_blocks"] and row["mdl_c_per_block"][0] is None
    assert row["compression"] > 3


def test_importing_and_training_probes_changes_no_process_wide_logging_or_warnings():
    import logging
    import warnings

    import numpy as np

    from probing.train import LIGHTNING_LOGGERS, fit_logistic

    before = [logging.getLogger(name).level for name in LIGHTNING_LOGGERS], list(warnings.filters)
    x = np.random.default_rng(0).standard_normal((20, 1, 3)).astype(np.float32)
    fit_logistic(x, (x[:, 0, 0] > 0).astype(int), np.ones((20, 1), bool), max_iter=20)
    assert ([logging.getLogger(name).level for name in LIGHTNING_LOGGERS], list(warnings.filters)) == before
