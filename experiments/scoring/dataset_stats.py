"""The statistics table of Attanasio et al. 2024 (appendix tables 5-7) per dataset and language
(``python -m experiments.dataset_stats``).

Columns: records, seconds (mean ± sd), tokens of the transcript by the Whisper tokenizer (mean ±
sd), and for each gender the number of speakers and the Gini index of records per speaker (0: every
speaker has as many records; towards 1: a few speakers hold most records).
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import soundfile

from extract.manifest import GENDERS, Utterance


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
            "dataset": dataset,
            "language": language,
            "records": len(group),
            "seconds_mean": float(seconds.mean()),
            "seconds_sd": float(seconds.std(ddof=1)) if len(group) > 1 else 0.0,
            "tokens_mean": float(tokens.mean()),
            "tokens_sd": float(tokens.std(ddof=1)) if len(group) > 1 else 0.0,
        }
        for gender in GENDERS:
            per_speaker = Counter(u.speaker for u in group if u.gender == gender)
            row[f"speakers_{gender}"] = len(per_speaker)
            row[f"gini_{gender}"] = gini(list(per_speaker.values())) if per_speaker else float("nan")
        rows.append(row)
    return rows


def whisper_token_counter(tokenizer_name: str):
    """``count_tokens`` by a Whisper tokenizer: a hub id, a folder, or ``bundled-<size>``."""
    from transformers import AutoTokenizer  # here, not at the top: transformers and torch take seconds to import

    from extract.weights import bundled_whisper  # imports torch

    if tokenizer_name.startswith("bundled-"):
        tokenizer_name = str(bundled_whisper(tokenizer_name.removeprefix("bundled-")))
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_name)
    return lambda text: len(tokenizer(text, add_special_tokens=False).input_ids)


def markdown(rows: list[dict]) -> str:
    genders = [g for g in GENDERS if any(row[f"speakers_{g}"] for row in rows)]
    header = ["Dataset", "Lang", "# records", "Seconds", "# Tokens"] + [f"{label} {g}" for g in genders for label in ("# speakers", "Gini")]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [
            row["dataset"],
            row["language"],
            str(row["records"]),
            f"{row['seconds_mean']:.2f} ± {row['seconds_sd']:.2f}",
            f"{row['tokens_mean']:.2f} ± {row['tokens_sd']:.2f}",
        ]
        for g in genders:
            cells += [str(row[f"speakers_{g}"]), "" if np.isnan(row[f"gini_{g}"]) else f"{row[f'gini_{g}']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
