"""Speaker gender from the decoder's states at MuST-SHE's gendered words (``speech-gender decoder_probe``).

An utterance of a decoder-state store whose manifest row carries its MuST-SHE annotation, with at
least one of its gendered words located in its token rows (:mod:`experiments.decoder.words`), is an
example labelled with its speaker's gender: one per utterance, so that the split is the probes' own
(speaker-disjoint, balanced by gender). Per decoder site two probes run on the same utterances and split:
``gendered-words`` (the mean over the utterance's words) and ``all-tokens`` (the mean over every
generated token's row, the end-of-sequence row included: whether the words carry more than the
sentence as a whole). One probe row per site and probe (:mod:`probing.results`; ``control`` none and
``task`` female-male, so ``collect`` puts them in ``long.csv``), with ``words``, the counts of
:class:`Examples`. The protocol, step by step: docs/stages/decoder.md.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from experiments.decoder.words import POSITIONS, UtteranceWords, shifted, utterance_features, utterance_words
from extract.manifest import read_manifest
from extract.options import check_options, option, seed_option
from extract.paths import canonical_path
from extract.provenance import file_sha256, provenance
from probing.data import ProbeError, make_splits, store_identity, store_subject

PROBES = ("gendered-words", "all-tokens")
CATEGORIES = ("1", "all")
TASK = "female-male"
SHOWN_IDS = 20  # utterances without a gendered word named in a row (all are counted)


@dataclass(frozen=True, kw_only=True)
class DecoderProbeOptions:
    """What a decoder probe run does; its rows' ``config`` records it."""

    sites: str = option("all", "comma-separated decoder sites of the store, or 'all'", metavar="SITES")
    position: str = option(
        "emitting",
        "which token rows: emitting (the states that generated the word's tokens) or reading (one step later: the states that have read them)",
        choices=POSITIONS,
    )
    categories: str = option(
        "1",
        "the MuST-SHE categories whose words are probed: 1 (the speaker speaks of themself: the words take the speaker's gender) or all",
        choices=CATEGORIES,
    )
    manifest: Path | None = option(
        None, "the manifest with the MuST-SHE annotations (default: the one the store records; refused if it changed since extraction)", role="input"
    )
    seed: int = seed_option("seed of the split")
    c: float = option(1.0, "inverse L2 strength of the logistic probe (scikit-learn's C)", positive=True)
    allow_partial: bool = option(
        False, "probe a store that lacks parts (or sits beside a writer's claims) on purpose; each row records partial: {used, expected}"
    )

    def __post_init__(self):
        if self.manifest is not None:
            object.__setattr__(self, "manifest", Path(self.manifest))
        check_options(self)


@dataclass
class Examples:
    """The utterances probed and what the words of each are, with the counts a row reports (``words``:
    utterances annotated, with a word found, with a word located in the tokens, without one and the
    first :data:`SHOWN_IDS` of their ids, the words found and those not located)."""

    ids: list[str]
    words: dict[str, UtteranceWords]
    counts: dict


def _entry(utterance):
    """The MuST-SHE entry of a manifest row (None without an annotation)."""
    from extract.corpora.must_she import Entry, MustSheError, parse_gender_terms

    category, terms = utterance.extra.get("category"), utterance.extra.get("genderterms")
    if not category or not terms:
        return None
    try:
        return Entry(str(category), utterance.gender, parse_gender_terms(str(terms), f"utterance {utterance.id}"), utterance.id)
    except MustSheError as error:
        raise ProbeError(str(error)) from error


def annotated_manifest(reader, given: Path | None) -> dict:
    """The manifest rows by id: ``given``, else the store's recorded manifest, refused (in one line)
    when its content is not what the store was extracted from."""
    config = reader.info.config
    path = Path(given or config.get("manifest") or "")
    if not path.is_file():
        raise ProbeError(f"the manifest {path} of the store is not a file: give it (--manifest)")
    recorded = config.get("manifest_sha256")
    if recorded and file_sha256(path) != recorded:
        raise ProbeError(f"--manifest {path} is not the manifest the store was extracted from (sha256 differs): give that one")
    return {utterance.id: utterance for utterance in read_manifest(path)}


def examples(reader, manifest: dict, categories: str, position: str) -> Examples:
    """The store's utterances that have a MuST-SHE entry (of ``categories``) with a gendered word
    located in their tokens; the counts of what was found and what was not."""
    from extract.corpora.must_she import category_number

    language = reader.info.config.get("tgt_lang")
    counts = {"annotated": 0, "with_word_found": 0, "with_word_located": 0, "without_word": 0, "without_word_ids": [], "words_found": 0, "words_not_located": 0}
    ids, words = [], {}
    for utterance_id in reader.ids:
        utterance = manifest.get(utterance_id)
        entry = _entry(utterance) if utterance is not None else None
        if entry is None or categories == "1" and category_number(entry.category) != "1":
            continue
        counts["annotated"] += 1
        tokens = reader.tokens(utterance_id)
        found = utterance_words(tokens.pieces, entry, language or utterance.language, tokens.holds_next)
        located = [rows for rows in (shifted(rows, position, len(tokens)) for rows in found.rows) if rows]
        counts["words_found"] += len(found.words)
        counts["words_not_located"] += len(found.words) - len(located)
        counts["with_word_found"] += bool(found.words)
        if not located:
            counts["without_word"] += 1
            counts["without_word_ids"].append(utterance_id)
            continue
        counts["with_word_located"] += 1
        ids.append(utterance_id)
        words[utterance_id] = found
    return Examples(ids, words, counts)


def run_id(store: Path, site: str, probe: str, options: DecoderProbeOptions, manifest_sha256: str | None) -> str:
    identity = {"store": canonical_path(store), "site": site, "probe": probe, "manifest_sha256": manifest_sha256} | asdict(options)
    identity.pop("sites")
    if not identity["allow_partial"]:  # the default left out: a run from before the option keeps its id
        del identity["allow_partial"]
    identity["manifest"] = None  # the manifest counts by its content
    return hashlib.sha1(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _fit_and_score(x: dict[str, np.ndarray], y: dict[str, np.ndarray], c: float, class_names) -> dict:
    """A standardized L2 logistic probe fitted on train and scored on test (macro F1, accuracy, recall, in percent)."""
    from probing import metrics
    from probing.features import Standardizer
    from probing.solver import fit_positions

    train, test = (x[name][:, None, :].astype(np.float32) for name in ("train", "test"))  # one position: [N, 1, D]
    scaler = Standardizer.fit(train, np.ones(train.shape[:2], dtype=bool))
    solution = fit_positions(scaler(train), y["train"], np.ones(train.shape[:2], dtype=bool), c=c)
    predicted = (scaler(test)[:, 0] @ solution.weight[0] + solution.bias[0] > 0).astype(int)
    return metrics.summary(y["test"], predicted, class_names)


def decoder_probe_rows(store: Path, options: DecoderProbeOptions, done: set[str] = frozenset()):
    """Yields one probe row per site and probe, those whose run id is in ``done`` left out."""
    from extract.store import ShardReader

    reader = ShardReader(store, allow_partial=options.allow_partial)
    config = reader.info.config
    if config.get("kind") != "decoder_states":
        raise ProbeError(f"{store}: not a decoder-state store (python -m experiments.decoder_states writes those)")
    sites = reader.sites if options.sites == "all" else [name.strip() for name in options.sites.split(",") if name.strip()]
    unknown = [site for site in sites if site not in reader.sites]
    if unknown or not sites:
        raise ProbeError(f"--sites {options.sites}: the store has the sites {', '.join(reader.sites)}")
    found = examples(reader, annotated_manifest(reader, options.manifest), options.categories, options.position)
    if not found.ids:
        transcripts = (
            "; the store holds transcripts (task asr): MuST-SHE's gendered words are in the translations, "
            "so extract decoder states with --task st --tgt-lang of the MuST-SHE section"
            if config.get("task") == "asr"
            else ""
        )
        raise ProbeError(
            f"{store}: no utterance has a MuST-SHE gendered word (categories {options.categories}) in its hypothesis "
            f"({found.counts['annotated']} annotated){transcripts or ': nothing to probe'}"
        )
    position = {utterance: index for index, utterance in enumerate(reader.ids)}
    metadata = {key: [values[position[u]] for u in found.ids] for key, values in reader.metadata().items()}
    splits = make_splits(metadata, found.ids, TASK, options.seed, dev_needed=False)
    labels = {name: getattr(splits, name).labels for name in ("train", "test")}
    subject, identity = store_subject(reader), store_identity(store)
    counts = found.counts | {"without_word_ids": found.counts["without_word_ids"][:SHOWN_IDS]}
    for site in sites:
        todo = [probe for probe in PROBES if run_id(store, site, probe, options, config.get("manifest_sha256")) not in done]
        if not todo:
            continue
        x = {probe: {} for probe in todo}
        for name in ("train", "test"):
            ids = getattr(splits, name).ids
            states = [reader.get(site, utterance) for utterance in ids]
            if "gendered-words" in x:
                x["gendered-words"][name] = np.stack([utterance_features(s, found.words[u].rows, options.position) for s, u in zip(states, ids)])
            if "all-tokens" in x:
                x["all-tokens"][name] = np.stack([s.mean(axis=0) for s in states])
        for probe in todo:
            scores = _fit_and_score(x[probe], labels, options.c, splits.class_names)
            yield {
                "schema": 1,
                "run_id": run_id(store, site, probe, options, config.get("manifest_sha256")),
                "store_identity": identity,
                "subject": subject,
                "site_index": reader.sites.index(site),
                "config": {
                    "store": str(store),
                    "site": site,
                    "probe": probe,
                    "control": "none",
                    "seed": options.seed,
                    "task": TASK,
                    "split": "fixed",
                    "position": options.position,
                    "categories": options.categories,
                    "c": options.c,
                    "manifest": str(options.manifest) if options.manifest else None,
                },
                "seed": options.seed,
                "splits": splits.sizes(),
                "words": counts,
                **({"partial": reader.partial.record()} if reader.partial is not None else {}),
                **scores,
                **provenance(),
            }
