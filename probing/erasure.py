"""Erasing or steering gender at one site, fitted on the speech frames of a store's training split.

- **LEACE** (Belrose et al. 2023, the ``concept-erasure`` package): the least-squares affine edit
  after which no linear classifier reads the concept from the frames better than a constant. The
  concept is the utterance's gender (female 1, male 0), repeated on every speech frame; the package's
  defaults are kept (affine, covariance shrinkage, the trace constraint it recommends when the edited
  states go back into a model). A binary concept gives a rank-1 edit; when the trace constraint
  mixes in the orthogonal projection it can be rank 2; the rank is recorded.
- **Random concept** (the control): the same fit with a random speaker partition balanced within
  each gender (``probing.controls.speaker_labels``) as the concept: an edit of the same kind and
  rank, about speakers, carrying no gender. "WER changed by x after erasure" means something only
  next to "WER changed by y after erasing a random concept".
- **Mean difference** (steering): ``d = mean(target frames) - mean(other frames)``, so that
  ``h + alpha * d`` with alpha = 1 moves the other gender's mean onto the target's. LEACE's own
  direction adds nothing for a binary concept: its edit of the class-mean difference is that
  difference itself (it makes the class means equal; ``gender_mean_gap_kept`` in the fit record is
  the share it keeps, 0 up to rounding), so steering along it is mean-difference steering.

Only training-split utterances are read (the split :func:`probing.data.make_splits` gives for the
seed), so that a probe trained and tested on a store extracted with the eraser is tested on
utterances the eraser never saw. Frames are speech frames (``ShardReader.speech_lengths``), never
stored padding.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from extract.interventions import METHODS  # method -> intervention kind
from probing.controls import speaker_labels
from probing.data import TASKS, ProbeError, make_splits

LEACE_OPTIONS = {"affine": True, "constrain_cov_trace": True, "shrinkage": True}
RANK_TOLERANCE = 1e-6  # singular values of the edit below this share of the largest are numerical zeros
EQUAL_MEANS_TOLERANCE = 1e-9  # gender means closer than this share of their largest entry are equal (float64 sums round at ~1e-16 per frame)
CHUNK_UTTERANCES = 64


class ErasureError(ProbeError):
    """A store or site from which no eraser or direction can be fitted."""


@dataclass
class FrameStatistics:
    """What one pass over the training frames gives: the LEACE statistics of the concept, the
    frame means per gender and the unshrunk frame covariance."""

    fitter: object  # concept_erasure.LeaceFitter
    gender_sums: np.ndarray  # [2, D], class 0 male, 1 female
    gender_frames: np.ndarray  # [2]

    @property
    def gender_means(self) -> np.ndarray:
        return self.gender_sums / self.gender_frames[:, None]

    @property
    def covariance(self) -> np.ndarray:
        fitter = self.fitter
        sigma = fitter.sigma_xx_.double()
        return ((sigma + sigma.T) / 2 / (fitter.n - 1)).numpy()


def frame_statistics(reader, site: str, ids: list[str], genders: np.ndarray, concept: np.ndarray) -> FrameStatistics:
    """One pass over the speech frames of ``ids`` at ``site``: LEACE statistics of ``concept`` (one
    label per utterance, on each of its frames) and the frame sums per gender (float64)."""
    from concept_erasure import LeaceFitter

    dim = reader.dim(site)
    fitter = LeaceFitter(dim, 1, dtype=torch.float64, **LEACE_OPTIONS)
    sums, frames = np.zeros((2, dim)), np.zeros(2)
    lengths = reader.speech_lengths(site, ids)
    for start in range(0, len(ids), CHUNK_UTTERANCES):
        chunk = range(start, min(start + CHUNK_UTTERANCES, len(ids)))
        states = [reader.get(site, ids[i])[: lengths[i]].astype(np.float64) for i in chunk]
        x = np.concatenate(states)
        z = np.concatenate([np.full(len(s), concept[i], dtype=np.float64) for i, s in zip(chunk, states)])
        fitter.update(torch.from_numpy(x), torch.from_numpy(z[:, None]))
        for i, s in zip(chunk, states):
            sums[genders[i]] += s.sum(axis=0)
            frames[genders[i]] += len(s)
    if fitter.n < 2 or (frames == 0).any():
        raise ErasureError(f"site {site}: the training split holds too few speech frames of each gender to fit on")
    return FrameStatistics(fitter, sums, frames)


def low_rank(edit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``edit`` [D, D] as ``left @ right`` with ``left`` [D, r], ``right`` [r, D], r its numerical rank."""
    u, s, vh = np.linalg.svd(edit)
    keep = s > RANK_TOLERANCE * max(float(s[0]), np.finfo(float).tiny)
    return u[:, keep] * s[keep], vh[keep]


def variance_removed(edit: np.ndarray, covariance: np.ndarray) -> float:
    """1 - tr(P S P^T) / tr(S) for P = I - edit and S the frames' covariance: the fraction of the total
    variance of the frames the eraser removes."""
    total = float(np.trace(covariance))
    after = total - 2 * float(np.trace(edit @ covariance)) + float(np.trace(edit @ covariance @ edit.T))
    return 1.0 - after / total


def steering_direction(site: str, means: np.ndarray, covariance: np.ndarray, target_class: int) -> np.ndarray:
    """``means[target_class] - means[other]``; refused when the two means are equal up to rounding
    (constant frames included, whose total variance is 0): there is nothing to steer along, as
    LEACE finds no linear trace to erase."""
    direction = means[target_class] - means[1 - target_class]
    scale = max(float(np.abs(means).max()), np.finfo(float).tiny)
    if float(np.abs(direction).max()) <= EQUAL_MEANS_TOLERANCE * scale:
        raise ErasureError(
            f"site {site}: the female and male training frames have the same mean "
            f"(direction norm 0, total variance {max(float(np.trace(covariance)), 0.0):.3g}); there is no direction to steer along"
        )
    return direction


def _split_record(splits, seed: int, frames: np.ndarray) -> dict:
    train = splits.train
    return {
        "split": "train",
        "split_source": splits.source,
        "seed": seed,
        "utterances": len(train),
        "speakers": int(len(set(train.speakers.tolist()))),
        "frames": {name: int(count) for name, count in zip(TASKS["female-male"], frames)},
    }


def fit(
    store: str | Path,
    site: str,
    method: str = "leace",
    seed: int = 0,
    alpha: float = 1.0,
    target: str | None = None,
    reader=None,
    allow_partial: bool = False,
):
    """An :class:`extract.interventions.Intervention` fitted on the training frames of ``store`` at
    ``site`` (``reader``: the store already open). ``alpha`` and ``target`` are for ``mean-diff``.
    An incomplete store is refused unless ``allow_partial``; the fit record then says ``partial``."""
    from extract.interventions import Intervention, store_content_hash, store_model_identity
    from extract.store import ShardReader

    reader = reader or ShardReader(store, allow_partial=allow_partial)

    if method not in METHODS:
        raise ErasureError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    if site not in reader.sites:
        raise ErasureError(f"the store has no site {site!r}; it has {', '.join(reader.sites)}")
    if method == "mean-diff" and target not in TASKS["female-male"]:
        raise ErasureError(f"steering needs a target gender (female or male), got {target!r}")
    splits = make_splits(reader.metadata(), reader.ids, "female-male", seed)
    train = splits.train
    genders = train.labels.astype(int)
    concept, fit_record = genders, {"method": method, "concept": "gender (female 1, male 0)"}
    if method == "random":
        mapping = speaker_labels(train.speakers, seed, genders)
        concept = np.array([mapping[s] for s in train.speakers], dtype=int)
        fit_record = {
            "method": method,
            "concept": f"random speaker partition balanced within each gender (probing.controls.speaker_labels, seed {seed})",
            "agreement_with_gender": float((concept == genders).mean()),
        }
    statistics = frame_statistics(reader, site, train.ids, genders, concept)
    fit_record |= _split_record(splits, seed, statistics.gender_frames)
    if reader.partial is not None:
        fit_record["partial"] = reader.partial.record()
    covariance = statistics.covariance
    means = statistics.gender_means
    store_record = {"path": str(store), "content_sha256": store_content_hash(store)}
    identity = store_model_identity(reader, site)
    if method == "mean-diff":
        target_class = TASKS["female-male"].index(target)
        direction = steering_direction(site, means, covariance, target_class)
        norm = float(np.linalg.norm(direction))
        fit_record |= {"direction_norm": norm, "direction_norm_over_spread": norm / float(np.sqrt(np.trace(covariance)))}
        return Intervention("steer", site, identity, store_record, {"direction": direction}, alpha=float(alpha), target=target, fit=fit_record)
    eraser = statistics.fitter.eraser
    edit = (eraser.proj_left @ eraser.proj_right).numpy()
    left, right = low_rank(edit)
    if left.shape[1] == 0:
        raise ErasureError(f"site {site}: the concept has no linear trace in the training frames (zero cross-covariance); nothing to erase")
    edit = left @ right
    gap = means[1] - means[0]
    fit_record |= {
        "leace_options": dict(LEACE_OPTIONS),
        "rank": int(left.shape[1]),
        "variance_removed": variance_removed(edit, covariance),
        "gender_mean_gap_kept": float(np.linalg.norm(gap - edit @ gap) / np.linalg.norm(gap)),
    }
    bias = eraser.bias.numpy() if eraser.bias is not None else np.zeros(edit.shape[0])
    return Intervention(METHODS[method], site, identity, store_record, {"proj_left": left, "proj_right": right, "bias": bias}, fit=fit_record)
