"""The demo's run, in order: the corpus, the real voices, the demo's study (run in this process), the
corpus card, the report and the opt-in stages, each timed in one log line. ``python -m
experiments.demo`` (:mod:`experiments.demo.__main__`) parses its flags and calls :func:`run_demo`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from experiments.demo.extras import EXTRA_STAGES, run_extra
from experiments.demo.report import write_report
from experiments.demo.work import Work, build_real_voices, context, log, write_corpus_card, write_study
from experiments.recipes.democorpus.build import CORPUS_VERSION, DemoCorpus, build_demo_corpus, default_root
from experiments.recipes.democorpus.voices import TRIM_VOICES
from experiments.study.runner import STAGES, describe, plan, print_lines, run
from extract.encoder_reuse import reused, reusing_encoder_outputs
from extract.options import OptionError, check_options, option, seed_option
from extract.paths import cache_dir

THREADS = 2  # torch CPU threads: fixed, so that every run splits the float reductions the same way
EVERY_EXTRA = "all"  # --extra all: every opt-in stage


@dataclass(frozen=True)
class DemoOptions:
    """The demo's options (``python -m experiments.demo``'s flags, declared once)."""

    seed: int = seed_option("seed of the demo corpus (voice splits, speaking rates)")
    trim: bool = option(False, "a few sentences and voices: the whole pipeline in a few minutes (CI)")
    work: Path | None = option(None, "folder for stores, hypotheses and results (default: in the cache)", role="output")
    out: Path | None = option(
        None,
        "folder for the figures and report.md (default: WORK/report; `--out figures/demo` refreshes the committed README figures)",
        role="output",
    )
    threads: int = option(THREADS, f"torch CPU threads (default {THREADS}, fixed for reproducible numbers)")
    positions: int = option(250, "positional probes: the first P frames (the demo's clips are under 5 s = 250 frames)")
    extra: tuple[str, ...] = option(
        (),
        "opt-in stages after the report (comma-separated; `all` for every one): " + "; ".join(f"{name}: {what}" for name, what in EXTRA_STAGES.items()),
        choices=(*EXTRA_STAGES, EVERY_EXTRA),
        metavar="STAGE[,STAGE]",
    )

    def __post_init__(self):
        check_options(self)
        if self.threads < 1:
            raise OptionError(f"{{threads}} must be at least 1, got {self.threads}", "threads")

    @property
    def extra_stages(self) -> list[str]:
        """The opt-in stages to run, each once, in the order given (``all``: every one, in table order)."""
        return list(EXTRA_STAGES) if EVERY_EXTRA in self.extra else list(dict.fromkeys(self.extra))


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
# 5: leave-one-speaker-out probe arrays carry per-utterance outcomes, the report's per-voice accuracy;
# 6: the ZeroSwot stand-in's model changed, and --trim reads 2 sentences per language), so an old cache is
# set aside instead of refused
WORK_VERSION = 6


def work_root(seed: int, trim: bool) -> Path:
    """The default work folder: versioned with the corpus (no store of an older corpus is reused) and
    with :data:`WORK_VERSION` (no output of older code is resumed); the corpus itself is shared."""
    return cache_dir() / ("demo-trim" if trim else "demo") / f"v{CORPUS_VERSION}.{WORK_VERSION}-seed{seed}"


def report_folder(out: Path | None, root: Path) -> Path:
    """Where the figures and report go: ``--out``, else inside the work folder (in the cache), so
    that a user's ``make demo`` leaves the checkout's committed figures alone."""
    return out or root / "report"


def stage_corpus(seed: int, trim: bool, root: Path) -> DemoCorpus:
    if trim:
        return build_demo_corpus(root / "corpus", seed=seed, sentences_per_language=2, mustshe_sentences=4, voices=TRIM_VOICES)
    return build_demo_corpus(default_root(seed), seed=seed)


def _timed(name: str, stage):
    clock = time.time()
    result = stage()
    log(f"{name}: {time.time() - clock:.0f} s")
    return result


def run_study(work: Work) -> None:
    """The demo's study, every stage in this process (each skips what is finished). Whisper's encoder
    runs once per clip for extraction and transcription (:mod:`extract.encoder_reuse`): the encoder
    outputs the extraction stage computed are decoded by the transcription stage."""
    study = context(work)
    print_lines(["[study] plan:", *describe(plan(study))])
    with reusing_encoder_outputs():
        run(study, STAGES)  # in process: a failure raises (a status other than 0 comes from submitted tasks only)
        if reused():
            log(f"Whisper's encoder ran once for extraction and transcription on {reused()} clips (their encoder outputs were reused)")


def run_demo(options: DemoOptions) -> int:
    started = time.time()
    threads = set_threads(options.threads)
    log("synthetic voices: the numbers below show the pipeline runs, they are not a finding about speakers")
    root = options.work or work_root(options.seed, options.trim)
    corpus = _timed("corpus", lambda: stage_corpus(options.seed, options.trim, root))
    out = report_folder(options.out, root)
    work = Work(root, corpus, out, compute_dtype(), threads)
    skipped = _timed("real voices", lambda: build_real_voices(work, options.trim, options.seed))
    if skipped:
        log(f"real voices skipped ({skipped}); the report says so. To include them: make apt-get reach Debian's archive (apt-get update as root), then rerun")
    study_file = write_study(work, options.positions, real=skipped is None)
    log(f"corpus {corpus.root}; study {study_file}; Whisper in {work.dtype} on {threads} torch threads; figures and report -> {out}")
    _timed("study", lambda: run_study(work))
    if not options.trim and _timed("corpus card", lambda: write_corpus_card(work)):
        log(f"corpus card (per-voice WER from the study's whisper-base transcripts): {corpus.root / 'CARD.md'}")
    report = _timed("figures and report", lambda: write_report(work, trimmed=options.trim))
    for name in options.extra_stages:
        section = _timed(f"extra stage {name}", lambda name=name: run_extra(name, work))
        with report.open("a") as markdown:
            markdown.write("\n" + "\n".join(section) + "\n")
    log(f"report: {report}")
    log(f"done in {time.time() - started:.0f} s")
    return 0
