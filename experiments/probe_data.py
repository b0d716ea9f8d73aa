"""``python -m experiments.probe_data``: a probe's data as one manifest with train, dev and test splits.

    python -m experiments.probe_data --from manifests/must_c-en-es-train.jsonl --train 2514,2546 --dev 539,539 \\
        --test manifests/must_c-en-es-dev.jsonl manifests/must_c-en-es-tst-COMMON.jsonl --seed 0 \\
        --out manifests/must_c-en-es-probe.jsonl

Fucci et al. 2025's probe data (section 3 and appendix D, Table 5): ``train`` and ``dev`` sampled at
random from MuST-C en-es train, 2,514 female + 2,546 male and 539 + 539 segments, with no speaker in
both; ``test`` (their test-generic) every segment of MuST-C dev and tst-COMMON. ``--train`` and
``--dev`` give the female and male counts; the speakers of ``--from`` are divided between dev and
train in proportion to those counts (seeded), then each split's segments are drawn from its own
speakers. The rows of ``--test`` keep every segment (unbalanced, as the paper's). A speaker of
``--test`` also in the sample, a count larger than what the speakers hold, or a segment id given
twice is an error naming it. The output's rows say their split, so ``experiments.probe`` trains,
stops and scores on them as given (the probe balances each split by gender as it reads it: the
paper's unbalanced test-generic is scored on a balanced subset).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.cli import CommandParser, command_main, input_argument, output_argument
from experiments.options import add_options, from_args
from extract.errors import UserError
from extract.manifest import Utterance, read_manifest, write_manifest
from extract.options import option, seed_option

GENDERS = ("female", "male")


class ProbeDataError(UserError, ValueError):
    """A sample that cannot be drawn as asked."""


def _counts(value: str) -> tuple[int, int]:
    parts = value.split(",")
    if len(parts) != 2 or not all(part.strip().isdigit() for part in parts):
        raise argparse.ArgumentTypeError(f"{value!r}: expected FEMALE,MALE segment counts, e.g. 2514,2546")
    return int(parts[0]), int(parts[1])


def sample_probe_data(pool: list[Utterance], train: tuple[int, int], dev: tuple[int, int], test: list[Utterance], seed: int = 0) -> list[Utterance]:
    """The rows of train, dev and test (see the module docstring), each with its ``split``."""
    if 0 in train:
        raise ProbeDataError(f"--train {train[0]},{train[1]}: a probe trains on both genders; ask for at least one segment of each")
    rng = np.random.default_rng(seed)
    chosen: list[Utterance] = []
    for gender, n_train, n_dev in zip(GENDERS, train, dev):
        rows = [row for row in pool if row.gender == gender]
        speakers = sorted({row.speaker for row in rows})
        order = [speakers[i] for i in rng.permutation(len(speakers))]
        n_dev_speakers = int(round(len(order) * n_dev / (n_dev + n_train))) if n_dev + n_train else 0
        if n_dev and not n_dev_speakers:
            n_dev_speakers = 1
        dev_speakers = set(order[:n_dev_speakers])
        for split, count, members in (
            ("dev", n_dev, [row for row in rows if row.speaker in dev_speakers]),
            ("train", n_train, [row for row in rows if row.speaker not in dev_speakers]),
        ):
            if count > len(members):
                raise ProbeDataError(
                    f"--{split} asks for {count} {gender} segments; the {len(dev_speakers) if split == 'dev' else len(order) - len(dev_speakers)} "
                    f"{gender} speakers drawn for {split} hold {len(members)}: ask for fewer"
                )
            picked = sorted(rng.choice(len(members), size=count, replace=False).tolist())
            chosen += [_with_split(members[i], split) for i in picked]
    sampled = {row.speaker for row in chosen}
    seen = {row.id for row in chosen}
    for row in test:
        if row.speaker in sampled:
            raise ProbeDataError(f"test segment {row.id}: its speaker {row.speaker} is also in the train/dev sample; give test manifests of other speakers")
        if row.id in seen:
            raise ProbeDataError(f"segment id {row.id} is given twice; the test manifests must not repeat the sample or each other")
        seen.add(row.id)
        chosen.append(_with_split(row, "test"))
    return chosen


def _with_split(row: Utterance, split: str) -> Utterance:
    from dataclasses import replace

    return replace(row, split=split)


@dataclass(frozen=True, kw_only=True)
class ProbeDataOptions:
    """How many segments of each gender train and dev draw, and the seed that draws them."""

    train: tuple[int, int] = option(help="FEMALE,MALE training segments (Fucci et al.: 2514,2546)", parse=_counts)
    dev: tuple[int, int] = option(help="FEMALE,MALE dev segments, of speakers not in train (Fucci et al.: 539,539)", parse=_counts)
    seed: int = seed_option("seed of the speakers' division and of the segments drawn")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--from", dest="source", required=True, type=Path, help="manifest the train and dev segments are drawn from")
    input_argument(parser, "--test", nargs="+", action="extend", type=Path, default=[], help="manifests whose every segment is the test split")
    add_options(parser, ProbeDataOptions)
    output_argument(parser, "--out", required=True, type=Path, help="the manifest written")
    return parser


def _run(args: argparse.Namespace) -> int:
    options = from_args(ProbeDataOptions, args)
    test = [row for path in args.test for row in read_manifest(path)]
    rows = sample_probe_data(read_manifest(args.source), options.train, options.dev, test, options.seed)
    write_manifest(args.out, rows)
    counts = {split: {gender: sum(r.split == split and r.gender == gender for r in rows) for gender in GENDERS} for split in ("train", "dev", "test")}
    described = "; ".join(f"{split} {c['female']} female + {c['male']} male" for split, c in counts.items())
    print(f"[probe_data] {described} (seed {options.seed})")
    print(f"[probe_data] wrote {args.out}")
    return 0


main = command_main(build_parser, _run, module=__name__)
