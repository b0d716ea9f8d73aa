"""``python -m experiments.patch``: activation patching between speakers: where does the output read the speaker's gender?

Example (the bundled Whisper base, offline)::

    python -m experiments.patch --family whisper --checkpoint bundled-base --manifest corpus.jsonl \\
        --sites encoder.layer.0,encoder.layer.3,encoder.final --pairs cross,within --out patch/whisper-base.jsonl

For each pair (a target utterance and a source: of the other gender, ``cross``, or of the same
gender and another speaker, ``within``: the control), matched by text where two share one and by
duration, the model runs on the target with its states at a site replaced by the source's (every
speech frame both have, or ``--frames START:END``; the residual stream, or with ``--component
attention|mlp`` one block's output; ``--direction denoising`` runs the source with the target's
states instead), and the output is scored against the target's reference by a graded metric (ASR:
the reference's per-token log-probability; ST, ``--task st``: the log-probability margin of
MuST-SHE's category-1 words over their other-gender forms), beside WER (ASR) or the gender flip
rate and category-1 accuracy (ST). A site named ``A+B`` in ``--sites`` patches A and B together in
one pass (a joint site: its own row per pair). One row per pair and site is appended to ``--out``
(a rerun skips the rows written, so a killed run resumes and a new site or pairing adds only its
rows); the pairs go to ``OUT.pairs.jsonl``, the settings to ``OUT.settings.json``, the per-site
summary (cross vs within among pairs matched alike, an interval resampling target and source
speakers) to ``OUT.summary.json`` and the figure of the effect per site to ``OUT.effect.png`` /
``.pdf``. ``collect --patch OUT.summary.json`` joins the summary to the probe rows per site. See docs/stages/patching.md.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from experiments.cli import CommandParser, add_model_stage_arguments, add_quiet_argument, add_reclaim_stale_argument, fail, load_or_exit, model_spec, run_cli
from experiments.options import add_options, from_args
from experiments.patching.run import PatchOptions, sidecars


def build_parser() -> argparse.ArgumentParser:
    """The model flags, the manifest and the rows file, then the options of :class:`PatchOptions`."""
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_stage_arguments(parser, "patch rows JSONL (appended to; rows already there are skipped)", sidecars=sidecars)
    add_options(parser, PatchOptions)
    add_quiet_argument(parser)
    add_reclaim_stale_argument(parser)
    return parser


def _frames_value_first(argv: list[str]) -> list[str]:
    """``--frames -3:5`` spelled ``--frames=-3:5``: argparse takes a value that starts with ``-`` for a
    flag (a usage error of several lines), where the option's own check says in one line why it is refused."""
    joined = list(argv)
    for index in range(len(joined) - 1):
        if joined[index] == "--frames" and re.fullmatch(r"-\d*:\d*", joined[index + 1]):
            joined[index : index + 2] = [f"--frames={joined[index + 1]}"]
            break
    return joined


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(_frames_value_first(sys.argv[1:] if argv is None else argv))
    options = from_args(PatchOptions, args)  # a refused option is one line before anything heavy loads
    out = Path(args.out)
    if out.is_dir():
        return fail(f"--out {out} is a folder; give the path of the patch rows JSONL file")
    from experiments.patching.run import PatchJob, run_patching  # after parsing: the model code loads torch, which --help never needs
    from extract.runner import print_skipped
    from extract.spec import load_generator

    spec = model_spec(args)
    job = PatchJob(spec, Path(args.manifest), out, options)
    load_or_exit(spec.resolved_checkpoint, spec)

    def announce(report) -> None:
        counts = ", ".join(f"{pairing} {count}" for pairing, count in report.by_pairing.items())
        print(
            f"[patch] {options.task} with {spec.family} {job.model_name()} on {spec.device}: {report.pairs} pairs "
            f"({counts}; {len(report.unpaired)} targets unpaired) x {len(report.sites)} sites, frames {options.frames}, "
            f"{options.component} {options.direction}: "
            f"{report.todo} rows to do"
        )
        missing = [pairing for pairing, count in report.by_pairing.items() if not count]
        if missing:
            where = f"formed (its targets are listed as unpaired in {out.name}.pairs.jsonl)"
            if options.pairs_file is not None:
                where = f"in --pairs-file {options.pairs_file}"
            print(f"[patch] no {' or '.join(missing)} pairs {where}: the summary has no cross - within")

    started = time.time()
    report = run_patching(
        job,
        show_progress=not args.quiet,
        reclaim_stale=args.reclaim_stale,
        load=lambda spec, decoding: load_or_exit(lambda: load_generator(spec, decoding), spec),
        announce=announce,
    )
    print(f"[patch] wrote {report.written} rows in {time.time() - started:.1f} s; {len(report.skipped)} pairs skipped for bad audio (a rerun retries them)")
    print_skipped(report.skipped, "pair")
    unpatched = sum(value.get("not_patched", 0) for entry in report.summary["sites"].values() for value in entry["pairings"].values())
    if unpatched:
        print(f"[patch] {unpatched} rows replaced no frame (--frames {options.frames} past the target's or the source's frames): not scored")
    if report.other_pairs:
        print(f"[patch] {report.other_pairs} rows of OUT belong to other pairs than this run's: left out of the summary")
    print(f"[patch] per site, {options.component} patched, {options.direction}: each metric per pairing, then cross - within with its 95% CI")
    for site, entry in report.summary["sites"].items():
        for number, (name, metric) in enumerate(entry["metrics"].items()):
            print(f"  {site if number == 0 else ' ' * len(site)}  {_metric_line(name, metric)}")
    print(f"[patch] rows: {out}; pairs, settings, summary and figure beside it ({out.name}.pairs.jsonl, .settings.json, .summary.json, .effect.png)")
    return 0


def _points(value, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:+.{digits}f}"


def _metric_line(name: str, metric: dict) -> str:
    """One metric at one site: its name and unit, each pairing's effect, and cross - within with its
    interval, what the interval resamples and which matched pairs it compares (or why there is none)."""
    digits = 4 if metric["unit"].startswith("nats") else 2
    effects = ", ".join(f"{pairing} {_points(value['effect'], digits)} (n {value['scored']})" for pairing, value in metric["pairings"].items())
    line = f"{name} ({metric['unit']}): {effects}"
    if "cross_minus_within" not in metric:
        return line
    if metric["cross_minus_within"] is None:
        return f"{line}; cross - within n/a: {metric.get('match_note', 'undefined')}"
    low, high = metric["ci95"]
    interval = "no interval" if low is None else f"95% CI {_points(low, digits)}..{_points(high, digits)}, resampling target and source speakers"
    return f"{line}; cross - within {_points(metric['cross_minus_within'], digits)} ({interval}; {metric['match_used']}-matched pairs)"


def main(argv: list[str] | None = None) -> int:
    """The command; a user error (a bad manifest or pairs file, an unknown site, a settings mismatch) ends with one line and exit status 2."""
    return run_cli(lambda: _main(argv))


if __name__ == "__main__":
    sys.exit(main())
