"""The real-voice corpus card: who speaks, from which package, under which licence, with which credit, and how many clips."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from extract.diskfull import write_text_whole

CAVEAT = (
    "**Few voices, confounded.** Each language has one to three voices, and speaker, source (telephone "
    "prompts, children's software), language and channel (G.722, 8 kHz GSM or PCM, 44.1 kHz Ogg) move "
    "together: a probe or a gap measured here can reflect a voice, a package or a codec rather than gender. "
    "Report numbers per voice and across held-out speakers, never as a population estimate."
)

GENDER_NOTE = (
    "Gender labels come from the packages, never from the audio: *stated* where Debian's folder name says it "
    "(`en_US_f_Allison`), *given name* where the package credits a named narrator without stating a gender "
    "(the label is read from the name). Voices nobody is credited for are left out."
)

QUALITY_NOTE = (
    "Transcripts: *exact* is asterisk's own list of what each prompt says; *approximate* may differ in a word "
    "(Tux Paint's translated descriptions, re-translated after recording; bracketed annotations removed); "
    "*meaning* is another translation of the same prompt (word error rates against it measure nothing)."
)


def language_rows(rows: list[dict]) -> list[dict]:
    by_language = defaultdict(list)
    for row in rows:
        by_language[row["language"]].append(row)
    return [
        {
            "language": language,
            "voices": len(group),
            "female": sum(r["gender"] == "female" for r in group),
            "male": sum(r["gender"] == "male" for r in group),
            "clips": sum(r["clips"] for r in group),
            "seconds": round(sum(r["seconds"] for r in group), 1),
        }
        for language, group in sorted(by_language.items())
    ]


def _f0(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}"


def card_markdown(rows: list[dict], settings: dict) -> str:
    speakers = {row["speaker"]: row["gender"] for row in rows}
    women = sum(gender == "female" for gender in speakers.values())
    per = "all" if settings["per_speaker"] is None else settings["per_speaker"]
    lines = [
        "# Real voices: corpus card",
        "",
        f"{sum(r['clips'] for r in rows)} clips of {len(rows)} voices ({len(speakers)} speakers: {women} female, "
        f"{len(speakers) - women} male) in {len({r['language'] for r in rows})} languages, from Debian packages; "
        f"{per} clips per voice, seed {settings['seed']}.",
        "",
        CAVEAT,
        "",
        GENDER_NOTE,
        "",
        QUALITY_NOTE,
        "",
        "## Voices",
        "",
        "| voice | language | gender (how known) | package (version) | licence | transcripts | clips (of) | seconds | median F0 Hz | split |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['language']} | {r['gender']} ({r['gender_basis']}) | {' + '.join(r['packages'])} ({r['version']}) "
            f"| {r['licence']} | {r['text_quality']} | {r['clips']} ({r['available']}) | {r['seconds']:.0f} | {_f0(r['median_f0_hz'])} "
            f"| {r['split'] or '-'} |"
        )
    lines += ["", "## Credits", ""]
    lines += [f"- {r['name']} ({r['language']}, `{r['packages'][0]}`, {r['licence']}): {r['credit']}. Gender: {r['gender_source']}." for r in rows]
    lines += ["", "## By language", "", "| language | voices | female | male | clips | seconds |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['language']} | {r['voices']} | {r['female']} | {r['male']} | {r['clips']} | {r['seconds']:.0f} |" for r in language_rows(rows)]
    lines += ["", "## Left out", ""]
    for r in rows:
        reasons = ", ".join(f"{count} {reason}" for reason, count in r["left_out"].items())
        undecodable = f"; {len(r['undecodable'])} undecodable, e.g. {r['undecodable'][0]}" if r["undecodable"] else ""
        lines.append(f"- {r['name']} ({r['language']}): {reasons or 'none'}{undecodable}")
    if any(r["version"] != r["version_in_table"] for r in rows):
        lines += [
            "",
            "Package versions differ from the ones the voice table was written from: "
            + ", ".join(f"{r['packages'][0]} {r['version']} (table: {r['version_in_table']})" for r in rows if r["version"] != r["version_in_table"])
            + ".",
        ]
    if not any(r["split"] for r in rows):
        lines += ["", "No fixed split: fewer than three speakers of a gender. Evaluate by leaving one speaker out."]
    return "\n".join(lines) + "\n"


def write_card(out: Path, rows: list[dict], settings: dict) -> None:
    card = {"settings": settings, "voices": rows, "languages": language_rows(rows)}
    write_text_whole(out / "card.json", json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    write_text_whole(out / "CARD.md", card_markdown(rows, settings))
