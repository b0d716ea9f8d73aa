"""Build the demo corpus: synthetic gender-labelled speech, reproducible from a seed, in the cache.

Layout under the corpus folder::

    audio/{speaker}/{language}-{index}.wav   16 kHz mono PCM
    manifest.jsonl                           ASR utterances (en + es), speaker-disjoint splits
    mustshe/MONOLINGUAL.es.tsv, mustshe/wav  MuST-SHE-format first-person sentences, en->es, read by the
                                             voices outside the train split (the probes never train on them)
    mustshe.jsonl                            the same as a manifest
    card.json, CARD.md                       per-voice WER, pitch and duration (corpus card)
    build.json                               seed and settings; written last, marks the corpus complete

The voices are synthetic: numbers computed on this corpus prove the pipeline, not a finding.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from experiments.recipes.democorpus.sentences import ASR_SENTENCES, MUSTSHE_SENTENCES, MUSTSHE_TARGET
from experiments.recipes.democorpus.voices import VOICES, Voice
from extract.audio import SAMPLE_RATE
from extract.corpora.must_she import format_gender_terms, must_she, write_definition
from extract.manifest import Utterance, write_manifest
from extract.paths import cache_dir

# 2: espeak-ng audio no longer depends on the clock or on earlier utterances; MuST-SHE read by held-out voices only
CORPUS_VERSION = 2


@dataclass(frozen=True)
class DemoCorpus:
    root: Path

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.jsonl"

    @property
    def mustshe_tsv(self) -> Path:
        return self.root / "mustshe" / f"MONOLINGUAL.{MUSTSHE_TARGET}.tsv"

    @property
    def mustshe_manifest(self) -> Path:
        return self.root / "mustshe.jsonl"

    @property
    def card(self) -> Path:
        return self.root / "card.json"

    @property
    def complete(self) -> bool:
        return (self.root / "build.json").is_file()


def default_root(seed: int = 0) -> Path:
    return cache_dir() / "corpora" / f"demo-v{CORPUS_VERSION}-seed{seed}"


def assign_splits(voices: tuple[Voice, ...], seed: int, languages: tuple[str, ...]) -> dict[str, str]:
    """Speaker-disjoint splits: per gender, a seeded permutation of the voices that speak every
    language gives one test and one dev voice (so each language has both); all others train."""
    rng = np.random.default_rng(seed)
    splits = {voice.name: "train" for voice in voices}
    for gender in sorted({voice.gender for voice in voices}):
        names = sorted(v.name for v in voices if v.gender == gender and set(languages) <= set(v.languages))
        if len(names) < 3:
            raise ValueError(f"need at least 3 {gender} voices speaking {languages} for train/dev/test, got {len(names)}")
        order = [names[i] for i in rng.permutation(len(names))]
        splits.update({order[0]: "test", order[1]: "dev"})
    return splits


def write_wav(path: Path, audio: np.ndarray, rate: int) -> float:
    """Write synthesized audio as 16 kHz 16-bit PCM, peak-normalised to 0.9 (quieter voices kept); returns its seconds."""
    import soundfile
    import soxr

    if rate != SAMPLE_RATE:
        audio = soxr.resample(audio, rate, SAMPLE_RATE)
    peak = float(np.max(np.abs(audio)))
    if peak == 0:
        raise RuntimeError(f"synthesizer produced silence for {path}")
    audio = 0.9 * audio / max(peak, 0.9)  # never clip; leave quiet voices as they are
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(path, audio.astype(np.float32), SAMPLE_RATE, subtype="PCM_16")
    return len(audio) / SAMPLE_RATE


def synthesis_progress(total: int, description: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=description, unit="utt", disable=not enabled)


@dataclass(frozen=True)
class Speech:
    """One recording to make: ``text`` read by ``voice`` at ``speed``, written to ``path``."""

    voice: Voice
    text: str
    language: str
    speed: float
    path: Path


def speak(speech: Speech) -> float:
    """Synthesizes and writes ``speech``; returns its seconds."""
    return write_wav(speech.path, *speech.voice.synthesize(speech.text, speech.language, speech.speed))


def default_workers() -> int:
    """Synthesis processes: one per core this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else max(1, os.cpu_count() or 1)


def speak_all(speeches: list[Speech], workers: int, bar) -> list[float]:
    """Every recording, in ``workers`` processes of one Kokoro thread each (in this process with
    one worker), ticking ``bar``; seconds in the order of ``speeches``. Nothing random is drawn
    here (the speeds are drawn before), so the recordings are the same bytes for any ``workers``.
    Why processes: Kokoro's onnxruntime session spends 1.45 times the CPU per sentence with two
    threads that it does with one (2-core CPU, 2026-11-27), and espeak-ng's subprocesses, one
    thread each, run beside Kokoro's sentences instead of after them."""
    if workers == 1:
        return [_ticked(speak(speech), bar) for speech in speeches]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from experiments.recipes.democorpus.kokoro import model_file, use_one_thread

    if any(speech.voice.engine == "kokoro" for speech in speeches):
        model_file()  # assembled here, once: the workers would race to write it into an empty cache
    # spawn, not fork: the caller may hold torch's OpenMP threads, which a forked child must not inherit
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=use_one_thread) as pool:
        return [_ticked(seconds, bar) for seconds in pool.map(speak, speeches)]


def _ticked(seconds: float, bar) -> float:
    bar.update()
    return seconds


def _synthesize_asr(root: Path, voices, splits, rng, sentences_per_language, show, workers: int) -> list[Utterance]:
    jobs = [
        (voice, language, index, text)
        for voice in voices
        for language in voice.languages
        for index, text in enumerate(ASR_SENTENCES[language][:sentences_per_language])
    ]
    speeches = [
        Speech(voice, text, language, float(rng.uniform(0.92, 1.08)), root / "audio" / voice.name / f"{language}-{index:02d}.wav")
        for voice, language, index, text in jobs
    ]
    with synthesis_progress(len(jobs), "synthesizing ASR utterances", show) as bar:
        durations = speak_all(speeches, workers, bar)
    return [
        Utterance(
            id=f"{speech.voice.name}-{speech.language}-{index:02d}",
            audio=str(speech.path.relative_to(root)),
            language=speech.language,
            text=speech.text,
            gender=speech.voice.gender,
            speaker=speech.voice.name,
            split=splits[speech.voice.name],
            dataset="demo",
            duration=round(duration, 3),
            extra={"engine": speech.voice.engine, "voice": speech.voice.describe(), "speed": round(speech.speed, 3), "synthetic": True},
        )
        for (_, _, index, _), speech, duration in zip(jobs, speeches, durations)
    ]


def _synthesize_mustshe(corpus: DemoCorpus, voices, splits, rng, count, show, workers: int) -> None:
    """Each sentence is read by one female voice (category 1F) and one male voice (1M), round robin
    over the dev and test voices: a probe trained on the train split is applied to MuST-SHE
    speakers it never saw, as in Fucci et al. (and ``probe --apply-to`` refuses shared speakers)."""
    by_gender = {gender: [v for v in voices if v.gender == gender and splits[v.name] != "train"] for gender in ("female", "male")}
    rows, speeches = [], []
    for index, sentence in enumerate(MUSTSHE_SENTENCES[:count]):
        for gender, category, pronoun in (("female", "1F", "She"), ("male", "1M", "He")):
            voice = by_gender[gender][index % len(by_gender[gender])]
            item = f"{MUSTSHE_TARGET}-{len(rows) + 1:04d}"
            speeches.append(Speech(voice, sentence.source, "en", float(rng.uniform(0.92, 1.08)), corpus.root / "mustshe" / "wav" / f"{item}.wav"))
            feminine = gender == "female"
            terms = format_gender_terms((f, m) if feminine else (m, f) for f, m in sentence.terms)
            rows.append(
                {
                    "ID": item,
                    "LANG": f"en-{MUSTSHE_TARGET}",
                    "TALK": voice.name,
                    "SRC": sentence.source,
                    "REF": sentence.feminine if feminine else sentence.masculine,
                    "WRONG-REF": sentence.masculine if feminine else sentence.feminine,
                    "SPEAKER": voice.name,
                    "GENDER": pronoun,
                    "CATEGORY": category,
                    "TEXT-CATEGORY": "A",
                    "GENDERTERMS": terms,
                }
            )
    with synthesis_progress(len(speeches), "synthesizing MuST-SHE utterances", show) as bar:
        speak_all(speeches, workers, bar)
    write_definition(corpus.mustshe_tsv, rows)


def build_demo_corpus(
    root: Path | None = None,
    seed: int = 0,
    sentences_per_language: int | None = None,
    mustshe_sentences: int | None = None,
    voices: tuple[Voice, ...] = VOICES,
    show_progress: bool = True,
    workers: int | None = None,
) -> DemoCorpus:
    """Build the corpus unless a complete one is already there; returns its paths. The corpus card is
    :func:`experiments.recipes.democorpus.card.write_card`'s (``experiments.demo`` writes it from its
    study's transcripts, so that the corpus is not transcribed twice).

    ``sentences_per_language`` and ``mustshe_sentences`` trim the corpus (tests use a few);
    ``workers``: synthesis processes (default: one per core; the recordings do not depend on it).
    """
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    corpus = DemoCorpus(Path(root) if root else default_root(seed))
    settings = {
        "version": CORPUS_VERSION,
        "seed": seed,
        "sentences_per_language": sentences_per_language,
        "mustshe_sentences": mustshe_sentences,
        "voices": [voice.name for voice in voices],
    }
    if not (corpus.complete and _same_build(json.loads((corpus.root / "build.json").read_text()), settings)):
        _synthesize(corpus, settings, voices, sentences_per_language, mustshe_sentences, show_progress, workers)
    return corpus


def _same_build(recorded: dict, settings: dict) -> bool:
    """Whether a corpus on disk was built with ``settings``; whether it was measured (has a card) is
    not a build setting (``measured`` in a ``build.json`` of earlier code is left aside)."""
    return {key: value for key, value in recorded.items() if key != "measured"} == settings


def _synthesize(corpus: DemoCorpus, settings: dict, voices, sentences_per_language, mustshe_sentences, show_progress: bool, workers: int) -> None:
    """Every recording and both manifests, from scratch; ``build.json`` last (it marks the corpus complete)."""
    seed = settings["seed"]
    shutil.rmtree(corpus.root, ignore_errors=True)
    corpus.root.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    splits = assign_splits(voices, seed, tuple(ASR_SENTENCES))
    utterances = _synthesize_asr(corpus.root, voices, splits, rng, sentences_per_language, show_progress, workers)
    write_manifest(corpus.manifest, utterances)
    _synthesize_mustshe(corpus, voices, splits, rng, mustshe_sentences, show_progress, workers)
    mustshe = must_she(corpus.mustshe_tsv)
    if mustshe.missing_audio:
        raise RuntimeError(f"MuST-SHE build lost audio: {mustshe.summary()}")
    # relative to the corpus folder, as the ASR manifest's: a cache moved elsewhere keeps its audio
    write_manifest(corpus.mustshe_manifest, [replace(u, audio=os.path.relpath(u.audio, corpus.root)) for u in mustshe.utterances])
    (corpus.root / "build.json").write_text(json.dumps(settings, indent=2))
