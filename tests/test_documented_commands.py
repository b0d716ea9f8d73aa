"""Every command the papers' pages document parses with its stage's own parser, so a renamed or
missing flag fails here rather than in a reader's shell (issue 29, item 4).

The commands are the ``python -m experiments.X ...`` and ``speech-gender X ...`` lines of the
```` ```bash ```` blocks of ``docs/papers.md``, ``docs/getting-started.md`` and
``experiments/studies/README.md`` (continuation lines joined, each command of a ``for`` loop or a
``&&`` chain on its own). A ``for`` loop's variable takes its first value; other shell variables
stay as they are written (``$DATA`` is a value like any other). Parsing needs no file and no model: it checks the stage, the subcommand, every flag, the
choices and the required arguments. The papers' study files themselves are planned with
``--dry-run`` against placeholder manifests in tests/test_study.py.
"""

import re
import shlex
from pathlib import Path

import pytest

from experiments.stages import parser_of, stages

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = (
    "docs/papers.md",
    "docs/getting-started.md",
    "experiments/studies/README.md",
    "README.md",
    "docs/stages/results.md",
    "docs/stages/study.md",
    "docs/real-voices.md",
)
SEPARATORS = {";", "&&", "||", "|", ">", ">>", "<", "(", ")", "&"}
SHELL_WORDS = {"do", "then", "else", "done", "fi"}


def documented_commands(path: Path) -> list[tuple[int, list[str]]]:
    """(line number, argv from the stage name on) of each command in the bash blocks of ``path``."""
    text = path.read_text(encoding="utf-8")
    found = []
    for block in re.finditer(r"```bash\n(.*?)```", text, re.S):
        first_line = text[: block.start(1)].count("\n") + 1
        lines = block.group(1).split("\n")
        number, loop_values = 0, {}
        while number < len(lines):
            start, line = number, lines[number]
            while line.endswith("\\") and number + 1 < len(lines):
                number += 1
                line = line[:-1] + " " + lines[number].strip()
            number += 1
            if line.lstrip().startswith("#") or "<<" in line:
                continue
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>()")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            tokens = list(lexer)
            segments, current = [], []
            for token in tokens:
                if token in SEPARATORS:
                    segments.append(current)
                    current = []
                else:
                    current.append(token)
            segments.append(current)
            for segment in segments:
                while segment and segment[0] in SHELL_WORDS:
                    segment = segment[1:]
                if segment[:1] == ["for"] and len(segment) > 3 and segment[2] == "in":
                    loop_values[segment[1]] = segment[3]  # a loop's variable takes its first value
                segment = [_substituted(token, loop_values) for token in segment]
                if segment[:2] == ["python", "-m"] and len(segment) > 2 and segment[2].startswith("experiments."):
                    found.append((first_line + start, [segment[2], *segment[3:]]))
                elif segment[:1] == ["speech-gender"] and len(segment) > 1:
                    found.append((first_line + start, [f"experiments.{segment[1]}", *segment[2:]]))
    return found


def _substituted(token: str, values: dict[str, str]) -> str:
    """``$name`` and ``${name}`` of a loop variable replaced by its value; other variables left as written."""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda match: values.get(match.group(1) or match.group(2), match.group(0)), token)


def _stage(module: str):
    by_module = {stage.module: stage for stage in stages()}
    by_name = {f"experiments.{stage.name}": stage for stage in stages()}
    return by_module.get(module) or by_name.get(module)


COMMANDS = [(document, line, argv) for document in DOCUMENTS for line, argv in documented_commands(ROOT / document)]


def test_the_pages_document_commands_of_every_paper_stage():
    modules = {argv[0] for _, _, argv in COMMANDS}
    assert {"experiments.manifest", "experiments.probe_data", "experiments.probe", "experiments.collect", "experiments.correlate"} <= modules
    assert {"experiments.study", "experiments.asr_gap", "experiments.mustshe", "experiments.extract", "experiments.feature_gaps"} <= modules
    assert len(COMMANDS) > 40


@pytest.mark.parametrize(("document", "line", "argv"), COMMANDS, ids=[f"{d}:{n}" for d, n, _ in COMMANDS])
def test_a_documented_command_parses(document, line, argv, capsys):
    stage = _stage(argv[0])
    assert stage is not None, f"{document}:{line}: no stage {argv[0]}"
    parser = parser_of(stage)
    try:
        parser.parse_args(argv[1:])
    except SystemExit as exit:
        message = capsys.readouterr().err.strip().splitlines()
        assert exit.code == 0, f"{document}:{line}: {' '.join(argv)}: {message[-1] if message else exit.code}"


def test_a_wrong_flag_in_a_page_fails(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text("```bash\nfor t in es; do\n  python -m experiments.collect --probes p.jsonl \\\n      --mustshe m.json --out o --gapz g.json\ndone\n```\n")
    ((line, argv),) = documented_commands(page)
    assert line == 3 and argv[-2:] == ["--gapz", "g.json"]
    with pytest.raises(SystemExit) as exit:
        parser_of(_stage(argv[0])).parse_args(argv[1:])
    assert exit.value.code == 2 and "--gapz" in capsys.readouterr().err
