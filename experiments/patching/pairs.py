"""Pairs for activation patching: a target utterance and the source whose states go into it.

``cross`` pairs a target with a source of the other gender (the effect sought); ``within`` with a
source of the same gender and another speaker (the control: what any other speaker's states do).
Both are formed per language (the pair runs as one generation in the target's language), from the
utterances labelled female or male; a source is never the target's own speaker.

Matching, greedy over the targets in a seeded order, without replacement (a source serves one
target per pairing): among the sources left, those sharing the target's reference text (compared
case-folded, spaces collapsed) come first, where there are any; among those, the nearest in
duration (ties broken by the same seeded order). A target left without a source is listed as
unpaired, with the reason. The pairs and the unpaired are written beside a run's rows
(``OUT.pairs.jsonl``) so that a run can be audited and rerun with the same pairs (``--pairs-file``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from extract.diskfull import write_text_whole
from extract.errors import UserError
from extract.manifest import Utterance, iter_json_objects

PAIRINGS = ("cross", "within")
GENDERS = ("female", "male")
PAIR_KIND, PAIR_SCHEMA = "patch_pair", 1
MATCHES = ("text", "duration")
SECONDS = ("target_seconds", "source_seconds")  # the numbers of a pair; its other fields are text


class PairsError(UserError, ValueError):
    """A pairs file or a manifest that pairs cannot be formed from or checked against (one line, naming the file and line)."""


@dataclass(frozen=True)
class Pair:
    """One ordered pair: ``target`` runs with its states at a site replaced by ``source``'s."""

    pairing: str
    target: str
    source: str
    language: str
    target_gender: str
    source_gender: str
    target_speaker: str
    source_speaker: str
    target_seconds: float
    source_seconds: float
    match: str  # "text": the two share their reference text; "duration": matched by duration only

    @property
    def id(self) -> str:
        return f"{self.pairing}:{self.target}<{self.source}"

    def to_dict(self) -> dict:
        return {"kind": PAIR_KIND, "schema": PAIR_SCHEMA, "pair": self.id, **asdict(self)}

    @classmethod
    def from_dict(cls, record: dict, where: str) -> Pair:
        if record.get("kind") != PAIR_KIND:
            raise PairsError(f"{where}: not a patch pair (kind {record.get('kind')!r}); give a pairs file a patch run wrote (OUT.pairs.jsonl)")
        fix = "give a pairs file a patch run wrote (OUT.pairs.jsonl)"
        schema = record.get("schema", 1)
        if not isinstance(schema, int) or isinstance(schema, bool):
            raise PairsError(f"{where}: schema {schema!r} is not a whole number; {fix}")
        if schema > PAIR_SCHEMA:
            raise PairsError(f"{where}: a patch pair of schema {record['schema']}, newer than this code reads ({PAIR_SCHEMA}); update the package")
        try:
            values = {key: record[key] for key in cls.__dataclass_fields__}
        except KeyError as missing:
            raise PairsError(f"{where}: a patch pair without {missing}") from None
        for key, value in values.items():
            number = key in SECONDS
            fits = isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value) and value >= 0 if number else isinstance(value, str)
            if not fits:
                raise PairsError(f"{where}: {key} is {value!r} ({type(value).__name__}), not {'a number of seconds' if number else 'text'}; {fix}")
        pair = cls(**values)
        if pair.pairing not in PAIRINGS:
            raise PairsError(f"{where}: pairing {pair.pairing!r} is not one of {', '.join(PAIRINGS)}")
        if pair.match not in MATCHES:
            raise PairsError(f"{where}: match {pair.match!r} is not one of {', '.join(MATCHES)}; {fix}")
        return pair


def utterance_seconds(utterance: Utterance) -> float:
    """The manifest's duration, or the audio file's length from its header (less the offset); an
    unreadable header is a :class:`PairsError` naming the file."""
    if utterance.duration is not None:
        return float(utterance.duration)
    import soundfile

    try:
        info = soundfile.info(utterance.audio)
    except (OSError, RuntimeError) as error:  # libsndfile's errors are RuntimeErrors
        raise PairsError(f"cannot read the length of {utterance.audio} ({error})") from None
    return max(0.0, info.frames / info.samplerate - (utterance.offset or 0.0))


def _text_key(text: str) -> str:
    return " ".join(text.casefold().split())


def form_pairs(utterances: Sequence[Utterance], pairings: Iterable[str] = PAIRINGS, seed: int = 0) -> tuple[list[Pair], list[dict]]:
    """The pairs of ``pairings`` among ``utterances`` (see the module docstring), and the unpaired
    targets ``{"target", "pairing", "reason"}``. Utterances of another gender label than female or
    male, and those whose length cannot be read (no duration in the manifest, an unreadable audio
    header), take no part (listed as unpaired with the reason)."""
    pairings = list(dict.fromkeys(pairings))
    unknown = [name for name in pairings if name not in PAIRINGS]
    if unknown:
        raise ValueError(f"unknown pairing(s) {', '.join(unknown)}; choose from {', '.join(PAIRINGS)}")
    excluded, seconds = {}, {}
    for utterance in utterances:
        if utterance.gender not in GENDERS:
            excluded[utterance.id] = f"gender {utterance.gender!r} is neither female nor male"
            continue
        try:
            seconds[utterance.id] = utterance_seconds(utterance)
        except PairsError as error:
            excluded[utterance.id] = str(error)
    unpaired = [{"target": identifier, "pairing": pairing, "reason": reason} for identifier, reason in excluded.items() for pairing in pairings]
    by_language: dict[str, list[Utterance]] = defaultdict(list)
    for utterance in utterances:
        if utterance.id in seconds:
            by_language[utterance.language].append(utterance)
    pairs = []
    for language, group in sorted(by_language.items()):
        for pairing in pairings:
            formed, left = _pair_language(group, pairing, seconds, np.random.default_rng([seed, PAIRINGS.index(pairing)]), language)
            pairs += formed
            unpaired += left
    return pairs, unpaired


def _pair_language(group: list[Utterance], pairing: str, seconds: dict[str, float], rng: np.random.Generator, language: str) -> tuple[list[Pair], list[dict]]:
    rank = {u.id: int(r) for u, r in zip(group, rng.permutation(len(group)))}
    targets = sorted(group, key=lambda u: rank[u.id])
    available = dict.fromkeys(u.id for u in targets)  # the seeded order, so that ties go the same way on every run
    by_id = {u.id: u for u in group}
    pairs, unpaired = [], []
    for target in targets:
        eligible = [by_id[i] for i in available if by_id[i].speaker != target.speaker and (by_id[i].gender != target.gender) == (pairing == "cross")]
        if not eligible:
            reason = "no source of the other gender left" if pairing == "cross" else "no source of the same gender and another speaker left"
            unpaired.append({"target": target.id, "pairing": pairing, "reason": f"{reason} in {language}"})
            continue
        same_text = [u for u in eligible if _text_key(u.text) and _text_key(u.text) == _text_key(target.text)]
        pool = same_text or eligible
        source = min(pool, key=lambda u: (abs(seconds[u.id] - seconds[target.id]), rank[u.id]))
        del available[source.id]
        pairs.append(
            Pair(
                pairing,
                target.id,
                source.id,
                language,
                target.gender,
                source.gender,
                target.speaker,
                source.speaker,
                round(seconds[target.id], 3),
                round(seconds[source.id], 3),
                "text" if same_text else "duration",
            )
        )
    return pairs, unpaired


def write_pairs(path: Path, pairs: Sequence[Pair], unpaired: Sequence[dict]) -> Path:
    """The pairs, one JSON line each, then one line per unpaired target (``kind`` ``patch_unpaired``)."""
    lines = [json.dumps(pair.to_dict(), ensure_ascii=False) for pair in pairs]
    lines += [json.dumps({"kind": "patch_unpaired", "schema": PAIR_SCHEMA, **entry}, ensure_ascii=False) for entry in unpaired]
    return write_text_whole(path, "".join(line + "\n" for line in lines))


def check_pairing(pair: Pair, where: str) -> None:
    """The pairing rules (the module docstring) for a pair as the manifest labels it: both female or
    male; ``cross`` of different genders, ``within`` of the same gender; never the target's own speaker."""
    for role in ("target", "source"):
        gender = getattr(pair, f"{role}_gender")
        if gender not in GENDERS:
            raise PairsError(f"{where}: {role} {getattr(pair, role)} has gender {gender!r}; pairs are formed among female and male utterances")
    if pair.target_speaker == pair.source_speaker:
        raise PairsError(f"{where}: {pair.id} takes its source from the target's own speaker {pair.target_speaker!r}; a source is always another speaker")
    cross = pair.target_gender != pair.source_gender
    if cross != (pair.pairing == "cross"):
        rule = "of the other gender" if pair.pairing == "cross" else "of the same gender"
        raise PairsError(f"{where}: {pair.id} pairs a {pair.target_gender} target with a {pair.source_gender} source; a {pair.pairing} source is {rule}")


def read_pairs(path: Path, utterances: Sequence[Utterance], limit: int | None = None) -> list[Pair]:
    """The pairs of a pairs file (its unpaired lines are skipped), each checked against the manifest:
    both ids in it, in the pair's language, with the genders and speakers it records, and the pairing
    rules (:func:`check_pairing`). ``limit``: ``utterances`` are the manifest's first ``limit`` (``--limit``),
    which an id missing from them is said to be outside."""
    by_id = {u.id: u for u in utterances}
    pairs = []
    for line, record in iter_json_objects(path):
        if record.get("kind") == "patch_unpaired":
            continue
        where = f"{path}:{line}"
        pair = Pair.from_dict(record, where)
        for role in ("target", "source"):
            utterance = by_id.get(getattr(pair, role))
            if utterance is None and limit is not None:
                raise PairsError(
                    f"{where}: {role} {getattr(pair, role)!r} is not among the first {limit} utterances of the manifest (--limit {limit}); "
                    "give the manifest and the --limit the pairs were formed from"
                )
            if utterance is None:
                raise PairsError(f"{where}: {role} {getattr(pair, role)!r} is not in the manifest; give the manifest the pairs were formed from")
            recorded = (pair.language, getattr(pair, f"{role}_gender"), getattr(pair, f"{role}_speaker"))
            if recorded != (utterance.language, utterance.gender, utterance.speaker):
                raise PairsError(f"{where}: {role} {utterance.id} has another language, gender or speaker in the manifest than in the pairs file")
        check_pairing(pair, where)
        pairs.append(pair)
    ids = [pair.id for pair in pairs]
    if len(set(ids)) != len(ids):
        duplicate = next(i for i in ids if ids.count(i) > 1)
        raise PairsError(f"{path}: the pair {duplicate} is listed twice")
    return pairs
