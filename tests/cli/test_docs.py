"""The documentation cannot rot silently: the README stays one screen, and every relative link of
README.md and docs/ points to a file that exists and, into a Markdown file, to a heading it has.

``make docs`` (``mkdocs build --strict``) checks the site's own links and anchors too; this test runs
without MkDocs and also covers the README, which is not a page of the site."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from tests.paths import CHECKOUT

ROOT = CHECKOUT
README_MAX_LINES = 300
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def prose_lines(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks (a link or heading in code is not one)."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc extension) gives a heading."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings; repeated headings get -1, -2, ... as in MkDocs."""
    seen: set[str] = set()
    for line in prose_lines(path):
        match = HEADING.match(line)
        if match:
            base = candidate = slug(match.group(2))
            n = 0
            while candidate in seen:
                n += 1
                candidate = f"{base}_{n}"
            seen.add(candidate)
    return seen


def relative_links(path: Path) -> list[str]:
    return [target for line in prose_lines(path) for target in LINK.findall(line) if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in relative_links(path):
        file_part, _, fragment = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target} (no heading with anchor #{fragment})")
    return broken


def test_the_readme_is_one_screen():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/ (at most {README_MAX_LINES})"


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    assert broken_links(path) == [], f"{path.relative_to(ROOT)}: broken links"


def test_the_readme_reaches_every_stage_page_and_its_reference():
    """Two clicks from the README to any stage: every stage page is linked from the README, and every
    stage page links to its section of the command-line reference."""
    readme_targets = {(ROOT / t.partition("#")[0]).resolve() for t in relative_links(ROOT / "README.md")}
    for page in sorted((ROOT / "docs" / "stages").glob("*.md")):
        assert page.resolve() in readme_targets, f"README.md does not link {page.relative_to(ROOT)}"
        cli_sections = [t for t in relative_links(page) if t.partition("#")[0].endswith("cli.md") and "#" in t]
        assert cli_sections, f"{page.relative_to(ROOT)} does not link its section of docs/cli.md"


def test_the_link_checker_finds_a_missing_file_and_a_missing_anchor(tmp_path):
    (tmp_path / "a.md").write_text("# Title\n\n## Store format\n\n```bash\n# not a heading\n```\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#store-format) [gone](missing.md) [bad anchor](a.md#not-a-heading) [web](https://example.org/x.md)\n```\n[in code](nowhere.md)\n```\n"
    )
    assert broken_links(page) == ["missing.md (no such file)", "a.md#not-a-heading (no heading with anchor #not-a-heading)"]


def test_slugs_match_the_anchors_mkdocs_writes():
    assert slug("python -m experiments.study run") == "python-m-experimentsstudy-run"
    assert slug("asr_gap") == "asr_gap"
    assert slug("Probes: the CPU solver") == "probes-the-cpu-solver"
    assert slug("MuST-SHE") == "must-she"
    assert slug("Speaker ids by clustering (§3)") == "speaker-ids-by-clustering-3"
