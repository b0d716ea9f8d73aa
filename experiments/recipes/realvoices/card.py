"""The real-voice corpus card: who speaks, from which package, under which licence, with which credit, and how many clips."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from experiments.reports.markdown import markdown_templates
from extract.diskfull import write_text_whole


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


def card_markdown(rows: list[dict], settings: dict) -> str:
    speakers = {row["speaker"]: row["gender"] for row in rows}
    versions_differ = [f"{r['packages'][0]} {r['version']} (table: {r['version_in_table']})" for r in rows if r["version"] != r["version_in_table"]]
    return (
        markdown_templates("experiments.recipes.realvoices")
        .get_template("CARD.md.j2")
        .render(
            **dict(
                rows=rows, settings=settings, clips=sum(r["clips"] for r in rows), speakers=len(speakers), languages_count=len({r["language"] for r in rows})
            ),
            **dict(women=sum(gender == "female" for gender in speakers.values()), languages=language_rows(rows), versions_differ=versions_differ),
        )
    )


def write_card(out: Path, rows: list[dict], settings: dict) -> None:
    card = {"settings": settings, "voices": rows, "languages": language_rows(rows)}
    write_text_whole(out / "card.json", json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    write_text_whole(out / "CARD.md", card_markdown(rows, settings))
