"""``python -m experiments.demo`` (what ``make demo`` runs): the whole study on the embedded corpus.

Stages, each skipping work already done (rerun it to pick up where it stopped):

1. the synthetic demo corpus (Kokoro and espeak-ng voices, English and Spanish, MuST-SHE en-es);
2. hidden states of every encoder layer of the bundled Whisper base, of its random-init twin, of
   the bundled Whisper tiny.en (English), and of Whisper base on the MuST-SHE audio;
3. transcripts (Whisper base, tiny.en) and Spanish output for MuST-SHE (Whisper base with the
   target language forced: Whisper has no trained en->es direction);
4. ASR gaps per language with the published resampling and speaker bootstrap; MuST-SHE accuracy;
5. per-position logistic probes on every site (pretrained, random init, shuffled-label control),
   MDL on the last layer, per-language probes, an attention probe applied to MuST-SHE;
6. random-init tiny SeamlessM4T v2, S2T and the ZeroSwot stand-in: extraction before/after the
   adapters and attention probes, so that path runs end to end (random weights, labelled so);
7. correlations, figures (PNG + PDF) and ``report.md``;
8. opt-in stages (``--extra NAME``, repeatable, or ``--extra all``; see ``experiments.reports.extras``),
   each appending its section to the report.

The voices are synthetic: the numbers show that the pipeline runs, not a finding about people.
``--trim`` runs everything on a few sentences and voices (what CI runs).

Everything is written under the cache (``$SPEECH_GENDER_CACHE``, default ``.cache/``), the report
and figures to ``WORK/report``; ``--out figures/demo`` (``make demo-figures``) refreshes the
committed README figures on purpose.

A rerun from an empty cache on the same machine gives the same numbers: every random draw is
seeded, espeak-ng speaks each utterance in a fresh process with a fixed noise seed (see
``recipes.democorpus.espeak``), and torch runs on a fixed number of CPU threads (``--threads``).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, replace
from pathlib import Path

from experiments.cli import CommandParser, output_argument, run_cli
from experiments.recipes.democorpus.build import CORPUS_VERSION, DemoCorpus, build_demo_corpus, default_root
from experiments.recipes.democorpus.voices import TRIM_VOICES
from experiments.reports.demo_report import TINY_PREFIX, DemoProbes, ProbeRun, write_report
from experiments.reports.extras import EXTRA_STAGE_ERRORS, EXTRA_STAGES, run_extra
from experiments.scoring.gaps import gap_report, read_hypotheses, save_gap_report
from experiments.scoring.mustshe import save_scores, score_hypotheses
from extract.corpora.must_she import MustSheError, read_definition
from extract.families import FAMILIES, NonFiniteError, tiny_extractor
from extract.families.generation import GenerationOptions
from extract.jobs import ExtractionJob, TranscriptionJob, extract, transcribe
from extract.manifest import read_manifest, write_manifest
from extract.paths import cache_dir
from extract.runner import SettingsMismatchError, run_extraction
from extract.spec import LOAD_ERRORS, ModelSpec
from extract.store import ShardReader, StoreError
from probing.data import ProbeError
from probing.grid import GridError, run_all
from probing.results import ResultsError, load_rows
from probing.run import ProbeConfig

ATTENTION = {"lr": 1e-3, "max_epochs": 40}  # faster than the paper's 1e-4 on 2 CPU cores; stated in the report
# what a stage raises for a problem the user can fix (a store or results file of other settings, a
# failed probe run, a model that cannot load): one line and exit status 2 (besides cli.USER_ERRORS)
STAGE_ERRORS = (ProbeError, GridError, ResultsError, StoreError, NonFiniteError, SettingsMismatchError, MustSheError, *LOAD_ERRORS, *EXTRA_STAGE_ERRORS)
THREADS = 2  # torch CPU threads: fixed, so that every run splits the float reductions the same way
TINY_FAMILIES = {name: list(family.demo_sites) for name, family in FAMILIES.items() if family.demo_sites}  # tiny random models


@dataclass
class Work:
    """Where every stage writes."""

    root: Path
    corpus: DemoCorpus
    out: Path  # figures and report
    dtype: str  # compute dtype of the Whisper models
    threads: int  # torch CPU threads

    @property
    def stores(self) -> Path:
        return self.root / "stores"

    @property
    def hyps(self) -> Path:
        return self.root / "hyps"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def probes(self) -> Path:
        return self.results / "probes.jsonl"


def compute_dtype() -> str:
    """bfloat16 where the hardware runs it fast (CUDA, or a CPU with AVX512-BF16): about twice the
    speed of float32 for Whisper on such a CPU. float32 elsewhere, where bfloat16 would be slower."""
    import torch

    fast = torch.cuda.is_available() or getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)()
    return "bfloat16" if fast else "float32"


def set_threads(threads: int) -> int:
    """Fix torch's CPU thread count (torch's default follows the machine's cores). Measured on this
    2-core CPU: Whisper states were bit-identical with 1 to 4 threads (float32 and bfloat16), but
    an attention probe's weights differed by up to 7e-9 between 1 and 2 threads (identical at equal
    counts), so the demo does not leave the count to the machine."""
    import torch

    torch.set_num_threads(threads)
    return torch.get_num_threads()


# the work folder's own version: raised when stores, transcripts or probe rows written by older code can
# no longer be resumed (3: store configs and transcription settings record the model label, the
# manifest's sha256 and the model's fingerprint), so an old cache is set aside instead of refused
WORK_VERSION = 3


def work_root(seed: int, trim: bool) -> Path:
    """The default work folder: versioned with the corpus (no store of an older corpus is reused) and
    with :data:`WORK_VERSION` (no output of older code is resumed); the corpus itself is shared."""
    return cache_dir() / ("demo-trim" if trim else "demo") / f"v{CORPUS_VERSION}.{WORK_VERSION}-seed{seed}"


def report_folder(out: Path | None, root: Path) -> Path:
    """Where the figures and report go: ``--out``, else inside the work folder (in the cache), so
    that a user's ``make demo`` leaves the checkout's committed figures alone."""
    return out or root / "report"


def log(message: str) -> None:
    print(f"[demo] {message}", flush=True)


def stage_corpus(seed: int, trim: bool, root: Path) -> DemoCorpus:
    if trim:
        return build_demo_corpus(root / "corpus", seed=seed, sentences_per_language=3, mustshe_sentences=6, voices=TRIM_VOICES, measure=False)
    return build_demo_corpus(default_root(seed), seed=seed)


def whisper(work: Work, checkpoint: str, random_init: bool = False) -> ModelSpec:
    """A bundled Whisper model in the demo's compute dtype (the default device)."""
    return ModelSpec("whisper", checkpoint, dtype=work.dtype, random_init=random_init)


def english_manifest(work: Work) -> Path:
    """The English half of the corpus (for Whisper tiny.en), written once."""
    english = work.root / "manifests" / "asr-en.jsonl"
    if not english.exists():
        write_manifest(english, [u for u in read_manifest(work.corpus.manifest) if u.language == "en"])
    return english


def extraction_jobs(work: Work) -> dict[str, ExtractionJob]:
    """The Whisper stores of the demo, by name."""
    corpus, english = work.corpus, english_manifest(work)
    return {
        "whisper-base": ExtractionJob(whisper(work, "bundled-base"), corpus.manifest, work.stores / "whisper-base"),
        "whisper-base-random": ExtractionJob(whisper(work, "bundled-base", random_init=True), corpus.manifest, work.stores / "whisper-base-random"),
        "whisper-tiny.en": ExtractionJob(whisper(work, "bundled-tiny.en"), english, work.stores / "whisper-tiny.en", sites=("encoder.final",)),
        "whisper-base-mustshe": ExtractionJob(
            whisper(work, "bundled-base"), corpus.mustshe_manifest, work.stores / "whisper-base-mustshe", sites=("encoder.final",)
        ),
    }


def stage_extract(work: Work) -> dict[str, Path]:
    stores = {}
    for name, job in extraction_jobs(work).items():
        log(f"extracting {name} ({work.dtype})")
        sites, report = extract(job, show_progress=False)
        log(f"{name} at {len(sites)} site(s): {report.written} extracted, {report.resumed} already done, {len(report.skipped)} skipped for bad audio")
        stores[name] = job.out
    stores |= stage_tiny_families(work, english_manifest(work))
    return stores


def stage_tiny_families(work: Work, manifest: Path) -> dict[str, Path]:
    """Random-init tiny SeamlessM4T v2, S2T and the ZeroSwot stand-in, through the same runner."""
    utterances = read_manifest(manifest)
    stores = {}
    for family, sites in TINY_FAMILIES.items():
        out = work.stores / f"{TINY_PREFIX}{family}"
        stores[f"{TINY_PREFIX}{family}"] = out
        config = {"model": f"{TINY_PREFIX}{family}", "sites": sites, "manifest": str(manifest), "random_init": True}
        report = run_extraction(tiny_extractor(family), utterances, sites, out, config=config, storage_dtype="float32", show_progress=False)
        log(f"{TINY_PREFIX}{family} (random weights) at {', '.join(sites)}: {report.written} extracted, {report.resumed} already done")
    return stores


def transcription_jobs(work: Work) -> dict[str, TranscriptionJob]:
    """The demo's hypothesis files, by name: greedy decoding, at most 128 new tokens."""
    options = GenerationOptions(num_beams=1, max_new_tokens=128)
    corpus, english = work.corpus, english_manifest(work)
    return {
        "whisper-base": TranscriptionJob(
            whisper(work, "bundled-base"), corpus.manifest, work.hyps / "whisper-base.jsonl", "asr", name="whisper-base", options=options
        ),
        "whisper-tiny.en": TranscriptionJob(
            whisper(work, "bundled-tiny.en"), english, work.hyps / "whisper-tiny.en.jsonl", "asr", name="whisper-tiny.en", options=options
        ),
        "whisper-base-mustshe-es": TranscriptionJob(
            whisper(work, "bundled-base"),
            corpus.mustshe_manifest,
            work.hyps / "whisper-base-mustshe-es.jsonl",
            "st",
            tgt_lang="es",
            name="whisper-base",
            options=replace(options, translate_by_forcing=True),
        ),
    }


def stage_transcribe(work: Work) -> dict[str, Path]:
    paths = {}
    for name, job in transcription_jobs(work).items():
        log(f"transcribing: {name} ({work.dtype})")
        report = transcribe(job, show_progress=False)
        log(
            f"{name}: {report.todo} of {report.total} utterances to do ({report.total - report.todo} already in {job.out}); "
            f"wrote {report.written}, {len(report.skipped)} skipped for bad audio"
        )
        paths[name] = job.out
    return paths


def stage_behaviour(work: Work, hyps: dict[str, Path]) -> dict[str, Path]:
    """ASR gaps (female vs male, 1000 iterations, seed 0, the default scoring) and MuST-SHE en-es scores, each computed once."""
    outputs = {}
    for name in ("whisper-base", "whisper-tiny.en"):
        outputs[name] = work.results / f"gap-{name}.json"
        if not outputs[name].exists():
            report, counts = gap_report(read_hypotheses(hyps[name]), ("female", "male"), iterations=1000, seed=0)
            save_gap_report(report, counts, outputs[name])
    outputs["mustshe"] = work.results / "mustshe-whisper-base-es.json"
    if not outputs["mustshe"].exists():
        result, rows = score_hypotheses(read_definition(work.corpus.mustshe_tsv), hyps["whisper-base-mustshe-es"], "es")
        if "unmatched_hypotheses" in result:
            log(f"warning: {result['unmatched_hypotheses']['count']} MuST-SHE hypothesis id(s) are not in {work.corpus.mustshe_tsv} and are not scored")
        save_scores(result, rows, outputs["mustshe"])
    return outputs


def probe_configs(stores: dict[str, Path], sites: list[str], positions: int) -> dict[ProbeRun, ProbeConfig]:
    """Every probe run of the demo, by the typed name the report reads."""
    base = str(stores["whisper-base"])
    configs = {}
    for site in sites:
        last = site == sites[-1]
        configs[ProbeRun("positional", "whisper-base", site, condition="pretrained")] = ProbeConfig(base, site, "positional", positions=positions, mdl=last)
        configs[ProbeRun("positional", "whisper-base", site, condition="random init")] = ProbeConfig(
            str(stores["whisper-base-random"]), site, "positional", positions=positions
        )
        configs[ProbeRun("positional", "whisper-base", site, condition="shuffled control")] = ProbeConfig(
            base, site, "positional", control="shuffled", positions=positions
        )
    for language in ("en", "es"):
        configs[ProbeRun("language", "whisper-base", "encoder.final", language=language)] = ProbeConfig(
            base, "encoder.final", "positional", positions=positions, language=language
        )
    configs[ProbeRun("language", "whisper-tiny.en", "encoder.final", language="en")] = ProbeConfig(
        str(stores["whisper-tiny.en"]), "encoder.final", "positional", positions=positions, language="en"
    )
    configs[ProbeRun("attention", "whisper-base", "encoder.final")] = ProbeConfig(
        base, "encoder.final", "attention", apply_to=str(stores["whisper-base-mustshe"]), **ATTENTION
    )
    for family, family_sites in TINY_FAMILIES.items():
        for site in family_sites:
            model = f"{TINY_PREFIX}{family}"
            configs[ProbeRun("attention", model, site)] = ProbeConfig(str(stores[model]), site, "attention", **ATTENTION)
    return configs


def stage_probes(work: Work, stores: dict[str, Path], positions: int) -> DemoProbes:
    """Runs what is missing; returns every run's result row (its arrays are under probes.jsonl.arrays)."""
    configs = probe_configs(stores, ShardReader(stores["whisper-base"]).sites, positions)
    run_all(list(configs.values()), work.probes)
    by_id = load_rows(work.probes)
    return DemoProbes({run: by_id[config.run_id()] for run, config in configs.items()})


def _timed(name: str, stage):
    clock = time.time()
    result = stage()
    log(f"{name}: {time.time() - clock:.0f} s")
    return result


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0, help="seed of the demo corpus (voice splits, speaking rates)")
    parser.add_argument("--trim", action="store_true", help="a few sentences and voices: the whole pipeline in a few minutes (CI)")
    output_argument(parser, "--work", type=Path, help="folder for stores, hypotheses and results (default: in the cache)")
    output_argument(
        parser,
        "--out",
        type=Path,
        help="folder for the figures and report.md (default: WORK/report; `--out figures/demo` refreshes the committed README figures)",
    )
    parser.add_argument("--threads", type=int, default=THREADS, help=f"torch CPU threads (default {THREADS}, fixed for reproducible numbers)")
    parser.add_argument("--positions", type=int, default=250, help="positional probes: the first P frames (the demo's clips are under 5 s = 250 frames)")
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        choices=[*EXTRA_STAGES, "all"],
        help="an opt-in stage after the report (repeatable; `all` for every one): " + "; ".join(f"{name}: {what}" for name, what in EXTRA_STAGES.items()),
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if "all" in args.extra:
        args.extra = list(EXTRA_STAGES)
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    return run_cli(lambda: run_demo(args), *STAGE_ERRORS)


def run_demo(args: argparse.Namespace) -> int:
    started = time.time()
    threads = set_threads(args.threads)
    log("synthetic voices: the numbers below show the pipeline runs, they are not a finding about speakers")
    root = args.work or work_root(args.seed, args.trim)
    corpus = _timed("corpus", lambda: stage_corpus(args.seed, args.trim, root))
    out = report_folder(args.out, root)
    work = Work(root, corpus, out, compute_dtype(), threads)
    log(f"corpus {corpus.root}; work folder {root}; Whisper in {work.dtype} on {threads} torch threads; figures and report -> {out}")
    stores = _timed("extraction", lambda: stage_extract(work))
    hyps = _timed("transcription", lambda: stage_transcribe(work))
    behaviour = _timed("gaps and MuST-SHE", lambda: stage_behaviour(work, hyps))
    probes = _timed("probes", lambda: stage_probes(work, stores, args.positions))
    report = _timed("figures and report", lambda: write_report(work, stores, behaviour, probes, trimmed=args.trim))
    for name in dict.fromkeys(args.extra):
        section = _timed(f"extra stage {name}", lambda name=name: run_extra(name, work))
        with report.open("a") as markdown:
            markdown.write("\n" + "\n".join(section) + "\n")
    log(f"report: {report}")
    log(f"done in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
