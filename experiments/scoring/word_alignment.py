"""Word alignments of source sentences to their translations, in Pharaoh format.

Pharaoh format (what fast_align writes and reads): one line per sentence pair, ``i-j`` links
separated by spaces, ``i`` a 0-based index over the whitespace-separated tokens of the source and
``j`` one over the tokens of the translation. An empty line is a pair without links.

:func:`align` runs eflomal (Östling and Tiedemann 2016; a Bayesian HMM aligner with fertility,
maintained and on PyPI, offline) in both directions and symmetrises the two link sets:

- ``grow-diag-final-and`` (the default; Koehn et al. 2005, Moses' default): the intersection, grown
  with union links that neighbour an aligned point (diagonals included) and touch a word not yet
  aligned, then union links whose two words are both still unaligned. Higher recall than the
  intersection, which an entity needs: a word without a link is scored ``unknown``.
- ``intersection``: links both directions agree on; the most precise and the sparsest.
- ``forward``: source-to-target links only (WinoMT's setting with ``fast_align -d -o -v``).

Alignments are learnt from the sentence pairs themselves, as WinoMT did with fast_align. A few
hundred pairs align poorly: pass more parallel text (``extra`` pairs, aligned with the test pairs
and then dropped) or precomputed alignments instead. eflomal samples, so two runs may differ
slightly; the links used are saved beside every result.

Before alignment each token is lower-cased (eflomal does this itself) and stripped of leading and
trailing punctuation (``design.`` -> ``design``; a token of punctuation only is kept as it is), so
that token counts and therefore indices are those of the original whitespace split.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from extract.errors import UserError
from extract.manifest import ManifestError, iter_text_lines

Links = list[tuple[int, int]]
SYMMETRISATIONS = ("grow-diag-final-and", "intersection", "forward")
_PUNCTUATION = "\"'“”‘’«»„‚.,;:!?()[]{}…-–—¿¡"
_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


class AlignmentError(UserError, ValueError):
    """A Pharaoh line that does not parse, or links outside their sentence; the message names the file and line."""


def tokens(sentence: str) -> list[str]:
    """The whitespace tokens every index counts (WinoMT's entity index and Pharaoh links)."""
    return sentence.split()


def alignment_text(sentence: str) -> str:
    """``sentence`` as the aligner reads it: each whitespace token lower-cased and stripped of
    surrounding punctuation, one token per original token."""
    return " ".join(token.strip(_PUNCTUATION).lower() or token.lower() for token in tokens(sentence))


def format_links(links: Links) -> str:
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def parse_links(line: str, where: str) -> Links:
    """The links of one Pharaoh line; anything but ``i-j`` pairs of non-negative integers is an error naming ``where``."""
    links = []
    for pair in line.split():
        source, dash, target = pair.partition("-")
        if not dash or not source.isdigit() or not target.isdigit():
            raise AlignmentError(f"{where}: {pair!r} is not an i-j alignment link (0-based source and target token indices)")
        links.append((int(source), int(target)))
    return links


def check_links(links: Links, source_length: int, target_length: int, where: str) -> None:
    """Every link inside its sentences, or an error naming ``where`` and the first link outside."""
    for i, j in links:
        if i >= source_length or j >= target_length:
            raise AlignmentError(
                f"{where}: link {i}-{j} is outside the sentence pair ({source_length} source and {target_length} target tokens); "
                "indices are 0-based over whitespace-separated tokens"
            )


def read_alignments(path: str | Path, sources: Sequence[str], targets: Sequence[str]) -> list[Links]:
    """Precomputed Pharaoh alignments, one line per sentence pair: the line count must equal the
    number of pairs and every link must fall inside its pair; otherwise an error naming the file and line."""
    path = Path(path)
    lines = [(number, line.rstrip("\r\n")) for number, line in iter_text_lines(path)]
    if len(lines) != len(sources):
        where = f"{path}:{len(lines) + 1}" if len(lines) < len(sources) else f"{path}:{len(sources) + 1}"
        raise AlignmentError(f"{where}: {len(lines)} alignment line(s) for {len(sources)} sentence pairs; give one line per pair (empty for none)")
    alignments = []
    for (number, line), source, target in zip(lines, sources, targets):
        links = parse_links(line, f"{path}:{number}")
        check_links(links, len(tokens(source)), len(tokens(target)), f"{path}:{number}")
        alignments.append(links)
    return alignments


def write_alignments(path: str | Path, alignments: Sequence[Links]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(format_links(links) + "\n" for links in alignments), encoding="utf-8")
    return path


def grow_diag_final_and(forward: Links, reverse: Links) -> Links:
    """Koehn et al.'s symmetrisation of two directional link sets (both as source-target pairs)."""
    forward_set, reverse_set = set(forward), set(reverse)
    union = forward_set | reverse_set
    aligned = forward_set & reverse_set
    source_aligned = {i for i, _ in aligned}
    target_aligned = {j for _, j in aligned}
    grew = True
    while grew:
        grew = False
        for i, j in sorted(aligned):
            for di, dj in _NEIGHBOURS:
                link = (i + di, j + dj)
                if link in union and link not in aligned and (link[0] not in source_aligned or link[1] not in target_aligned):
                    aligned.add(link)
                    source_aligned.add(link[0])
                    target_aligned.add(link[1])
                    grew = True
    for directional in (forward_set, reverse_set):  # final-and: both words still unaligned
        for i, j in sorted(directional):
            if (i, j) not in aligned and i not in source_aligned and j not in target_aligned:
                aligned.add((i, j))
                source_aligned.add(i)
                target_aligned.add(j)
    return sorted(aligned)


def symmetrise(forward: Links, reverse: Links, method: str) -> Links:
    if method == "forward":
        return sorted(set(forward))
    if method == "intersection":
        return sorted(set(forward) & set(reverse))
    if method == "grow-diag-final-and":
        return grow_diag_final_and(forward, reverse)
    raise ValueError(f"unknown symmetrisation {method!r}; choose from {', '.join(SYMMETRISATIONS)}")


def align(
    sources: Sequence[str], targets: Sequence[str], method: str = "grow-diag-final-and", extra: Sequence[tuple[str, str]] = (), null_prior: float = 0.2
) -> list[Links]:
    """eflomal links for each (source, target) pair, symmetrised by ``method``. ``extra`` pairs are
    aligned together with them (more data, better links) and left out of the result."""
    import eflomal

    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources for {len(targets)} targets")
    if method not in SYMMETRISATIONS:
        raise ValueError(f"unknown symmetrisation {method!r}; choose from {', '.join(SYMMETRISATIONS)}")
    pairs = [*extra, *zip(sources, targets)]
    source_lines = [alignment_text(source) for source, _ in pairs]
    target_lines = [alignment_text(target) for _, target in pairs]
    with tempfile.TemporaryDirectory(prefix="winomt-align-") as folder:
        forward_path, reverse_path = os.path.join(folder, "forward"), os.path.join(folder, "reverse")
        eflomal.Aligner(null_prior=null_prior).align(source_lines, target_lines, links_filename_fwd=forward_path, links_filename_rev=reverse_path, quiet=True)
        forward = Path(forward_path).read_text(encoding="utf-8").splitlines()
        reverse = Path(reverse_path).read_text(encoding="utf-8").splitlines()
    if len(forward) != len(pairs) or len(reverse) != len(pairs):
        raise RuntimeError(f"eflomal wrote {len(forward)} forward and {len(reverse)} reverse lines for {len(pairs)} sentence pairs")
    links = [symmetrise(parse_links(f, "eflomal forward"), parse_links(r, "eflomal reverse"), method) for f, r in zip(forward, reverse)]
    return links[len(extra) :]


def read_parallel(path: str | Path) -> list[tuple[str, str]]:
    """Extra parallel text in fast_align's format: ``source ||| target`` per line; blank lines are skipped."""
    path = Path(path)
    pairs = []
    for number, line in iter_text_lines(path):
        if not line.strip():
            continue
        source, separator, target = line.rstrip("\r\n").partition(" ||| ")
        if not separator or not source.strip() or not target.strip():
            raise ManifestError(path, number, "expected 'source ||| target' (fast_align's parallel format) with both sides non-empty")
        pairs.append((source.strip(), target.strip()))
    if not pairs:
        raise ManifestError(path, None, "holds no sentence pairs")
    return pairs
