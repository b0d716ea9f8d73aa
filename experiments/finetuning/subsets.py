"""Training subsets at a chosen female share with a fixed total (GRAFN's Table I: 1500/500, 1000/1000,
500/1500 sentences; Boito et al. 2022's balance experiments), speaker-disjoint from the validation set."""

from __future__ import annotations

import numpy as np

from experiments.scoring.asr_metrics import normalize
from extract.errors import UserError
from extract.manifest import Utterance

GROUPS = ("female", "male")


class SubsetError(UserError, ValueError):
    """A subset that cannot be drawn as asked (the message says what is short)."""


def female_count(total: int, female_share: float) -> int:
    """The exact number of female utterances; a share that does not give a whole number is refused."""
    if total < 1:
        raise SubsetError(f"--total must be at least 1, got {total}")
    if not 0.0 <= female_share <= 1.0:
        raise SubsetError(f"--female-share must be between 0 and 1, got {female_share}")
    count = total * female_share
    if abs(count - round(count)) > 1e-9:
        raise SubsetError(f"a female share of {female_share} of {total} utterances is {count:g}, not a whole number; choose a total it divides")
    return int(round(count))


def text_key(utterance: Utterance) -> str:
    """What counts as the same sentence: the transcript under the default scoring normaliser."""
    return normalize(utterance.text, utterance.language)


def draw_subset(
    pool: list[Utterance], female_share: float, total: int, seed: int, validation: list[Utterance], exclude_validation_texts: bool = True
) -> list[Utterance]:
    """``total`` utterances of ``pool``, exactly ``total * female_share`` of them female and the rest
    male, drawn without replacement with a seeded generator (in a seeded order).

    Speaker-disjoint: a pool speaker who also speaks in ``validation`` is an error. With
    ``exclude_validation_texts``, pool utterances whose sentence occurs in ``validation`` are left out
    first, so that the validation WER does not reward memorised sentences. Utterances without a
    binary gender label are never drawn."""
    females = female_count(total, female_share)
    wanted = {"female": females, "male": total - females}
    shared = sorted({u.speaker for u in pool} & {u.speaker for u in validation})
    if shared:
        raise SubsetError(
            f"{len(shared)} speaker(s) are in both the training pool and the validation set (e.g. {shared[:3]}); the split must be speaker-disjoint"
        )
    texts = {text_key(u) for u in validation} if exclude_validation_texts else set()
    rng = np.random.default_rng(seed)
    chosen = []
    for group in GROUPS:
        candidates = sorted((u for u in pool if u.gender == group and text_key(u) not in texts), key=lambda u: u.id)
        if len(candidates) < wanted[group]:
            excluded = sum(u.gender == group and text_key(u) in texts for u in pool)
            raise SubsetError(
                f"{wanted[group]} {group} utterances wanted, the pool has {len(candidates)}"
                + (f" ({excluded} more left out for sharing a sentence with the validation set)" if excluded else "")
                + "; lower --total"
            )
        picks = rng.choice(len(candidates), size=wanted[group], replace=False)
        chosen.extend(candidates[i] for i in sorted(picks))
    return [chosen[i] for i in rng.permutation(len(chosen))]
