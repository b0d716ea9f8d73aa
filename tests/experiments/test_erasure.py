"""Erasers and steering vectors fitted on stores (probing.erasure) and the ``experiments.erase`` CLI.

A synthetic store carries a planted linear gender signal on every frame (dimension 0: +3 female,
-3 male, under unit noise). A linear probe trained and tested on speaker-disjoint frames reads it
before erasure and chance after (within three binomial standard deviations of the test size), while
the random-concept eraser of equal rank leaves it readable."""

import json

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from experiments import erase as cli
from extract.interventions import load_intervention
from extract.store import ShardReader
from probing.data import make_splits
from probing.erasure import ErasureError, fit, low_rank, variance_removed
from tests.synthetic_store import write_store

SITE = "encoder.layer.0"
EVERY_FRAME = tuple(range(40))  # the planted signal is on every frame (utterances are 12-29 frames long)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return write_store(tmp_path_factory.mktemp("erasure") / "store", dim=8, informative=EVERY_FRAME, strength=1.0)


def _frames(reader, split, edit=None):
    x, y = [], []
    for utterance_id, label in zip(split.ids, split.labels):
        states = reader.get(SITE, utterance_id)[: reader.speech_lengths(SITE, [utterance_id])[0]]
        x.append(states if edit is None else edit.apply(states))
        y.append(np.full(len(states), label))
    return np.concatenate(x).astype(np.float64), np.concatenate(y)


def _probe_accuracy(store, edit=None):
    """Accuracy of a logistic probe trained on the train split's frames and tested on the test split's
    (speaker-disjoint), both edited by ``edit``; and the test frame count."""
    reader = ShardReader(store)
    splits = make_splits(reader.metadata(), reader.ids, "female-male", 0)
    train_x, train_y = _frames(reader, splits.train, edit)
    test_x, test_y = _frames(reader, splits.test, edit)
    probe = LogisticRegression(max_iter=1000).fit(train_x, train_y)
    return float((probe.predict(test_x) == test_y).mean()), len(test_y)


def test_a_linear_probe_reads_gender_before_leace_and_chance_after(store):
    before, n = _probe_accuracy(store)
    assert before > 0.8
    after, _ = _probe_accuracy(store, fit(store, SITE, "leace"))
    assert abs(after - 0.5) < 3 * np.sqrt(0.25 / n), (after, n)  # chance within the noise of n test frames


def test_the_random_concept_eraser_of_equal_rank_leaves_gender_readable(store):
    eraser, control = fit(store, SITE, "leace"), fit(store, SITE, "random")
    assert control.kind == "random-erase" and control.rank == eraser.rank == 1
    assert control.fit["agreement_with_gender"] == 0.5  # the random concept carries no gender
    after, _ = _probe_accuracy(store, control)
    assert after > 0.8
    assert control.fit["gender_mean_gap_kept"] > 0.9 and eraser.fit["gender_mean_gap_kept"] < 1e-6
    assert 0 < control.fit["variance_removed"] < eraser.fit["variance_removed"]


def test_the_eraser_is_fitted_on_training_speakers_and_speech_frames_only(tmp_path, store):
    reader = ShardReader(store)
    eraser = fit(store, SITE, "leace")
    splits = make_splits(reader.metadata(), reader.ids, "female-male", 0)
    assert eraser.fit["utterances"] == len(splits.train) and eraser.fit["speakers"] == 12
    frames = reader.speech_lengths(SITE, splits.train.ids)
    assert sum(eraser.fit["frames"].values()) == int(frames.sum())
    padded = write_store(tmp_path / "padded", dim=8, informative=EVERY_FRAME, strength=1.0, pad_to=40)
    same = fit(padded, SITE, "leace")  # the same speech frames plus stored padding: the same eraser
    for name, value in eraser.tensors.items():
        np.testing.assert_allclose(same.tensors[name], value, atol=1e-9)


def test_mean_difference_steering_moves_one_mean_onto_the_other(store):
    reader = ShardReader(store)
    splits = make_splits(reader.metadata(), reader.ids, "female-male", 0)
    x, y = _frames(reader, splits.train)
    steer = fit(store, SITE, "mean-diff", target="female", alpha=1.0)
    np.testing.assert_allclose(steer.tensors["direction"], x[y == 1].mean(0) - x[y == 0].mean(0), atol=1e-9)
    np.testing.assert_allclose(steer.apply(x[y == 0]).mean(0), x[y == 1].mean(0), atol=1e-9)
    toward_male = fit(store, SITE, "mean-diff", target="male", alpha=0.5)
    np.testing.assert_allclose(toward_male.tensors["direction"], -steer.tensors["direction"], atol=1e-9)
    assert toward_male.alpha == 0.5 and toward_male.target == "male"


def test_variance_removed_and_rank_by_hand():
    covariance = np.diag([4.0, 1.0])
    along_first = np.array([[1.0, 0.0], [0.0, 0.0]])
    assert variance_removed(along_first, covariance) == pytest.approx(0.8)  # the projection drops the variance 4 of 5
    assert variance_removed(np.zeros((2, 2)), covariance) == 0.0
    left, right = low_rank(np.outer([1.0, 2.0, 0.0], [0.0, 1.0, 1.0]))
    assert left.shape == (3, 1) and right.shape == (1, 3)
    np.testing.assert_allclose(left @ right, np.outer([1.0, 2.0, 0.0], [0.0, 1.0, 1.0]), atol=1e-12)


def test_fit_refuses_unknown_methods_sites_and_a_steering_target(store):
    with pytest.raises(ErasureError, match="unknown method"):
        fit(store, SITE, "pca")
    with pytest.raises(ErasureError, match="no site 'encoder.layer.9'"):
        fit(store, "encoder.layer.9")
    with pytest.raises(ErasureError, match="target gender"):
        fit(store, SITE, "mean-diff")


def test_cli_fit_prints_the_variance_removed_and_writes_a_loadable_file(tmp_path, store, capsys):
    out = tmp_path / "eraser.safetensors"
    assert cli.main(["fit", "--store", str(store), "--site", SITE, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    eraser = load_intervention(out)
    assert f"removes {100 * eraser.fit['variance_removed']:.2f} % of the frames' variance" in printed
    assert eraser.kind == "erase" and eraser.site == SITE and eraser.store["path"] == str(store)
    assert cli.main(["show", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "erase"


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--site", "encoder.layer.7"], "no site 'encoder.layer.7'"),
        (["--site", SITE, "--method", "mean-diff"], "--method mean-diff needs --target female|male"),
        (["--site", SITE, "--target", "female"], "--target and --alpha are for --method mean-diff, not leace"),
    ],
)
def test_cli_fit_errors_are_one_line(tmp_path, store, capsys, argv, expected):
    assert cli.main(["fit", "--store", str(store), "--out", str(tmp_path / "x.safetensors"), *argv]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and expected in error, error


def test_cli_errors_on_a_missing_store_and_a_file_that_is_not_an_intervention(tmp_path, capsys):
    assert cli.main(["fit", "--store", str(tmp_path / "none"), "--site", SITE, "--out", str(tmp_path / "x.safetensors")]) == 2
    assert "no complete shard files" in capsys.readouterr().err
    other = tmp_path / "other.safetensors"
    other.write_bytes(b"not safetensors at all")
    assert cli.main(["show", str(other)]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "not an intervention file" in error


def _mirrored_store(folder, states):
    """Five speakers per gender, four utterances each, split 3:1:1; ``states(speaker, utterance)`` gives
    the frames of both genders' utterance alike, so the two genders' frame means are equal."""
    from extract.store import PartWriter

    folder.mkdir()
    writer = PartWriter(folder / "part-00000.h5", {SITE: 8}, "float32", {"model_id": "synthetic", "config": "{}", "skipped": "[]"})
    for gender in ("female", "male"):
        for s in range(5):
            for u in range(4):
                frames = states(s, u)
                split = "train" if s < 3 else "dev" if s == 3 else "test"
                metadata = {"gender": gender, "speaker": f"{gender}{s}", "language": "en", "split": split, "dataset": "s", "duration": len(frames) / 50}
                writer.add(f"{gender}{s}-{u}", {SITE: frames}, metadata, speech_frames={SITE: len(frames)})
    writer.close()
    return folder


def test_steering_refuses_constant_states_in_one_line(tmp_path, capsys):
    """Every frame the same (#95): no spread, no direction; a ZeroDivisionError traceback before."""
    store = _mirrored_store(tmp_path / "const", lambda s, u: np.full((20, 8), 0.1, np.float32))
    argv = ["fit", "--store", str(store), "--site", SITE, "--method", "mean-diff", "--target", "female", "--out", str(tmp_path / "c.safetensors")]
    assert cli.main(argv) == 2
    error = capsys.readouterr().err
    assert error == (
        f"error: site {SITE}: the female and male training frames have the same mean (direction norm 0, total variance 0); "
        "there is no direction to steer along\n"
    )
    assert not (tmp_path / "c.safetensors").exists()


def test_steering_refuses_equal_gender_means(tmp_path):
    rng = np.random.default_rng(0)
    frames = {(s, u): rng.standard_normal((12, 8)).astype(np.float32) for s in range(5) for u in range(4)}
    store = _mirrored_store(tmp_path / "mirrored", lambda s, u: frames[s, u])
    with pytest.raises(ErasureError, match=r"the female and male training frames have the same mean \(direction norm 0, total variance [1-9]"):
        fit(store, SITE, "mean-diff", target="male")


def test_cli_fit_into_a_folder_is_one_line(tmp_path, store, capsys):
    """#71: ``--out`` an existing folder, refused before fitting (was a SafetensorError traceback)."""
    assert cli.main(["fit", "--store", str(store), "--site", SITE, "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    assert error == f"error: --out {tmp_path} is a folder; give the path of the intervention file to write (.safetensors)"
