"""What collect reads (``python -m experiments.collect``): probe rows and behaviour documents (gap
reports, MuST-SHE and WinoMT results, patch summaries), each checked and keyed by its ``subject``,
and their ``long.csv`` rows. :mod:`experiments.results.collect` joins them."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.results.records import DEFAULT_COMPARISON, DOCUMENTS, JOINT, LongRow, gap_task
from extract import records
from extract.errors import UserError
from probing.data import DEFAULT_SPLIT
from probing.results import ResultsError, load_numbered_rows

LONG_KEY = ("kind", "model", "dataset", "language", "tgt_lang", "site", "probe", "control", "seed", "task", "split", "applied_to", "metric")
LONG = (*LONG_KEY, "site_index", "site_role", "value", "source", "q_value")
LONG_BASE = tuple(column for column in LONG if column not in ("metric", "value", "q_value"))  # what a long row is about
BASELINE_ROLE = "baseline"  # the site_role of the baselines' one-frame stores: F0 (family praat), speaker embeddings
BASELINE_FAMILIES = ("praat", "speaker-embedding")  # experiments.analysis.f0, experiments.embedding_store
JOINED_SPLITS = (DEFAULT_SPLIT, "stratified")  # one train/test split each, kept apart by the tables' split column
HEADER_KEYS = ("schema", "kind", "subject", "inputs", "provenance", "settings")  # what a behaviour document says about itself, not a score
# row keys that are not scores: identity, bookkeeping, and per-seed or per-block detail
PROBE_NOT_SCORES = ("schema", "run_id", "store_identity", "subject", "config", "applied_to", "seed", "site_index", "splits", "shared_speakers")
PROBE_NOT_SCORES += ("control_seeds", "control_f1_per_seed", "control_split", "mdl_c_grid", "mdl_c_per_block", "mdl_positions", "mdl_control_seed")


class CollectError(UserError, ValueError):
    """Inputs that cannot be joined honestly: a file without its subject, two records claiming one key."""


# what collect reads, per flag: the kind a document records (``kind``, written by extract.provenance.identified;
# its record and versions: extract.records), and for documents written before they recorded their kind, the key only
# that kind holds (a gap report's per-language entries, MuST-SHE's category-1 scores, WinoMT's stereotype sets)
DOCUMENT_KINDS = {
    "asr_gap": {"flag": "--gaps", "holds": "languages", "command": "asr_gap"},
    "mustshe": {"flag": "--mustshe", "holds": "category_1", "command": "mustshe"},
    "winomt": {"flag": "--winomt", "holds": "by_stereotype", "command": "winomt"},
    "patch_summary": {"flag": "--patch", "holds": "sites", "command": "patch"},
}
PATCH_PROBE_TASK = "female-male"  # the probe task a patch effect joins: its pairs cross (or keep) female and male speakers
PATCH_PAIRINGS = ("cross", "within")
PATCH_MEASURES = ("pairs", "scored", "not_patched", "speakers", "effect")  # per pairing, in the summary
PATCH_TASKS = ("asr", "st")
PROBE_SUBJECT_KEYS = ("model", "dataset", "language")
PROBE_CONFIG_KEYS = ("site", "probe", "control", "seed", "task")
PROBE_SCORES = ("f1_s", "f1_macro", "applied_f1_macro")  # the scores the joins read: a number or null, never a string


@dataclass(frozen=True)
class Probe:
    """One probe run's row and where it came from."""

    row: dict
    path: Path
    line: int

    @property
    def config(self) -> dict:
        return self.row["config"]

    @property
    def subject(self) -> dict:
        return self.row["subject"]

    @property
    def applied_to(self) -> str:
        """The applied store as a name: its dataset and manifest sha256 (empty without ``apply_to``)."""
        applied = self.row.get("applied_to")
        if not applied:
            return ""
        subject = applied.get("subject") or {}
        return f"{subject.get('dataset') or ''}@{(subject.get('manifest_sha256') or '')[:12]}"

    @property
    def site_role(self) -> str | None:
        """The probed site's role in its model (the collect module docstring's ``site_role``; None: an empty cell)."""
        family = self.subject.get("family")
        if family in BASELINE_FAMILIES:
            return BASELINE_ROLE
        from extract.families import site_role  # here, not at the top: the family modules load torch

        return site_role(family, self.config["site"])

    @property
    def split(self) -> str:
        """``fixed`` or ``loso`` (rows written before the split mode existed are ``fixed``)."""
        return self.config.get("split", DEFAULT_SPLIT)

    @property
    def key(self) -> tuple:
        config, subject = self.config, self.subject
        return (
            subject["model"],
            subject["dataset"],
            subject["language"],
            config["site"],
            config["probe"],
            config["control"],
            config["seed"],
            config["task"],
            self.applied_to,
            self.split,
        )

    def __str__(self) -> str:
        return f"{self.path}:{self.line} (run {self.row['run_id']})"


@dataclass(frozen=True)
class Document:
    """One behaviour result (JSON), read as its record (:mod:`extract.records`), and its path."""

    kind: str
    record: records.Document
    path: Path

    @property
    def doc(self) -> dict:
        """The document as a dict (a file written before ``schema`` existed reads as version 1)."""
        return self.record.to_dict()

    @property
    def subject(self) -> dict:
        return self.record.subject

    def __str__(self) -> str:
        return str(self.path)


def distinct(paths: Iterable[str | Path]) -> list[Path]:
    """The paths in order, each file once however it is spelled."""
    seen, kept = set(), []
    for path in map(Path, paths):
        canonical = path.resolve()
        if canonical not in seen:
            seen.add(canonical)
            kept.append(path)
    return kept


def read_probes(paths: Sequence[Path]) -> tuple[list[Probe], list[dict]]:
    """The latest row of every run in ``paths``, and the rows left out: those without ``subject``
    (written before rows recorded it; a rerun of the probes writes them anew). The same run with the
    same store contents in two files counts once."""
    probes, skipped, seen = [], [], set()
    for path in paths:
        try:
            numbered = load_numbered_rows(path)
        except ResultsError as error:
            raise CollectError(str(error)) from None
        for run_id, (line, row) in numbered.items():
            if not isinstance(row.get("subject"), dict) or not isinstance(row.get("config"), dict):
                skipped.append(
                    {"source": f"{path}:{line}", "run_id": run_id, "reason": "no subject: written before probe rows recorded their model, dataset and language"}
                )
                continue
            _check_probe_row(row, f"{path}:{line}")
            if (run_id, row.get("store_identity")) in seen:
                continue
            seen.add((run_id, row.get("store_identity")))
            probes.append(Probe(row, Path(path), line))
    return probes, skipped


def _check_probe_row(row: dict, where: str) -> None:
    """A probe row that records its subject must record every key the joins read, and its scores as numbers."""
    missing = [f"subject.{key}" for key in PROBE_SUBJECT_KEYS if key not in row["subject"]]
    missing += [f"config.{key}" for key in PROBE_CONFIG_KEYS if key not in row["config"]]
    if missing or "run_id" not in row:
        raise CollectError(f"{where}: not a probe row of experiments.probe (no {', '.join(missing or ['run_id'])}); move the file aside or rerun the probes")
    for score in PROBE_SCORES:
        value = row.get(score)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise CollectError(f"{where}: {score} is {value!r} ({type(value).__name__}), not a number; move the file aside or rerun the probes")


def _check_kind(kind: str, doc: dict, path: Path) -> None:
    """``doc`` must be of ``kind``: the kind it records, or (documents written before they recorded it)
    the key only that kind holds. (Its version is its record's to check: :func:`read_document`.)"""
    expected = DOCUMENT_KINDS[kind]
    recorded = doc.get("kind")
    if recorded is None:
        recorded = next((name for name, other in DOCUMENT_KINDS.items() if other["holds"] in doc), None)
    if recorded != kind:
        what = f"a {recorded} result" if recorded else f"no {kind} result (it holds no {expected['holds']!r})"
        flag = f"; give it as {DOCUMENT_KINDS[recorded]['flag']}" if recorded in DOCUMENT_KINDS else ""
        raise CollectError(f"{path}: given as {expected['flag']}, but it is {what}{flag}")
    if expected["holds"] not in doc or kind == "asr_gap" and not (isinstance(doc["languages"], dict) and doc["languages"]):
        article = "an" if kind[0] in "aeiou" else "a"
        raise CollectError(f"{path}: {article} {kind} result without its {expected['holds']!r} scores; rerun python -m experiments.{expected['command']}")


def read_document(kind: str, path: Path) -> Document:
    """A behaviour result of ``kind`` (:func:`_check_kind`), written by its command (:data:`DOCUMENT_KINDS`): it must
    carry its ``subject`` with a model label and be of a version this code reads (its record, :data:`DOCUMENTS`)."""
    command = DOCUMENT_KINDS[kind]["command"]
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CollectError(f"{path}: not a readable {command} result ({type(error).__name__}: {error})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("subject"), dict):
        raise CollectError(f"{path}: no subject (written before {command} recorded its model, dataset and languages); rerun python -m experiments.{command}")
    _check_kind(kind, doc, Path(path))
    try:
        record = DOCUMENTS[kind].from_dict(doc, str(path))
    except records.RecordError as error:
        raise CollectError(str(error)) from None
    if not doc["subject"].get("model"):
        raise CollectError(
            f"{path}: its subject names no model label (its hypotheses carry no model: give transcribe's .jsonl rows); rerun python -m experiments.{command}"
        )
    return Document(kind, record, Path(path))


def _claim(claims: dict, key: tuple, record, what: str, names: Sequence[str], differ: str = "") -> None:
    """Records ``record`` under ``key``; a second record of the same key is a :class:`CollectError` naming both."""
    if key in claims:
        described = ", ".join(f"{name} {value}" for name, value in zip(names, key))
        raise CollectError(f"two {what} claim ({described}): {claims[key]} and {record}{differ}; keep one (or give them different labels)")
    claims[key] = record


def _config_difference(a: Probe, b: Probe) -> str:
    keys = sorted(k for k in set(a.config) | set(b.config) if a.config.get(k) != b.config.get(k) and k != "store")
    return f" (their configs differ in {', '.join(f'{k}: {a.config.get(k)!r} vs {b.config.get(k)!r}' for k in keys)})" if keys else ""


def check_probe_keys(probes: Sequence[Probe]) -> None:
    claims: dict[tuple, Probe] = {}
    names = ("model", "dataset", "language", "site", "probe", "control", "seed", "task", "applied_to", "split")
    for probe in probes:
        other = claims.get(probe.key)
        _claim(claims, probe.key, probe, "probe rows", names, _config_difference(other, probe) if other else "")


def finite_number(value) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if np.isfinite(value) else None


def numeric_leaves(value, prefix: str = "") -> Iterable[tuple[str, float]]:
    """Every finite number in nested dicts as (dotted path, value); lists are left out."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from numeric_leaves(inner, f"{prefix}{key}.")
    elif (number := finite_number(value)) is not None:
        yield prefix.rstrip("."), number


def probe_long_rows(probe: Probe) -> list[dict]:
    config, subject = probe.config, probe.subject
    scores = {k: v for k, v in probe.row.items() if k not in PROBE_NOT_SCORES}
    base = {
        "kind": "probe",
        "model": subject["model"],
        "dataset": subject["dataset"],
        "language": subject["language"],
        "tgt_lang": None,
        "site": config["site"],
        "probe": config["probe"],
        "control": config["control"],
        "seed": config["seed"],
        "task": config["task"],
        "split": probe.split,
        "applied_to": probe.applied_to,
        "site_index": probe.row.get("site_index"),
        "site_role": probe.site_role,
        "source": str(probe),
    }
    return _long_rows(base, numeric_leaves(scores))


def _long_rows(base: dict, scores: Iterable[tuple[str, float]]) -> list[dict]:
    """``long.csv``'s rows of one record: what it is about (``base``) with each (metric, value)."""
    return [LongRow(**base, metric=metric, value=value).to_dict() for metric, value in scores]


def gap_entries(documents: Sequence[Document]) -> dict[tuple, tuple[Document, str, dict]]:
    """(model, dataset, language, task) -> (document, language, entry) of every gap report."""
    entries: dict[tuple, tuple[Document, str, dict]] = {}
    claims: dict[tuple, Document] = {}
    for document in documents:
        subject, task = document.subject, gap_task(document.doc.get("settings", {}))
        for language, entry in document.doc.get("languages", {}).items():
            key = (subject["model"], subject.get("dataset"), language, task)
            _claim(claims, key, document, "gap reports", ("model", "dataset", "language", "task"))
            entries[key] = (document, language, entry)
    return entries


def gap_long_rows(document: Document, language: str, entry: dict) -> list[dict]:
    scores = {k: v for k, v in entry.items() if k not in ("error_distribution", "scoring", "bootstrap")}
    bootstrap = entry.get("bootstrap") or {}
    low, high = (bootstrap.get("ci95") or [None, None])[:2]
    of = bootstrap.get("ci95_of", DEFAULT_COMPARISON)
    named = "" if of == DEFAULT_COMPARISON else f".{of}"  # an interval of another comparison than E is named in its metric
    extra = {f"ci95_low{named}": low, f"ci95_high{named}": high, "p_value": bootstrap.get("p_value")}
    base = _document_base(document, language=language, task=gap_task(document.doc.get("settings", {})))
    return _long_rows(base, [*numeric_leaves(scores), *numeric_leaves(extra)])


def _document_base(document: Document, **values) -> dict:
    subject = document.subject
    base = dict.fromkeys(LONG_BASE, None) | {"kind": document.kind, "model": subject["model"], "dataset": subject.get("dataset"), "source": str(document)}
    return base | values


def behaviour_long_rows(document: Document) -> list[dict]:
    """Every score of a MuST-SHE or WinoMT result (its header and lists of ids left out)."""
    scores = {k: v for k, v in document.doc.items() if k not in HEADER_KEYS and not k.startswith("unmatched") and k != "stereotype_lines_unmatched"}
    subject = document.subject
    languages = subject.get("languages") or []
    base = _document_base(document, language="+".join(languages) or None, tgt_lang=subject.get("tgt_lang"), task=document.doc.get("settings", {}).get("task"))
    return _long_rows(base, numeric_leaves(scores))


def check_document_keys(documents: Sequence[Document], what: str) -> None:
    claims: dict[tuple, Document] = {}
    for document in documents:
        subject = document.subject
        key = (subject["model"], subject.get("dataset"), subject.get("tgt_lang"), document.doc.get("settings", {}).get("task"))
        _claim(claims, key, document, what, ("model", "dataset", "tgt_lang", "task"))


def read_patch_summary(path: Path) -> Document:
    """A patch run's ``OUT.summary.json`` (:func:`read_document`, then :func:`_check_patch_summary`); the
    rows file itself (``OUT``) is refused naming its first line, with the summary to give instead."""
    first = _first_row(path)
    if isinstance(first, dict) and first.get("kind") == "patch_row":
        raise CollectError(f"{path}:1: a patch row, not a patch summary; give --patch {path}.summary.json (the run's per-site effects)")
    document = read_document("patch_summary", path)
    _check_patch_summary(document)
    return document


def _first_row(path: Path):
    """The first line of ``path`` as JSON, or None where it is not JSON on its own (a JSON document over several lines)."""
    try:
        with Path(path).open(encoding="utf-8") as handle:
            return json.loads(handle.readline())
    except (OSError, ValueError):
        return None


def _check_patch_summary(document: Document) -> None:
    """A summary must record the subject keys the join reads and, per site, its index and numbers (or null)."""
    doc, where = document.doc, str(document)
    subject = doc["subject"]
    missing = [f"subject.{key}" for key in ("family", "task", "dataset", "languages") if key not in subject]
    if missing:
        raise CollectError(f"{where}: a patch summary without {', '.join(missing)} (written before summaries recorded them); rerun python -m experiments.patch")
    if subject["task"] not in PATCH_TASKS or not isinstance(subject["languages"], list) or not isinstance(doc["sites"], dict):
        raise CollectError(f"{where}: a malformed patch summary (subject.task, subject.languages or sites); rerun python -m experiments.patch")
    for site, entry in doc["sites"].items():
        _check_patch_site(entry, f"{where}: sites.{site}")


def _check_patch_site(entry, where: str) -> None:
    if not isinstance(entry, dict) or not isinstance(entry.get("pairings"), dict) or not _is_whole(entry.get("site_index")):
        raise CollectError(f"{where}: not a site of a patch summary (no site_index or pairings); rerun python -m experiments.patch")
    for pairing, value in entry["pairings"].items():
        if pairing not in PATCH_PAIRINGS or not isinstance(value, dict):
            raise CollectError(
                f"{where}: pairings.{pairing} is not a pairing of a patch summary (cross or within, an object); rerun python -m experiments.patch"
            )
    numbers = {f"pairings.{p}.{m}": value.get(m) for p, value in entry["pairings"].items() for m in PATCH_MEASURES}
    numbers["cross_minus_within"] = entry.get("cross_minus_within")
    interval = entry.get("ci95", [None, None])
    if not isinstance(interval, list) or len(interval) != 2:
        raise CollectError(f"{where}: ci95 is {interval!r}, not [low, high]; rerun python -m experiments.patch")
    numbers |= {"ci95[0]": interval[0], "ci95[1]": interval[1]}
    for name, value in numbers.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise CollectError(f"{where}: {name} is {value!r} ({type(value).__name__}), not a number; rerun python -m experiments.patch")


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class PatchSite:
    """One site of a patch summary: what it is about and its entry."""

    document: Document
    site: str
    entry: dict

    @property
    def subject(self) -> dict:
        return self.document.subject

    @property
    def language(self) -> str | None:
        return _patch_language(self.subject)

    @property
    def joint(self) -> bool:
        """A joint site (``A+B``: its members patched together): no probe reads it, so it is in ``long.csv`` only."""
        return JOINT in self.site

    @property
    def site_role(self) -> str | None:
        """The site's role in its family (None for a joint site: its members may have different ones)."""
        from extract.families import site_role  # here, not at the top: the family modules load torch

        return None if self.joint else site_role(self.subject["family"], self.site)

    def effect(self, pairing: str) -> float | None:
        return (self.entry["pairings"].get(pairing) or {}).get("effect")

    @property
    def interval(self) -> tuple[float | None, float | None]:
        low, high = self.entry.get("ci95", [None, None])
        return low, high


def _patch_language(subject: dict) -> str | None:
    """A summary's languages as a probe row spells its store's: sorted, joined with ``+``."""
    return "+".join(sorted(subject["languages"])) or None


def patch_sites(documents: Sequence[Document]) -> dict[tuple, list[PatchSite]]:
    """(model, dataset, language, site) -> the sites of the summaries at that key (an ASR and an ST
    run of one model may both have one); two summaries of one model, dataset, language and task
    (another --frames, a second run) are refused, naming both."""
    sites: dict[tuple, list[PatchSite]] = defaultdict(list)
    claims: dict[tuple, Document] = {}
    for document in documents:
        subject = document.subject
        model, dataset, language = subject["model"], subject["dataset"], _patch_language(subject)
        _claim(claims, (model, dataset, language, subject["task"]), document, "patch summaries", ("model", "dataset", "language", "task"))
        for site, entry in document.doc["sites"].items():
            sites[(model, dataset, language, site)].append(PatchSite(document, site, entry))
    return sites


def patch_long_rows(patch: PatchSite) -> list[dict]:
    """``long.csv``'s rows of one site of a patch summary: per pairing its counts and effect, then cross minus within and its interval."""
    subject, low_high = patch.subject, patch.interval
    scores = {pairing: patch.entry["pairings"][pairing] for pairing in PATCH_PAIRINGS if pairing in patch.entry["pairings"]}
    scores |= {"cross_minus_within": patch.entry.get("cross_minus_within"), "ci95_low": low_high[0], "ci95_high": low_high[1]}
    base = _document_base(
        patch.document,
        kind="patch",
        language=patch.language,
        tgt_lang=subject.get("tgt_lang"),
        site=patch.site,
        task=subject["task"],
        site_index=patch.entry["site_index"],
        site_role=patch.site_role,
    )
    return _long_rows(base, numeric_leaves(scores))
