"""``python -m experiments.demo`` (what ``make demo`` runs): the demo corpus, then the demo as a study.

1. the synthetic demo corpus (Kokoro and espeak-ng voices, English and Spanish, MuST-SHE en-es),
   the controlled design; and the real voices (``experiments.recipes.realvoices``: 16 credited
   voices from Debian packages, 10 clips each, 3 with ``--trim``), the second corpus. Without
   ``apt-get`` access to Debian's archive the real voices are skipped, said in one line and in the
   report;
2. the demo's study file, ``WORK/demo.yaml`` (written by ``experiments.reports.demo_work``, with
   absolute paths to the corpus), run in this process through ``experiments.study``: hidden states
   of every encoder layer of the bundled Whisper base and of its random-init twin on the pooled
   English and Spanish manifest, of the bundled Whisper tiny.en on its English utterances, of
   Whisper base on the MuST-SHE audio, and of the tiny random SeamlessM4T v2, S2T and ZeroSwot
   stand-in before/after the adapters (random weights, labelled so); transcripts (Whisper base,
   tiny.en) and Spanish output for MuST-SHE (the target language forced: Whisper has no trained
   en->es direction); ASR gaps per language with the published resampling and speaker bootstrap;
   MuST-SHE accuracy; per-position probes on every site (pretrained, random init, shuffled control),
   MDL on the last layer, per-language probes, an attention probe applied to MuST-SHE, attention
   probes on the tiny random models; on the real voices, Whisper base's transcripts and gaps per
   language and leave-one-speaker-out mean-pooled probes at every site beside the F0 baseline;
   ``collect``, correlations, the study's figures and ``RESULTS.md``;
3. the demo's richer ``report.md`` and figures, read from the study's collected results
   (``WORK/results/``) and the probe rows' arrays;
4. opt-in stages (``--extra NAME``, repeatable, or ``--extra all``; see ``experiments.reports.extras``),
   each appending its section to the report.

The synthetic voices' numbers show that the pipeline runs, not a finding about people; 16 real
voices, whose speaker, source, language and channel move together, cannot support one either.
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
from pathlib import Path

from experiments.cli import CommaList, CommandParser, output_argument, run_cli
from experiments.recipes.democorpus.build import CORPUS_VERSION, DemoCorpus, build_demo_corpus, default_root
from experiments.recipes.democorpus.voices import TRIM_VOICES
from experiments.reports.demo_report import write_report
from experiments.reports.demo_work import Work, build_real_voices, context, write_corpus_card, write_study
from experiments.reports.extras import EXTRA_STAGE_ERRORS, EXTRA_STAGES, run_extra
from experiments.study.stages import STAGES, describe, plan, print_lines, run, study_errors
from extract.paths import cache_dir

THREADS = 2  # torch CPU threads: fixed, so that every run splits the float reductions the same way


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
# manifest's sha256 and the model's fingerprint; 4: the demo is a study, with the study's layout;
# 5: leave-one-speaker-out probe arrays carry per-utterance outcomes, the report's per-voice accuracy),
# so an old cache is set aside instead of refused
WORK_VERSION = 5


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
    return build_demo_corpus(default_root(seed), seed=seed, measure=False)  # the card comes from the study's transcripts


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
        action=CommaList,
        default=[],
        choices=[*EXTRA_STAGES, "all"],
        metavar="STAGE[,STAGE]",
        help="opt-in stages after the report (comma-separated; `all` for every one): " + "; ".join(f"{name}: {what}" for name, what in EXTRA_STAGES.items()),
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if "all" in args.extra:
        args.extra = list(EXTRA_STAGES)
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    return run_cli(lambda: run_demo(args), *EXTRA_STAGE_ERRORS, lazy_errors=study_errors)


def run_study(work: Work) -> None:
    """The demo's study, every stage in this process (each skips what is finished)."""
    study = context(work)
    print_lines(["[study] plan:", *describe(plan(study))])
    run(study, STAGES)  # in process: a failure raises (a status other than 0 comes from submitted tasks only)


def run_demo(args: argparse.Namespace) -> int:
    started = time.time()
    threads = set_threads(args.threads)
    log("synthetic voices: the numbers below show the pipeline runs, they are not a finding about speakers")
    root = args.work or work_root(args.seed, args.trim)
    corpus = _timed("corpus", lambda: stage_corpus(args.seed, args.trim, root))
    out = report_folder(args.out, root)
    work = Work(root, corpus, out, compute_dtype(), threads)
    skipped = _timed("real voices", lambda: build_real_voices(work, args.trim, args.seed))
    if skipped:
        log(f"real voices skipped ({skipped}); the report says so. To include them: make apt-get reach Debian's archive (apt-get update as root), then rerun")
    study_file = write_study(work, args.positions, real=skipped is None)
    log(f"corpus {corpus.root}; study {study_file}; Whisper in {work.dtype} on {threads} torch threads; figures and report -> {out}")
    _timed("study", lambda: run_study(work))
    if not args.trim and _timed("corpus card", lambda: write_corpus_card(work)):
        log(f"corpus card (per-voice WER from the study's whisper-base transcripts): {corpus.root / 'CARD.md'}")
    report = _timed("figures and report", lambda: write_report(work, trimmed=args.trim))
    for name in dict.fromkeys(args.extra):
        section = _timed(f"extra stage {name}", lambda name=name: run_extra(name, work))
        with report.open("a") as markdown:
            markdown.write("\n" + "\n".join(section) + "\n")
    log(f"report: {report}")
    log(f"done in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
