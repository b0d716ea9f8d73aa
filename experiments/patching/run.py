"""The patch stage: its options, declared once, and the resumable run behind ``python -m experiments.patch``.

A run reads the manifest, forms the pairs (or reads them from a pairs file) and writes them to
``OUT.pairs.jsonl``; claims ``OUT`` (:class:`extract.appendlog.AppendLog`: one writer, a line cut by
a kill removed and redone); checks or writes ``OUT.settings.json`` (a rerun with another model,
task, frames, decoding, manifest, seed, ``--limit`` or pairs file is refused, see
:func:`extract.runner.check_settings`); then, per
batch of pairs that share a language, loads their audio, transcribes the targets once unpatched
(each target once per run, whatever its pairs), captures the sources' states at every site still
to do in one encoder pass, counts the targets' own frames at those sites once, and per site
generates the targets patched (:mod:`extract.patching`),
appending one row per pair and site as each site's batch finishes. A rerun skips the rows already
written (by ``row_id``: pair and site), so adding a site or a pairing later runs only what is new.
The summary (``OUT.summary.json``) and the figure (``OUT.effect.png`` / ``.pdf``) are rewritten
from the rows in ``OUT`` of the current pairs at the end. A run with no site or no pair is refused
before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.patching.pairs import PAIRINGS, Pair, PairsError, form_pairs, read_pairs, write_pairs
from experiments.patching.sites import check_joint, resolve_sites
from experiments.results.records import JOINT, PatchSummary, members
from extract.appendlog import AppendLog, RowKind
from extract.options import OptionError, check_options, option, seed_option
from extract.patching import COMPONENTS, RESIDUAL, PatchError, frames_label, parse_frames
from extract.provenance import joined, label_argument
from extract.records import schema_version

if TYPE_CHECKING:
    from extract.families.generation import GenerationOptions, Generator
    from extract.manifest import Utterance
    from extract.spec import ModelSpec

# kept here, not in extract.records: one writer, one reader (the summary); schema 2 adds component, direction, runs_on and the graded scores
ROW_KIND, ROW_SCHEMA = "patch_row", 2
SUMMARY_KIND, SUMMARY_SCHEMA = PatchSummary.FORMAT, schema_version(PatchSummary.FORMAT)  # read by experiments.collect --patch
PATCH_ROWS = RowKind("patch row", ("kind", "row_id", "pair", "site"), unique="row_id")
MAX_SECONDS = {"asr": 30.0, "st": 60.0}
NOT_PATCHED = "no frames replaced"  # why a row whose span held none of the target's frames is not scored
DIRECTIONS = ("noising", "denoising")  # the model runs on the target with the source's states, or on the source with the target's


@dataclass(frozen=True, kw_only=True)
class PatchOptions:
    """What a patch run does; what of it the rows depend on is in ``OUT.settings.json``."""

    sites: str = option(
        "all",
        "comma-separated site names to patch, 'all', or every:K (every K-th site and the last); A+B patches sites A and B together in one pass "
        "(a joint site: one row per pair, named A+B)",
        metavar="SITES",
    )
    pairings: tuple[str, ...] = option(
        PAIRINGS,
        "which pairs: cross (a source of the other gender) and within (the same gender, another speaker: the control)",
        flag="--pairs",
        choices=PAIRINGS,
    )
    pairs_file: Path | None = option(None, "patch these pairs (a run's OUT.pairs.jsonl) instead of forming them from the manifest", role="input")
    frames: str = option("speech", "the frames replaced: speech (every speech frame both utterances have) or START:END (frame indices at the site)")
    component: str = option(
        RESIDUAL,
        "what is replaced at a site: residual (the site's states: the whole residual stream at a layer), or the output of the layer's "
        "attention or mlp block, added back into the target's own residual stream (encoder.layer.K sites)",
        choices=COMPONENTS,
    )
    direction: str = option(
        "noising",
        "noising: the model runs on the target (clean) with the source's states; denoising: on the source with the target's states "
        "(scored against the target's reference: how much of it the patch restores)",
        choices=DIRECTIONS,
    )
    task: str = option("asr", "asr: transcripts scored by WER; st: translations into --tgt-lang, scored by MuST-SHE category 1", choices=("asr", "st"))
    tgt_lang: str | None = option(None, "target language for --task st (ISO 639-1, or the model's own code)")
    translate_by_forcing: bool = option(
        False, "Whisper, ST into a language other than English: transcribe with the target language forced", flag="--whisper-translate-by-forcing"
    )
    num_beams: int | None = option(None, "override the model's generation config", least=1)
    max_new_tokens: int | None = option(None, "override the model's generation config", least=1)
    batch_size: int = option(8, "pairs per batch (the sources' states at every site of a batch are held at once)", least=1)
    max_seconds: float | None = option(None, "trim audio to this length (default 30 for asr, 60 for st)", positive=True)
    limit: int | None = option(None, "only the first N utterances of the manifest", least=1)
    seed: int = seed_option("seed of the pairing order (ties in duration go the same way on every run)")
    iterations: int = option(1000, "speaker-bootstrap resamples for the summary's interval", least=1)
    label: str | None = option(None, "the model label written in each row (default: from the family and checkpoint)", parse=label_argument)

    def __post_init__(self):
        check_options(self)
        try:
            parse_frames(self.frames)
        except PatchError as error:
            raise OptionError.refused("frames", self.frames, str(error).partition(": ")[2]) from None
        if self.task == "st" and not self.tgt_lang:
            raise OptionError("{task} st needs {tgt_lang}", "task", "tgt_lang")
        if not self.pairings:
            raise OptionError("{pairings}: give cross, within or both", "pairings")
        if not self.site_names():
            raise OptionError("{sites} names no site: give at least one site name, 'all' or every:K", "sites")
        for name in self.site_names():
            check_joint(name)

    @property
    def span(self):
        return parse_frames(self.frames)

    @property
    def trim_seconds(self) -> float:
        return self.max_seconds or MAX_SECONDS[self.task]

    def decoding(self) -> GenerationOptions:
        from extract.families.generation import GenerationOptions

        return GenerationOptions(self.num_beams, self.max_new_tokens, translate_by_forcing=self.translate_by_forcing)

    def site_names(self) -> list[str] | str:
        """``all``, or the names given (a joint site's members without spaces around ``+``)."""
        if self.sites == "all":
            return "all"
        return [JOINT.join(part.strip() for part in name.split(JOINT)) for name in self.sites.split(",") if name.strip()]


def pairs_path(out: Path) -> Path:
    return out.with_name(out.name + ".pairs.jsonl")


def summary_path(out: Path) -> Path:
    return out.with_name(out.name + ".summary.json")


def figure_path(out: Path) -> Path:
    """Where the figure goes: ``OUT.effect.png``, and ``OUT.effect.pdf`` beside it."""
    return out.with_name(out.name + ".effect.png")


def sidecars(out: Path) -> list[Path]:
    """Every file a run writes beside ``OUT`` (the output guard checks them against the inputs)."""
    from experiments.reports.plots import figure_paths
    from extract.provenance import settings_path

    return [settings_path(out), pairs_path(out), summary_path(out), *figure_paths(figure_path(out))]


@dataclass(frozen=True)
class PatchJob:
    spec: ModelSpec
    manifest: Path
    out: Path
    options: PatchOptions = field(default_factory=PatchOptions)

    def model_name(self) -> str:
        return self.options.label or self.spec.label()

    def settings(self, generator: Generator) -> dict:
        """What the rows depend on; a rerun with other settings is refused (the sites and pairings may
        grow). What decides the pairs is among them: the seed, ``--limit`` and the pairs file (by content)."""
        from extract.provenance import file_sha256, provenance

        spec, options = self.spec, self.options
        return {
            "kind": "patch",
            "model": self.model_name(),
            "family": spec.family,
            "checkpoint": spec.resolved_checkpoint(),
            "revision": spec.revision,
            "model_fingerprint": generator.extractor.fingerprint,
            "dtype": spec.dtype,
            "task": options.task,
            "tgt_lang": options.tgt_lang,
            "frames": frames_label(options.span),
            "component": options.component,
            "direction": options.direction,
            "max_seconds": options.trim_seconds,
            "decoding": generator.settings(),
            "seed": options.seed,
            # only where given, so that a settings file written before they were recorded still matches a run without them
            **({} if options.limit is None else {"limit": options.limit}),
            **({} if options.pairs_file is None else {"pairs_file_sha256": file_sha256(options.pairs_file)}),
            "scoring": {"normalizer": "whisper", "graded": "logprob"} if options.task == "asr" else {"mustshe": "category 1", "graded": "gender_margin"},
            "manifest": str(self.manifest),
            "manifest_sha256": file_sha256(self.manifest),
            "provenance": provenance(),
        }


@dataclass
class PatchRunReport:
    pairs: int = 0
    by_pairing: dict[str, int] = field(default_factory=dict)  # pairs per pairing asked for (0 where a pairs file has none of it)
    unpaired: list[dict] = field(default_factory=list)
    sites: list[str] = field(default_factory=list)
    todo: int = 0  # pair x site rows not in OUT when the run started
    written: int = 0
    skipped: list[dict] = field(default_factory=list)  # pairs with unreadable audio (a rerun retries them)
    other_pairs: int = 0  # rows of OUT whose pair is not among this run's settings' pairs: left out of the summary
    summary: dict = field(default_factory=dict)


def job_pairs(job: PatchJob, utterances: list[Utterance]) -> tuple[list[Pair], list[dict], set[str]]:
    """The pairs of the job's pairings (from ``--pairs-file`` or formed), the unpaired targets, and the
    ids of the pairs of every pairing under these settings (each pairing's pairs are formed apart, so
    a later run that adds a pairing keeps the earlier rows': the summary counts the rows of these only)."""
    options = job.options
    if options.pairs_file is not None:
        pairs, unpaired = read_pairs(options.pairs_file, utterances, options.limit), []
        if not pairs:
            raise PairsError(f"{options.pairs_file}: no pairs in it; give a pairs file a patch run wrote (OUT.pairs.jsonl)")
    else:
        pairs, unpaired = form_pairs(utterances, PAIRINGS, options.seed)
    chosen = [pair for pair in pairs if pair.pairing in options.pairings]
    left = [entry for entry in unpaired if entry["pairing"] in options.pairings]
    if not chosen:
        source = f"the pairs file {options.pairs_file}" if options.pairs_file is not None else f"the {len(utterances)} utterances of {job.manifest}"
        reason = f" (first unpaired: {left[0]['target']}, {left[0]['reason']})" if left else ""
        raise PairsError(f"no {' or '.join(options.pairings)} pairs to patch in {source}{reason}; nothing was written")
    return chosen, left, {pair.id for pair in pairs}


def run_patching(
    job: PatchJob,
    show_progress: bool = True,
    reclaim_stale: bool = False,
    generator: Generator | None = None,
    load: Callable[[ModelSpec, GenerationOptions], Generator] | None = None,
    announce: Callable[[PatchRunReport], None] | None = None,
) -> PatchRunReport:
    """Runs ``job`` (see the module docstring); ``generator``: the model already loaded with the
    job's decoding options, else ``load(spec, decoding)`` (default :func:`extract.spec.load_generator`)
    once ``OUT`` is claimed. ``announce(report)`` is told the pairs, sites and work left before the model runs."""
    from tqdm.auto import tqdm

    from extract.diskfull import naming_full_disk
    from extract.manifest import read_manifest
    from extract.provenance import settings_path
    from extract.runner import check_settings

    options = job.options
    utterances = read_manifest(job.manifest)[: options.limit]
    pairs, unpaired, current = job_pairs(job, utterances)
    by_pairing = {pairing: sum(1 for pair in pairs if pair.pairing == pairing) for pairing in options.pairings}
    report = PatchRunReport(pairs=len(pairs), by_pairing=by_pairing, unpaired=unpaired)
    job.out.parent.mkdir(parents=True, exist_ok=True)
    with AppendLog(job.out, PATCH_ROWS, reclaim_stale) as log:
        check_rows(job.out, log.rows)
        if generator is None:
            from extract.spec import load_generator

            generator = (load or load_generator)(job.spec, options.decoding())
        generator.check(options.task, options.tgt_lang)
        extractor = generator.extractor
        report.sites = resolve_sites(extractor, options.site_names(), options.component)
        check_settings(settings_path(job.out), job.settings(generator), job.out, "patch rows file")
        write_pairs(pairs_path(job.out), pairs, unpaired)
        done = log.ids
        todo = [(pair, [site for site in report.sites if row_id(pair, site) not in done]) for pair in pairs]
        todo = [(pair, sites) for pair, sites in todo if sites]
        report.todo = sum(len(sites) for _, sites in todo)
        if announce is not None:
            announce(report)
        by_id = {u.id: u for u in utterances}
        kept = "the rows written so far are kept and the rerun continues after them"
        with naming_full_disk(job.out, kept), tqdm(total=report.todo, desc=f"patching {extractor.family}", unit="row", disable=not show_progress) as bar:
            _Runner(job, generator, by_id, log, report, bar).run(todo)
        report.summary = write_summary(job, log.rows, report, current)  # under the claim: one run writes the summary at a time
    return report


def check_rows(path: Path, rows: list[dict]) -> None:
    """Every row of ``path`` a patch row this code reads (``kind`` and ``schema``), or one line naming the first that is not."""
    from extract.appendlog import OutputKindError

    for number, row in enumerate(rows, start=1):
        if row["kind"] != ROW_KIND:
            raise OutputKindError(path, None, f"row {number} is a {row['kind']!r} row, not a patch row; write to another file")
        if not isinstance(row.get("schema"), int) or row["schema"] > ROW_SCHEMA:
            raise OutputKindError(
                path,
                None,
                f"row {number} has schema {row.get('schema')!r}; this code writes and reads {ROW_SCHEMA}: update the package or write to another file",
            )


def row_id(pair: Pair, site: str) -> str:
    return f"{pair.id}@{site}"


class _Runner:
    """The batch loop of :func:`run_patching`. The model runs on ``runs_on(pair)`` (the target when
    noising, the source when denoising) with the states of the other; every score is against the
    target's reference (the clean run's)."""

    def __init__(self, job: PatchJob, generator: Generator, by_id: dict, log: AppendLog, report: PatchRunReport, bar):
        self.job, self.generator, self.by_id, self.log, self.report, self.bar = job, generator, by_id, log, report, bar
        self.options = job.options
        self.plain: dict[tuple[str, str], tuple[str, list | None]] = {}  # (run input, reference's utterance) -> unpatched hypothesis and scores, once per run
        self.references: dict[str, tuple[list[str], str | None]] = {}  # target id -> the texts scored (or none, and why)
        self.table = list(generator.extractor.site_table())
        self.scores = generator.extractor.decoder_path is not None  # ZeroSwot's decoder is a separate model: nothing to teacher-force

    def runs_on(self, pair: Pair) -> str:
        return pair.target if self.options.direction == "noising" else pair.source

    def gives(self, pair: Pair) -> str:
        return pair.source if self.options.direction == "noising" else pair.target

    def site_index(self, site: str) -> int:
        """A site's index in the site table; a joint site's is its last member's (everything after it runs on patched states)."""
        return self.table.index(members(site)[-1])

    def run(self, todo: list[tuple[Pair, list[str]]]) -> None:
        by_language: dict[str, list[tuple[Pair, list[str]]]] = {}
        for item in todo:
            by_language.setdefault(item[0].language, []).append(item)
        size = self.options.batch_size
        for language, items in sorted(by_language.items()):
            for start in range(0, len(items), size):
                self.batch(language, items[start : start + size])

    def batch(self, language: str, items: list[tuple[Pair, list[str]]]) -> None:
        from extract.patching import capture_sources, patched_together, target_frames

        audio, errors = self.load([pair.target for pair, _ in items] + [pair.source for pair, _ in items])
        usable = []
        for pair, sites in items:
            missing = [i for i in (pair.target, pair.source) if i in errors]
            if missing:
                self.report.skipped.append({"pair": pair.id, "ids": missing, "message": errors[missing[0]]})
                self.bar.update(len(sites))
            else:
                usable.append((pair, sites))
        if not usable:
            return
        options = self.options
        self.run_plain(language, [pair for pair, _ in usable], audio)
        sites = [site for site in self.report.sites if any(site in wanted for _, wanted in usable)]
        patched_sites = [name for name in self.table if any(name in members(site) for site in sites)]  # a joint site's members too
        extractor = self.generator.extractor
        givers = [audio[self.gives(pair)] for pair, _ in usable]
        sources = capture_sources(extractor, givers, patched_sites, options.span, alone=options.span is not None, component=options.component)
        own = target_frames(extractor, [audio[self.runs_on(pair)] for pair, _ in usable], patched_sites)  # once for every site of the batch
        for site in sites:
            chosen = [(index, pair) for index, (pair, wanted) in enumerate(usable) if site in wanted]
            texts = [self.texts(pair) for _, pair in chosen]
            (hypotheses, scores), patch = patched_together(
                self.generator,
                members(site),
                [audio[self.runs_on(pair)] for _, pair in chosen],
                [sources[index] for index, _ in chosen],
                language,
                options.task,
                options.tgt_lang,
                options.span,
                own.rows([index for index, _ in chosen]),
                options.component,
                generate=lambda inputs, texts=texts: self.generate(inputs, language, texts),
            )
            rows = [
                self.row(pair, site, hypotheses[position], None if scores is None else scores[position], patch, position)
                for position, (_, pair) in enumerate(chosen)
            ]
            self.log.append(rows)
            self.report.written += len(rows)
            self.bar.update(len(rows))

    def load(self, ids: list[str]) -> tuple[dict, dict[str, str]]:
        """Samples by id, and the message of each id whose audio could not be read."""
        from extract.runner import AudioLog, load_utterance_audio

        log = AudioLog()
        audio = load_utterance_audio([self.by_id[identifier] for identifier in dict.fromkeys(ids)], self.options.trim_seconds, log)
        return audio, {item["id"]: item["message"] for item in log.skipped}

    def texts(self, pair: Pair) -> list[str]:
        """The texts the graded metric teacher-forces for ``pair`` (the target's reference; for ST also
        its other-gender version), none where there is nothing to score (the reason kept for the row)."""
        from experiments.patching.graded import GradedError, other_gender_text
        from experiments.patching.scoring import mustshe_entry

        if pair.target not in self.references:
            target = self.by_id[pair.target]
            texts, reason = [], None
            if self.options.task == "asr":
                texts, reason = ([target.text], None) if target.text.strip() else ([], "the reference transcript is empty")
            elif not target.translation:
                reason = "no reference translation in the manifest"
            else:
                entry, reason = mustshe_entry(target)
                if entry is not None:
                    try:
                        texts = [target.translation, other_gender_text(target.translation, entry, self.options.tgt_lang)]
                    except GradedError as error:
                        reason = str(error)
            self.references[pair.target] = (texts, reason)
        return self.references[pair.target][0]

    def generate(self, inputs: list, language: str, texts: list[list[str]]) -> tuple[list[str], list | None]:
        """Hypotheses for ``inputs`` and, where the family's decoder can be teacher-forced, each one's ``texts`` scored."""
        from extract.forced import generate_scored

        options = self.options
        if not self.scores:
            return self.generator.generate(inputs, language, options.task, options.tgt_lang), None
        scored = generate_scored(self.generator, inputs, language, options.task, options.tgt_lang, texts)
        return scored.hypotheses, scored.texts

    def run_plain(self, language: str, pairs: list[Pair], audio: dict) -> None:
        """The unpatched run of each pair's input, scored against its target's reference, once per run."""
        keys = list(dict.fromkeys((self.runs_on(pair), pair.target) for pair in pairs if (self.runs_on(pair), pair.target) not in self.plain))
        if keys:
            by_key = {(self.runs_on(pair), pair.target): pair for pair in pairs}
            hypotheses, scores = self.generate([audio[key[0]] for key in keys], language, [self.texts(by_key[key]) for key in keys])
            for index, key in enumerate(keys):
                self.plain[key] = (hypotheses[index], None if scores is None else scores[index])

    def row(self, pair: Pair, site: str, hypothesis: str, scores: list | None, patch: dict, position: int) -> dict:
        """The row of ``pair`` at ``site``; ``patch``: what :func:`extract.patching.patched_together` replaced per member;
        ``scores``: the patched run's teacher-forced texts (None where the family has none)."""
        from experiments.patching.scoring import asr_scores, mustshe_scores
        from experiments.scoring.asr_metrics import Scoring

        options, target = self.options, self.by_id[pair.target]
        runs_on = self.by_id[self.runs_on(pair)]
        plain, plain_scores = self.plain[(runs_on.id, target.id)]
        row = {
            "kind": ROW_KIND,
            "schema": ROW_SCHEMA,
            "row_id": row_id(pair, site),
            "model": self.job.model_name(),
            "family": self.job.spec.family,
            "dataset": target.dataset,
            "site": site,
            "site_index": self.site_index(site),
            "frames": frames_label(options.span),
            "component": options.component,
            "direction": options.direction,
            "task": options.task,
            "language": pair.language,
            "tgt_lang": options.tgt_lang if options.task == "st" else pair.language,
            "pair": pair.id,
            **{key: value for key, value in pair.to_dict().items() if key not in ("kind", "schema", "pair", "language")},
            "runs_on": runs_on.id,
            "patched": _patched_cell(patch, position),
            "reference": target.text if options.task == "asr" else target.translation,
            "plain_hypothesis": plain,
            "hypothesis": hypothesis,
        }
        graded = "logprob" if options.task == "asr" else "gender_margin"
        if not any(report.replaced[position] for report in patch.values()):  # a span past the target's (or the source's) frames: nothing was patched
            if options.task == "asr":
                row["asr"], row["unscored"] = None, NOT_PATCHED
            else:
                row["mustshe"] = {"scored": False, "reason": NOT_PATCHED}
            row[graded] = {"scored": False, "reason": NOT_PATCHED}
            return row
        if options.task == "asr":
            try:
                row["asr"] = asr_scores(target.text, plain, hypothesis, pair.language, Scoring())
            except ValueError as error:  # a reference empty after normalization
                row["asr"], row["unscored"] = None, str(error)
        else:
            giver = self.by_id[self.gives(pair)]
            row["mustshe"] = mustshe_scores(target, giver.gender, plain, hypothesis, options.tgt_lang, own_gender=runs_on.gender)
        row[graded] = self.graded(target, plain_scores, scores)
        return row

    def graded(self, target: Utterance, plain: list | None, patched: list | None) -> dict:
        """The row's graded score (:mod:`experiments.patching.graded`), or why it has none."""
        from experiments.patching.graded import GradedError, logprob_scores, margin_scores
        from experiments.patching.scoring import mustshe_entry

        if plain is None or patched is None:
            return {"scored": False, "reason": f"{self.generator.family}'s decoder is a separate model: no teacher-forced scores"}
        texts, reason = self.references[target.id]
        if not texts:
            return {"scored": False, "reason": reason}
        if self.options.task == "asr":
            return logprob_scores(plain[0], patched[0])
        try:
            return margin_scores(self.generator.tokenizer, plain, patched, mustshe_entry(target)[0], self.options.tgt_lang)
        except GradedError as error:
            return {"scored": False, "reason": str(error)}


def _patched_cell(patch: dict, position: int) -> dict:
    """A row's ``patched``: the frames replaced at its site (start, end, the target's frames), or at
    each member of a joint site, by member."""
    cells = {
        site: {"start": report.start[position], "end": report.end[position], "target_frames": report.target_frames[position]} for site, report in patch.items()
    }
    return next(iter(cells.values())) if len(cells) == 1 else cells


def summary_subject(job: PatchJob, rows: list[dict]) -> dict:
    """What the summary is about, as ``collect --patch`` joins it to probe rows: the model label,
    family, task, target language (ST), and the rows' datasets and languages (several datasets
    joined with ``+``, as a probe row's subject joins its store's)."""
    return {
        "model": job.model_name(),
        "family": job.spec.family,
        "task": job.options.task,
        "tgt_lang": job.options.tgt_lang if job.options.task == "st" else None,
        "dataset": joined(row.get("dataset") for row in rows),
        "languages": sorted({row["language"] for row in rows}),
    }


def write_summary(job: PatchJob, rows: list[dict], report: PatchRunReport, current: set[str] | None = None) -> dict:
    """``OUT.summary.json`` (per site: :func:`experiments.patching.summary.site_summary`) and the
    figure, from the rows of ``OUT`` whose pair is one of ``current`` (every row when None); the rows
    of other pairs (written by a run under settings recorded before the pairs were among them) are
    left out and counted (``rows_of_other_pairs``)."""
    from experiments.patching.figure import effect_per_site
    from experiments.patching.summary import primary, site_summary
    from extract.diskfull import write_text_whole
    from extract.provenance import provenance

    kept = rows if current is None else [row for row in rows if row["pair"] in current]
    report.other_pairs = len(rows) - len(kept)
    rows = kept
    ordered = sorted(rows, key=lambda row: (row["site_index"], len(members(row["site"])), row["site"], row["row_id"]))
    summary = {
        "kind": SUMMARY_KIND,
        "schema": SUMMARY_SCHEMA,
        "subject": summary_subject(job, rows),
        "frames": frames_label(job.options.span),
        "component": job.options.component,
        "direction": job.options.direction,
        "metric": primary(job.options.task),
        "rows": len(rows),
        "rows_of_other_pairs": report.other_pairs,
        "unpaired": report.unpaired,
        "skipped": report.skipped,
        "sites": site_summary(ordered, job.options.iterations, job.options.seed),
        "provenance": provenance(),
    }
    write_text_whole(summary_path(job.out), json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    if summary["sites"]:
        effect_per_site(summary, figure_path(job.out))
    return summary
