"""A store folder as a whole: its parts, whether they make one configuration and a whole store,
and :class:`Store`, what a writer asks of the folder (which parts are finished, whether they are
this run's configuration, whether one may be resumed, each part's claim).

A store of one configuration only: :func:`same_configuration` decides when two runs' configs are
"the same run" (a manifest by its content, two spellings of one checkpoint folder as one model).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from extract.fingerprint import compared
from extract.manifest import Utterance, read_manifest
from extract.provenance import file_sha256
from extract.store.format import (
    TEMPORARY_SUFFIX,
    PartClaim,
    StoreAttributes,
    StoreError,
    _opened,
    part_attributes,
    part_ids,
    part_labels,
    part_name,
    utterance_meta,
    writer_command,
)
from extract.store.tokens import TOKENS_DAMAGED, TOKENS_GROUP, _read_tokens
from extract.store.verify import check_part, index_damage, is_complete, site_damage

OTHER_CONFIGURATION_REMEDY = "use a new --out folder, or --overwrite to set them aside (study run: --redo extract)"


def complete_parts(folder: Path) -> list[Path]:
    """The parts of a store folder, in name order; the readers' view: every final-named part
    (``*.h5``) must be complete and readable, and a damaged one is refused
    (:class:`DamagedPartError`), never left out. A part still being written, or abandoned by a
    killed writer, has its temporary name (``*.h5.tmp``) and is not a part."""
    return [check_part(path) for path in sorted(Path(folder).glob("*.h5"))]


def store_parts(path: str | Path) -> list[Path]:
    """The parts of a store: :func:`complete_parts` of a folder, or the one part file ``path`` names, checked."""
    path = Path(path)
    return [check_part(path)] if path.is_file() else complete_parts(path)


def part_content_damage(path: Path) -> str | None:
    """Everything about a complete part checked against what it records, or None: its index and labels,
    every site's data and (a decoder-state part) its generated tokens. What a resumed extraction
    checks before it skips a part."""
    with _opened(Path(path)) as handle:
        problem = index_damage(handle) or site_damage(handle)
        if problem is None and TOKENS_GROUP in handle and not _read_tokens(handle[TOKENS_GROUP])[4]:
            problem = TOKENS_DAMAGED
        return problem


@dataclass(frozen=True)
class Incompleteness:
    """What a store lacks: ``expected`` utterances when complete (None: not known), ``used`` (those
    its parts hold), the expected parts that are ``missing`` with their utterances
    (``missing_utterances``), and the ``claims`` (``*.lock``, ``*.h5.tmp``) beside its parts."""

    store: Path
    expected: int | None
    used: int
    missing: tuple[str, ...]
    missing_utterances: int | None
    claims: tuple[str, ...]
    command: str

    def message(self) -> str:
        what = []
        if self.missing:
            count = f"{self.missing_utterances} of its {self.expected} utterances" if self.expected is not None else "utterances"
            what.append(f"{count} are missing (part(s) {_listed(self.missing)} absent)")
        if self.claims:
            what.append(f"claim(s) or unfinished part(s) {_listed(self.claims)} sit beside its parts (a writer still runs, or was killed)")
        return (
            f"{self.store}: incomplete store: {'; '.join(what)}; complete it by rerunning the {self.command} command that wrote it "
            f"(same --out; --reclaim-stale for a killed run's claims), or pass --allow-partial to use the {self.used} utterances it holds"
        )

    def record(self) -> dict:
        """The ``partial`` record of a result built from this store on purpose (``--allow-partial``)."""
        return {"used": self.used, "expected": self.expected}


def _listed(names: Sequence[str], most: int = 3) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def expected_parts(utterances: int, num_shards: int, utterances_per_part: int) -> dict[str, int]:
    """Every part a complete store of ``utterances`` holds, by name, with its utterances (shard ``s``
    takes every ``num_shards``-th utterance from ``s`` on, cut into parts of ``utterances_per_part``)."""
    parts = {}
    for shard in range(num_shards):
        mine = len(range(shard, utterances, num_shards))
        for number, start in enumerate(range(0, mine, utterances_per_part)):
            parts[part_name(shard, num_shards, number)] = min(utterances_per_part, mine - start)
    return parts


def _expected_utterances(attributes: StoreAttributes) -> int | None:
    """The utterances a complete store holds: recorded by its writer (``manifest_utterances``), else, for
    a part written before that, counted in the manifest its config names when that file still has
    the content the store recorded (its sha256); None when neither is there."""
    if attributes.manifest_utterances is not None:
        return int(attributes.manifest_utterances)
    config = attributes.config
    manifest, sha256 = config.get("manifest"), config.get("manifest_sha256")
    if not manifest or not sha256 or not Path(manifest).is_file():
        return None
    if file_sha256(manifest) != sha256:
        return None
    return len(read_manifest(manifest)[: config.get("limit")])


def store_incompleteness(store: Path, parts: Sequence[Path], attributes: Sequence[StoreAttributes], used: int) -> Incompleteness | None:
    """What the store of ``parts`` (their decoded ``attributes``; ``used``: the utterances they hold)
    lacks, or None when it is whole: every part its writer's config (``num_shards``,
    ``utterances_per_part``) and utterance count expect is there, and no claim or temporary part sits
    beside them. A store without that config (written by hand, an F0 or embedding store) is checked
    for claims only; one whose utterance count is not known (a part older than
    ``manifest_utterances`` whose manifest moved or changed) for gaps in each shard's parts."""
    folder = Path(store) if Path(store).is_dir() else Path(store).parent
    claims_beside = tuple(sorted(path.name for pattern in ("*.h5.lock", f"*{TEMPORARY_SUFFIX}") for path in folder.glob(pattern)))
    config = attributes[0].config if attributes else {}
    command = writer_command(config)
    present = {Path(part).name for part in parts}
    shards, per_part = config.get("num_shards"), config.get("utterances_per_part")
    missing, missing_utterances, expected = (), None, None
    if isinstance(shards, int) and isinstance(per_part, int) and shards >= 1 and per_part >= 1:
        expected = _expected_utterances(attributes[0])
        if expected is not None:
            wanted = expected_parts(expected, shards, per_part)
            missing = tuple(name for name in wanted if name not in present)
            missing_utterances = sum(wanted[name] for name in missing)
        else:
            missing = _gaps(present, shards)
    if not missing and not claims_beside:
        return None
    return Incompleteness(Path(store), expected, used, missing, missing_utterances, claims_beside, command)


def _gaps(present: set[str], num_shards: int) -> tuple[str, ...]:
    """Parts missing before the last present part of each shard (the tail cannot be known)."""
    gaps = []
    for shard in range(num_shards):
        prefix = part_name(shard, num_shards, 0).removesuffix("00000.h5")
        numbers = {int(name[len(prefix) : -3]) for name in present if name.startswith(prefix) and name[len(prefix) : -3].isdigit()}
        gaps.extend(part_name(shard, num_shards, n) for n in range(max(numbers, default=0)) if n not in numbers)
    return tuple(gaps)


class IncompleteStoreError(StoreError):
    """A store that lacks parts or sits beside claims, read without ``allow_partial``."""

    def __init__(self, incompleteness: Incompleteness):
        super().__init__(incompleteness.message())
        self.incompleteness = incompleteness


def comparable_config(config: dict) -> dict:
    """A store config or transcription settings as two runs are compared: without what records only
    how a path was spelled (``manifest``; its content is ``manifest_sha256``)."""
    return {key: value for key, value in config.items() if key != "manifest"}


def changed_manifest(stored: dict, current: dict, what: str, instead: str) -> str | None:
    """The refusal of a resume whose manifest changed since ``stored`` was written (None if it did
    not, or ``stored`` predates ``manifest_sha256``): corrected labels mean a new output, never one
    mixing rows of the old manifest with rows of the new. ``what`` was started; ``instead``: use a new one."""
    before, now = stored.get("manifest_sha256"), current.get("manifest_sha256")
    if before is None or now is None or before == now:
        return None
    return f"--manifest {current.get('manifest')} changed since this {what} was started (sha256 {before[:12]}… then, {now[:12]}… now): use a new {instead}"


def same_configuration(first: dict, second: dict) -> bool:
    """Whether two stores' configs (:attr:`StoreAttributes.config`) describe one configuration, compared as
    :func:`comparable_config` and :func:`extract.fingerprint.compared` (two spellings of one checkpoint folder are one model)."""
    a, b = compared(comparable_config(first), comparable_config(second))
    return a == b


def differing_keys(first: dict, second: dict) -> str:
    """``key: first value vs second value`` for every key two configs disagree on (the manifest by
    its content); where both values are dicts, their differing leaves by dotted key
    (``decoding.overrides.num_beams: None vs 2``), not the whole of a nested setting such as a
    generation config."""
    return ", ".join(_differences(comparable_config(first), comparable_config(second), ""))


def _differences(a: dict, b: dict, prefix: str) -> list[str]:
    found = []
    for key in sorted(set(a) | set(b), key=str):
        x, y = a.get(key), b.get(key)
        if x == y:
            continue
        if isinstance(x, dict) and isinstance(y, dict):
            found.extend(_differences(x, y, f"{prefix}{key}."))
        else:
            found.append(f"{prefix}{key}: {x!r} vs {y!r}")
    return found


def refuse_mixed_configurations(parts: Sequence[Path], attributes: Sequence[StoreAttributes], where) -> None:
    """One store, one configuration: parts (with their decoded ``attributes``) written with different
    ones (a random-init shard beside a trained one, a 1-shard run beside a 3-shard one) are refused,
    naming parts and differing keys (configurations compared by :func:`same_configuration`)."""
    configurations: list[tuple[dict, list[Path]]] = []
    for part, recorded in zip(parts, attributes):
        group = next((members for config, members in configurations if same_configuration(config, recorded.config)), None)
        if group is None:
            configurations.append((recorded.config, [part]))
        else:
            group.append(part)
    if len(configurations) <= 1:
        return
    (first, first_parts), *others = configurations
    described = []
    for config, members in others:
        keys = differing_keys(first, config)
        described.append(f"{', '.join(p.name for p in members[:3])}{' ...' if len(members) > 3 else ''} (differs in {keys})")
    raise StoreError(
        f"{where}: parts from different configurations: {', '.join(p.name for p in first_parts[:3])}"
        f"{' ...' if len(first_parts) > 3 else ''} vs {'; '.join(described)}; keep each configuration in its own folder"
    )


def shard_slice(utterances: list[Utterance], num_shards: int, shard_index: int) -> list[Utterance]:
    """Deterministic partition: utterance i of the manifest goes to shard i mod N."""
    if num_shards < 1 or not 0 <= shard_index < num_shards:
        raise ValueError(f"need 0 <= shard index < number of shards, got {shard_index} of {num_shards}")
    return utterances[shard_index::num_shards]


@dataclass(frozen=True)
class Store:
    """A store folder as one shard's writer sees it: this shard's parts (its utterances, every
    ``num_shards``-th from ``shard_index`` on, cut into parts of ``utterances_per_part`` in manifest
    order), which are finished, whether they hold this run's ``config``, whether one may be skipped,
    and each part's claim (``reclaim_stale``: take over one whose holder on this host is gone).
    Shared by every store writer (extraction, decoder states), so that they claim and resume alike;
    ``remedy`` is what a refused configuration tells the user to do (the writing command's flags)."""

    folder: Path
    config: dict
    num_shards: int = 1
    shard_index: int = 0
    utterances_per_part: int = 256
    reclaim_stale: bool = False
    remedy: str = OTHER_CONFIGURATION_REMEDY

    def parts(self, utterances: list[Utterance]) -> list[list[Utterance]]:
        mine = shard_slice(utterances, self.num_shards, self.shard_index)
        return [mine[start : start + self.utterances_per_part] for start in range(0, len(mine), self.utterances_per_part)]

    def path(self, number: int) -> Path:
        return self.folder / part_name(self.shard_index, self.num_shards, number)

    def claim(self, path: Path, on_reclaim=None) -> PartClaim:
        return PartClaim(path, reclaim_stale=self.reclaim_stale, on_reclaim=on_reclaim)

    def finished(self) -> dict[str, Path]:
        """The complete parts in the folder by name, every one refused unless of this configuration
        (:meth:`check_compatible`); the writer's view: a damaged part is not finished (it is written again)."""
        finished = {path.name: path for path in sorted(self.folder.glob("*.h5")) if is_complete(path)}
        self.check_compatible(list(finished.values()))
        return finished

    def check_compatible(self, parts: list[Path]) -> None:
        """Every complete part of ``parts`` must come from this configuration (:func:`same_configuration`);
        a changed manifest is named as such."""
        others: dict[str, tuple[dict, list[Path]]] = {}
        for path in parts:
            stored = part_attributes(path).config
            if same_configuration(stored, self.config):
                continue
            if message := changed_manifest(stored, self.config, "store", "--out folder"):
                raise StoreError(f"{self.folder}: {message}")
            others.setdefault(json.dumps(comparable_config(stored), sort_keys=True), (stored, []))[1].append(path)
        if others:
            names = [p.name for _, group in others.values() for p in group]
            differences = "; ".join(differing_keys(stored, self.config) for stored, _ in others.values())
            raise StoreError(
                f"{self.folder}: {', '.join(names[:3])}{' ...' if len(names) > 3 else ''} ({len(names)} part(s)) were written with "
                f"another configuration (stored vs this run: {differences}); {self.remedy}"
            )

    def resumable(self, path: Path, part: list[Utterance]) -> str | None:
        """Why the complete part ``path`` cannot be skipped by a resumed run (:func:`resume_damage`), or
        None; one holding other utterances than ``part`` is :class:`StoreError`."""
        stored_ids = set(part_ids(path)) | {entry["id"] for entry in part_attributes(path).skipped or []}
        if stored_ids != {u.id for u in part}:
            raise StoreError(f"{path} holds other utterances than this manifest assigns to it; use a new --out folder")
        return resume_damage(path, part)


def resume_damage(path: Path, part: list[Utterance]) -> str | None:
    """Why the complete part ``path`` cannot be skipped by a resumed run, or None: its bytes, index or
    tokens differ from what it records (:func:`part_content_damage`), or its labels from
    what the manifest gives its utterances (an edit a part older than format 2 does not checksum)."""
    problem = part_content_damage(path)
    if problem is not None:
        return problem
    labels = part_labels(path)
    for utterance in part:
        stored = labels.get(utterance.id)
        if stored is None:
            continue  # skipped at extraction
        given = utterance_meta(utterance, 0.0)
        differing = [name for name in stored if stored[name] != str(given[name])]
        if differing:
            return f"utterance {utterance.id}'s {', '.join(differing)} differ from the manifest's: labels edited after it was written"
    return None
