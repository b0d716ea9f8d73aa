"""``python -m experiments.dataset_stats``: the statistics table of Attanasio et al. 2024 (appendix
tables 5-7) per dataset and language.

    python -m experiments.dataset_stats --manifest cv.jsonl fleurs.jsonl --out stats.csv [--tokenizer openai/whisper-large-v3]

Columns: records, seconds (mean ± sd), tokens of the transcript by the Whisper tokenizer (mean ±
sd), and for each gender the number of speakers and the Gini index of records per speaker (0: every
speaker has as many records; towards 1: a few speakers hold most records). Writes the CSV and a
Markdown version beside it (``.md``).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from extract.manifest import GENDERS, ManifestError, Utterance, iter_manifest


def gini(values) -> float:
    """Gini index of non-negative values: mean absolute difference over all ordered pairs divided by
    twice the mean (0 for equal values; (n - 1) / n when one holds everything)."""
    x = np.sort(np.asarray(values, dtype=float))
    if (x < 0).any():
        raise ValueError("the Gini index needs non-negative values")
    if x.size == 0 or x.sum() == 0:
        return float("nan")
    ranks = np.arange(1, x.size + 1)
    return float(2 * np.sum(ranks * x) / (x.size * x.sum()) - (x.size + 1) / x.size)


def utterance_seconds(utterance: Utterance) -> float:
    """Duration from the manifest, or from the audio file's header (no decoding)."""
    if utterance.duration is not None:
        return float(utterance.duration)
    import soundfile

    info = soundfile.info(utterance.audio)
    return info.frames / info.samplerate - (utterance.offset or 0.0)


def statistics(utterances: list[Utterance], count_tokens) -> list[dict]:
    """One row per (dataset, language); ``count_tokens(text) -> int``."""
    groups = defaultdict(list)
    for utterance in utterances:
        groups[(utterance.dataset or "", utterance.language)].append(utterance)
    rows = []
    for (dataset, language), group in sorted(groups.items()):
        seconds = np.array([utterance_seconds(u) for u in group])
        tokens = np.array([count_tokens(u.text or "") for u in group])
        row = {
            "dataset": dataset, "language": language, "records": len(group),
            "seconds_mean": float(seconds.mean()), "seconds_sd": float(seconds.std(ddof=1)) if len(group) > 1 else 0.0,
            "tokens_mean": float(tokens.mean()), "tokens_sd": float(tokens.std(ddof=1)) if len(group) > 1 else 0.0,
        }
        for gender in GENDERS:
            per_speaker = Counter(u.speaker for u in group if u.gender == gender)
            row[f"speakers_{gender}"] = len(per_speaker)
            row[f"gini_{gender}"] = gini(list(per_speaker.values())) if per_speaker else float("nan")
        rows.append(row)
    return rows


def whisper_token_counter(tokenizer_name: str):
    from transformers import AutoTokenizer

    if tokenizer_name.startswith("bundled-"):
        from extract.weights import bundled_whisper

        tokenizer_name = str(bundled_whisper(tokenizer_name.removeprefix("bundled-")))
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_name)
    return lambda text: len(tokenizer(text, add_special_tokens=False).input_ids)


def markdown(rows: list[dict]) -> str:
    genders = [g for g in GENDERS if any(row[f"speakers_{g}"] for row in rows)]
    header = ["Dataset", "Lang", "# records", "Seconds", "# Tokens"] + [f"{label} {g}" for g in genders for label in ("# speakers", "Gini")]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row["dataset"], row["language"], str(row["records"]), f"{row['seconds_mean']:.2f} ± {row['seconds_sd']:.2f}",
                 f"{row['tokens_mean']:.2f} ± {row['tokens_sd']:.2f}"]
        for g in genders:
            cells += [str(row[f"speakers_{g}"]), "" if np.isnan(row[f"gini_{g}"]) else f"{row[f'gini_{g}']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifest", required=True, nargs="+")
    parser.add_argument("--out", required=True, help="CSV path (a .md table is written beside it)")
    parser.add_argument("--tokenizer", default="bundled-base", help="Whisper tokenizer: hub id, folder, or bundled-base (the multilingual Whisper tokenizer)")
    args = parser.parse_args(argv)
    try:
        utterances = list(iter_manifest(args.manifest))
    except (ManifestError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"[dataset_stats] {len(utterances)} records from {len(args.manifest)} manifest(s); tokens by {args.tokenizer}")
    rows = statistics(utterances, whisper_token_counter(args.tokenizer))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    out.with_suffix(".md").write_text(markdown(rows))
    print(f"[dataset_stats] {len(rows)} dataset/language rows: {out} and {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
