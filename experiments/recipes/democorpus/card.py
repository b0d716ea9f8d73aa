"""The corpus card: per-voice intelligibility (bundled Whisper base WER), pitch and duration.

Synthetic voices differ in intelligibility for reasons that have nothing to do with gender; a
voice that whisper-base cannot understand would masquerade as a gender gap. The card publishes
every voice's numbers and the build fails if one is over the limit.
"""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np

from experiments.recipes.democorpus.pitch import median_f0
from experiments.reports.markdown import markdown_templates
from experiments.scoring.asr_metrics import corpus_error_rate, error_counts
from extract.audio import SAMPLE_RATE, AudioError, load_audio
from extract.errors import UserError
from extract.manifest import read_manifest

WER_LIMIT = 30.0


class VoiceTooHardError(UserError, RuntimeError):
    """A voice of the demo corpus is over the intelligibility limit."""


def transcribe_with_bundled_whisper(utterances, batch_size: int = 16, show_progress: bool = True) -> dict[str, str]:
    """Greedy transcripts by the bundled Whisper base, the source language forced; ``batch_size``
    utterances per batch (each is Whisper's 30 s window), through the one audio batch loop."""
    from tqdm.auto import tqdm

    from extract.families.generation import GenerationOptions
    from extract.runner import AudioLog, transcription_batches
    from extract.spec import ModelSpec, load_generator

    generator = load_generator(ModelSpec("whisper", "bundled-base", device="cpu"), GenerationOptions(num_beams=1, max_new_tokens=128))
    window = generator.extractor.input_seconds(0.0)
    hypotheses, log = {}, AudioLog()
    with tqdm(total=len(utterances), desc="transcribing with whisper-base", unit="utt", disable=not show_progress) as bar:
        for pairs in transcription_batches(generator, utterances, "asr", None, batch_seconds=batch_size * window, max_seconds=30.0, log=log, bar=bar):
            hypotheses.update((utterance.id, text) for utterance, text in pairs)
            bar.update(len(pairs))
    if log.skipped:
        first = log.skipped[0]
        problem = first["message"].removeprefix(f"{first['audio']}: ")
        raise AudioError(first["audio"], f"{problem} (one of {len(log.skipped)} unusable recording(s) in the demo corpus)")
    by_language = sorted(utterances, key=lambda utterance: utterance.language)  # stable: manifest order within a language
    return {utterance.id: hypotheses[utterance.id] for utterance in by_language}


def voice_table(utterances, hypotheses: dict[str, str]) -> list[dict]:
    """One row per (voice, language): WER, mean duration, median F0, gender, engine, split."""
    groups = defaultdict(list)
    for utterance in utterances:
        groups[(utterance.speaker, utterance.language)].append(utterance)
    rows = []
    for (speaker, language), group in sorted(groups.items()):
        counts = [error_counts(u.text, hypotheses[u.id], language) for u in group]
        audio = [load_audio(u.audio).samples for u in group]
        first = group[0]
        rows.append(
            {
                "voice": speaker,
                "language": language,
                "gender": first.gender,
                "engine": first.extra.get("engine", ""),
                "style": first.extra.get("voice", ""),
                "split": first.split,
                "utterances": len(group),
                "wer": round(corpus_error_rate(counts), 2),
                "mean_seconds": round(float(np.mean([len(a) / SAMPLE_RATE for a in audio])), 2),
                "median_f0_hz": round(float(np.nanmedian([median_f0(a, SAMPLE_RATE) for a in audio])), 1),
            }
        )
    return rows


def write_card(corpus, hypotheses: dict[str, str] | None = None, transcripts: str | None = None, show_progress: bool = True) -> list[dict]:
    """Measure every voice and write ``CARD.md`` and ``card.json``; raise :class:`VoiceTooHardError`
    when a voice is over :data:`WER_LIMIT`, before ``card.json`` is written (so a rerun measures again).

    ``hypotheses`` (id -> transcript, every manifest id) are the bundled Whisper base's transcripts
    made elsewhere, described by ``transcripts`` (the demo passes its study's); without them the
    corpus is transcribed here."""
    utterances = read_manifest(corpus.manifest)
    if hypotheses is None:
        hypotheses = transcribe_with_bundled_whisper(utterances, show_progress=show_progress)
        transcripts = "bundled whisper-base, float32, greedy, at most 128 new tokens, the language forced"
    missing = [utterance.id for utterance in utterances if utterance.id not in hypotheses]
    if missing:
        raise ValueError(f"{len(missing)} utterance(s) of {corpus.manifest} have no transcript in {transcripts}, e.g. {missing[0]!r}")
    rows = voice_table(utterances, hypotheses)
    worst = sorted(utterances, key=lambda u: -error_counts(u.text, hypotheses[u.id], u.language).errors)[:6]
    examples = [{"id": u.id, "reference": u.text, "hypothesis": hypotheses[u.id]} for u in worst]
    markdown = markdown_templates("experiments.recipes.democorpus").get_template("CARD.md.j2")
    (corpus.root / "CARD.md").write_text(markdown.render(rows=rows, examples=examples, transcripts=transcripts, wer_limit=WER_LIMIT), encoding="utf-8")
    over = [f"{r['voice']} ({r['language']}): {r['wer']:.1f} %" for r in rows if r["wer"] >= WER_LIMIT]
    if over:
        raise VoiceTooHardError(
            f"voices over the {WER_LIMIT:.0f} % whisper-base WER limit: {', '.join(over)}; "
            f"drop them from experiments/recipes/democorpus/voices.py (card: {corpus.root / 'CARD.md'})"
        )
    card = {"wer_limit": WER_LIMIT, "transcripts": transcripts, "voices": rows, "hypotheses": {u.id: hypotheses[u.id] for u in utterances}}
    corpus.card.write_text(json.dumps(card, indent=2, ensure_ascii=False))
    return rows
