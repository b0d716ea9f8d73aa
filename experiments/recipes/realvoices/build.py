"""Build the real-voice corpus: fetch, transcribe, select, decode, write a manifest and a card.

Under ``--out DIR``::

    manifest.jsonl   one utterance per clip (the manifest contract; licence, credit, package and
                     transcript quality under ``extra``); audio paths point into the cache
    card.json        per-voice counts, credits and settings
    CARD.md          the same for people: names, packages, licences, credit lines, counts, caveats

Decoded audio lives in ``cache_dir()/realvoices/wav/VOICE/PACKAGE-VERSION/CLIP.wav`` (16 kHz mono
PCM), shared by every DIR and never in git. A rerun skips every clip already decoded, so an interrupted build
resumes; the selection depends only on the seed, the voice and the package contents.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from experiments.analysis.acoustic import first_pass_f0
from experiments.recipes.realvoices.decode import source_seconds, write_wav_16k
from experiments.recipes.realvoices.fetch import realvoices_cache, unpack
from experiments.recipes.realvoices.sources import VOICES, Voice, voices_for
from experiments.recipes.realvoices.transcripts import parse_fillets_dialogs, read_asterisk_transcripts, transcript, tuxpaint_line
from extract.audio import MAX_SECONDS, AudioError, load_audio
from extract.errors import UserError
from extract.manifest import Utterance, write_manifest

MIN_SECONDS = 0.3  # shorter files are clicks and cut words
LONGEST_SECONDS = MAX_SECONDS["asr"]  # Whisper's window: a longer prompt would be cut by every ASR stage
# Read speech runs at 8-20 characters a second (the median voice here: 12); a transcript that needs
# more than this was written for another recording (Tux Paint's Greek and Belarusian descriptions
# grew after they were recorded; a few prompts share a key with a longer text).
MAX_CHARACTERS_PER_SECOND = 30.0
FIRST_SPLIT_GENDERS = ("female", "male")


class RealVoicesError(UserError, RuntimeError):
    """The packages do not hold what the voice table expects (a changed layout or version)."""


@dataclass(frozen=True)
class Clip:
    """One packaged recording with its transcript."""

    voice: Voice
    key: str  # path under the voice's audio folder, without the suffix: "digits/10"
    source: Path
    text: str
    quality: str
    seconds: float  # from the file's size or header

    @property
    def id(self) -> str:
        return f"{self.voice.key}.{self.key.replace('/', '.')}"


@dataclass
class VoiceClips:
    voice: Voice
    version: str  # of the package as fetched
    available: list[Clip]
    left_out: Counter = field(default_factory=Counter)  # why files were not candidates, by reason


def _clip_files(voice: Voice, root: Path) -> list[tuple[str, Path]]:
    base = root / voice.audio_root
    if not base.is_dir():
        raise RealVoicesError(f"{voice.package} has no folder {voice.audio_root} (layout changed?); the voice table in sources.py needs updating")
    files = sorted(path for path in base.rglob(f"*{voice.suffix}") if path.is_file() and not path.is_symlink())
    return [(path.relative_to(base).as_posix().removesuffix(voice.suffix), path) for path in files]


def _transcript_lookup(voice: Voice, roots: dict[str, Path]) -> Callable[[str], tuple[str | None, str | None]]:
    """Clip key -> (its transcript line or None, the speaker tag its source gives or None: the dialog
    font of a Fish Fillets line, nothing for the other sources)."""
    if voice.transcripts == "asterisk":
        lines = read_asterisk_transcripts(roots[voice.transcript_package] / voice.transcript_file)
        return lambda key: (lines.get(key), None)
    if voice.transcripts == "fillets":
        return _fillets_lookup(voice, roots[voice.transcript_package] / voice.transcript_file)
    base = roots[voice.package] / voice.audio_root

    def tuxpaint(key: str) -> tuple[str | None, None]:
        description = base / f"{key}.txt"
        return (tuxpaint_line(description.read_text(encoding="utf-8"), voice.transcript_key or voice.language) if description.is_file() else None), None

    return tuxpaint


def _fillets_lookup(voice: Voice, scripts: Path) -> Callable[[str], tuple[str | None, str | None]]:
    """A Fish Fillets clip ``LEVEL/LANG/ID`` -> its line in ``scripts/LEVEL/dialogs_LANG.lua`` and the line's font."""
    levels: dict[str, dict[str, tuple[str, str]]] = {}

    def lookup(key: str) -> tuple[str | None, str | None]:
        level, _, name = key.split("/", 2)
        if level not in levels:
            dialogs = scripts / level / f"dialogs_{voice.language}.lua"
            levels[level] = parse_fillets_dialogs(dialogs.read_text(encoding="utf-8")) if dialogs.is_file() else {}
        font, line = levels[level].get(name, (None, None))
        return line, font

    return lookup


def list_clips(voice: Voice, roots: dict[str, Path], version: str) -> VoiceClips:
    """Every clip of ``voice`` that has a spoken transcript and a usable length, in key order."""
    lookup = _transcript_lookup(voice, roots)
    result = VoiceClips(voice, version, [])
    for key, path in _clip_files(voice, roots[voice.package]):
        line, tag = lookup(key)
        if voice.speaker_tag and tag is not None and tag != voice.speaker_tag:
            result.left_out["another speaker's line (its dialog font)"] += 1
            continue
        if line is None:
            result.left_out["no transcript"] += 1
            continue
        spoken = transcript(line, voice.text_quality)
        if spoken is None:
            result.left_out["annotation only (a tone or a silence)"] += 1
            continue
        seconds = source_seconds(path)
        if seconds < MIN_SECONDS:
            result.left_out[f"shorter than {MIN_SECONDS} s"] += 1
        elif seconds > LONGEST_SECONDS:
            result.left_out[f"longer than {LONGEST_SECONDS:.0f} s"] += 1
        elif len(spoken.text) > MAX_CHARACTERS_PER_SECOND * seconds:
            result.left_out[f"text too long for the audio (over {MAX_CHARACTERS_PER_SECOND:.0f} characters a second)"] += 1
        else:
            result.available.append(Clip(voice, key, path, spoken.text, spoken.quality, seconds))
    if not result.available:
        raise RealVoicesError(f"{voice.package} {version}: no clip of {voice.name} ({voice.language}) has a transcript ({dict(result.left_out)})")
    return result


def seeded_order(clips: list[Clip], seed: int, voice_key: str) -> list[Clip]:
    """``clips`` in a permutation drawn from ``seed`` and the voice alone: adding or removing other
    voices or languages leaves a voice's selection unchanged."""
    digest = hashlib.sha256(f"{seed}/{voice_key}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    return [clips[i] for i in rng.permutation(len(clips))]


def assign_splits(voices: tuple[Voice, ...], seed: int) -> dict[str, str]:
    """Speaker-disjoint splits: per gender, a seeded permutation of the speakers gives one test and
    one dev speaker, the rest train. With fewer than three speakers of either gender no fixed split
    holds both genders in each part: every speaker then gets the empty split (leave one speaker
    out instead)."""
    gender_of = {voice.speaker: voice.gender for voice in voices}
    speakers = {gender: sorted(s for s, g in gender_of.items() if g == gender) for gender in FIRST_SPLIT_GENDERS}
    if any(len(names) < 3 for names in speakers.values()) or set(gender_of.values()) - set(FIRST_SPLIT_GENDERS):
        return dict.fromkeys(gender_of, "")
    rng = np.random.default_rng(seed)
    splits = dict.fromkeys(gender_of, "train")
    for gender in FIRST_SPLIT_GENDERS:
        order = [speakers[gender][i] for i in rng.permutation(len(speakers[gender]))]
        splits.update({order[0]: "test", order[1]: "dev"})
    return splits


@dataclass
class Selected:
    clip: Clip
    wav: Path
    seconds: float


def decode_selection(voice_clips: VoiceClips, per_speaker: int | None, seed: int, wav_root: Path, bar) -> tuple[list[Selected], list[str]]:
    """The first ``per_speaker`` clips of the seeded order that decode (all when None), in key
    order, and the problems of those that did not."""
    chosen, problems = [], []
    wanted = len(voice_clips.available) if per_speaker is None else per_speaker
    for clip in seeded_order(voice_clips.available, seed, voice_clips.voice.key):
        if len(chosen) == wanted:
            break
        wav = wav_root / clip.voice.key / re.sub(r"[^\w.+-]", "_", voice_clips.version) / f"{clip.key}.wav"
        try:
            chosen.append(Selected(clip, wav, write_wav_16k(clip.source, wav)))
        except AudioError as error:
            problems.append(str(error))
        bar.update()
    return sorted(chosen, key=lambda selected: selected.clip.key), problems


def utterance(selected: Selected, version: str, split: str, dataset: str | None = None) -> Utterance:
    """The manifest row of one clip; ``dataset``: what the row records as its dataset (default: the
    voice's source package family, which ``extra.source`` keeps either way)."""
    clip, voice = selected.clip, selected.clip.voice
    return Utterance(
        id=clip.id,
        audio=str(selected.wav),
        language=voice.language,
        text=clip.text,
        gender=voice.gender,
        speaker=voice.speaker,
        split=split,
        dataset=dataset or voice.dataset,
        duration=round(selected.seconds, 3),
        extra={
            "source": voice.dataset,
            "voice": voice.key,
            "name": voice.name,
            "package": voice.package,
            "package_version": version,
            "source_file": f"{voice.audio_root}/{clip.key}{voice.suffix}",
            "source_rate": voice.sample_rate,
            "licence": voice.licence,
            "credit": voice.credit,
            "text_quality": clip.quality,
            "gender_basis": voice.gender_basis,
            "synthetic": False,
            **({"locale": voice.locale} if voice.locale else {}),  # only where the package states it (sources.py)
        },
    )


def voice_row(voice_clips: VoiceClips, selected: list[Selected], problems: list[str], split: str) -> dict:
    """The card's row for one voice: who, where from, under which licence, how many clips, and the
    median of Praat's F0 (60-700 Hz) over the voiced frames of its clips."""
    voice = voice_clips.voice
    f0 = np.concatenate([first_pass_f0(load_audio(s.wav).samples) for s in selected] or [np.zeros(0)])
    return {
        "voice": voice.key,
        "name": voice.name,
        "speaker": voice.speaker,
        "language": voice.language,
        "gender": voice.gender,
        "gender_basis": voice.gender_basis,
        "gender_source": voice.gender_source,
        "packages": list(voice.packages),
        "version": voice_clips.version,
        "version_in_table": voice.version,
        "dataset": voice.dataset,
        "licence": voice.licence,
        "credit": voice.credit,
        "text_quality": voice.text_quality,
        "source_rate": voice.sample_rate,
        "channel": voice.channel,
        "split": split,
        "available": len(voice_clips.available),
        "clips": len(selected),
        "seconds": round(sum(s.seconds for s in selected), 1),
        "median_f0_hz": round(float(np.median(f0)), 1) if len(f0) else None,
        "left_out": dict(sorted(voice_clips.left_out.items())),
        "undecodable": problems,
    }


def build_realvoices(
    out: Path,
    languages: tuple[str, ...] | None = None,
    per_speaker: int | None = None,
    seed: int = 0,
    cache: Path | None = None,
    voices: tuple[Voice, ...] = VOICES,
    show_progress: bool = True,
    dataset: str | None = None,
) -> list[dict]:
    """Write ``out/manifest.jsonl``, ``out/card.json`` and ``out/CARD.md``; returns the card's voice rows.
    ``dataset``: the name every row records as its dataset (a study's corpus name, e.g. ``realvoices``);
    by default each voice's source (``asterisk``, ``tuxpaint``, ...), kept in ``extra.source`` either way."""
    from tqdm.auto import tqdm

    from experiments.recipes.realvoices.card import write_card

    if per_speaker is not None and per_speaker < 1:
        raise ValueError(f"per_speaker must be at least 1, got {per_speaker}")
    cache = cache or realvoices_cache()
    chosen_voices = voices_for(languages, voices)
    say = print if show_progress else (lambda _message: None)
    per = "all" if per_speaker is None else per_speaker
    say(f"real voices: {len(chosen_voices)} voices in {', '.join(sorted({v.language for v in chosen_voices}))}, {per} clips per voice, seed {seed}")
    say(f"packages and 16 kHz audio cached in {cache}")
    unpacked = {}
    for package in dict.fromkeys(package for voice in chosen_voices for package in voice.packages):
        say(f"package {package}")
        unpacked[package] = unpack(package, cache)
    roots = {name: package.root for name, package in unpacked.items()}
    listed = [list_clips(voice, roots, unpacked[voice.package].version) for voice in chosen_voices]
    splits = assign_splits(chosen_voices, seed)
    total = sum(len(v.available) if per_speaker is None else min(per_speaker, len(v.available)) for v in listed)
    utterances, rows = [], []
    with tqdm(total=total, desc="decoding real voices to 16 kHz", unit="clip", disable=not show_progress) as bar:
        for voice_clips in listed:
            selected, problems = decode_selection(voice_clips, per_speaker, seed, cache / "wav", bar)
            split = splits[voice_clips.voice.speaker]
            utterances += [utterance(s, voice_clips.version, split, dataset) for s in selected]
            rows.append(voice_row(voice_clips, selected, problems, split))
    out.mkdir(parents=True, exist_ok=True)
    write_manifest(out / "manifest.jsonl", utterances)
    settings = {"languages": sorted({v.language for v in chosen_voices}), "per_speaker": per_speaker, "seed": seed, "dataset": dataset}
    write_card(out, rows, settings)
    return rows
