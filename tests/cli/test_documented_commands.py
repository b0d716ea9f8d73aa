"""Every command the papers' pages document parses with its stage's own parser, so a renamed or
missing flag fails here rather than in a reader's shell (issue 29, item 4).

The commands are the ``python -m experiments.X ...`` and ``speech-gender X ...`` lines of the
```` ```bash ```` blocks of :data:`DOCUMENTS` (docs/papers.md, docs/getting-started.md,
experiments/studies/README.md, the README and the results, study, real-voices, patching, attributes and decoder pages), with
continuation lines joined and each command of a ``for`` loop or a ``&&`` chain on its own. A
``for`` loop's variable takes its first value; other shell variables stay as written (``$DATA``
is a value like any other). Parsing needs no file and no model: it checks the stage, the
subcommand, every flag, the choices and the required arguments. The papers' study files are
planned with ``--dry-run`` against placeholder manifests in tests/experiments/study/test_study.py, and the Fucci data
block of experiments/studies/README.md runs, as written, on placeholder MuST-C and MuST-SHE files.
"""

import re
import shlex
from pathlib import Path

import pytest

from experiments.stages import parser_of, stages
from tests.paths import CHECKOUT

ROOT = CHECKOUT
DOCUMENTS = (
    "docs/papers.md",
    "docs/getting-started.md",
    "experiments/studies/README.md",
    "README.md",
    "docs/stages/results.md",
    "docs/stages/study.md",
    "docs/real-voices.md",
    "docs/stages/patching.md",
    "docs/attributes.md",
    "docs/stages/decoder.md",
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
def test_a_documented_command_parses(document, line, argv, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the pages' commands run on a GPU machine: checked here for flags, not hardware
    stage = _stage(argv[0])
    assert stage is not None, f"{document}:{line}: no stage {argv[0]}"
    parser = parser_of(stage)
    try:
        parser.parse_args(argv[1:])
    except SystemExit as exit:
        message = capsys.readouterr().err.strip().splitlines()
        assert exit.code == 0, f"{document}:{line}: {' '.join(argv)}: {message[-1] if message else exit.code}"


def test_the_attribute_pages_commands_give_collect_a_probe_for_each_gap():
    """collect joins a gap with probes of its task run without a control (f1_vs_gap): each
    ``asr_gap --attribute NAME --groups A,B`` of docs/attributes.md has a probe of ``--attribute NAME
    --groups A,B`` without ``--control`` (or with ``--control none``) beside it (it had the shuffled control only)."""
    commands = [argv for _, argv in documented_commands(ROOT / "docs/attributes.md")]

    def flag(argv, name):
        return argv[argv.index(name) + 1] if name in argv else None

    gaps = [(flag(argv, "--attribute"), flag(argv, "--groups")) for argv in commands if argv[0] == "experiments.asr_gap" and "--attribute" in argv]
    probes = [argv for argv in commands if argv[0] == "experiments.probe" and flag(argv, "--control") in (None, "none")]
    joined = {(flag(argv, "--attribute"), flag(argv, "--groups")) for argv in probes}
    assert gaps and all(gap in joined for gap in gaps), (gaps, joined)


def test_a_wrong_flag_in_a_page_fails(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text("```bash\nfor t in es; do\n  python -m experiments.collect --probes p.jsonl \\\n      --mustshe m.json --out o --gapz g.json\ndone\n```\n")
    ((line, argv),) = documented_commands(page)
    assert line == 3 and argv[-2:] == ["--gapz", "g.json"]
    with pytest.raises(SystemExit) as exit:
        parser_of(_stage(argv[0])).parse_args(argv[1:])
    assert exit.value.code == 2 and "--gapz" in capsys.readouterr().err


def _block_with(path: Path, marker: str) -> str:
    """The bash block of ``path`` that contains ``marker``."""
    (block,) = [block for block in re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), re.S) if marker in block]
    return block


def _placeholder_fucci_files(data: Path, talks_per_gender: int = 80, segments_per_talk: int = 80) -> None:
    """Tiny stand-ins for MuST-C en-es (train, dev, tst-COMMON), MuST-Speaker and MuST-SHE v1.2:
    enough train segments for the paper's counts, one short tone per talk."""
    from tests.conftest import write_tone

    pronouns = ["TALK-ID\tTED-PRONOUN"]
    for split, talks, per_talk in (("train", 2 * talks_per_gender, segments_per_talk), ("dev", 4, 5), ("tst-COMMON", 4, 5)):
        folder = data / "MUSTC" / "en-es" / "data" / split
        (folder / "txt").mkdir(parents=True)
        segments, english, spanish = [], [], []
        for talk in range(talks):
            talk_id = {"train": 1000, "dev": 5000, "tst-COMMON": 6000}[split] + talk
            pronouns.append(f"{talk_id}\t{'She' if talk % 2 == 0 else 'He'}")
            write_tone(folder / "wav" / f"ted_{talk_id}.wav", seconds=0.5)
            for k in range(per_talk):
                segments.append(f"- {{duration: 0.1, offset: 0.1, rW: 1, uW: 0, speaker_id: spk.{talk_id}, wav: ted_{talk_id}.wav}}")
                english.append(f"sentence {k}")
                spanish.append(f"frase {k}")
        for name, lines in ((f"{split}.yaml", segments), (f"{split}.en", english), (f"{split}.es", spanish)):
            (folder / "txt" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (data / "MuST-Speaker.tsv").write_text("\n".join(pronouns) + "\n", encoding="utf-8")
    header = "ID\tLANG\tTALK\tSRC\tREF\tWRONG-REF\tSPEAKER\tGENDER\tCATEGORY\tTEXT-CATEGORY\tGENDERTERMS"
    for tgt in ("es", "fr", "it"):
        rows = [header]
        for k, category in enumerate(("1F", "1M", "2F", "2M", "1F")):
            rows.append(
                f"{tgt}-{k:04d}\ten-{tgt}\t{7000 + k}\tI was born.\tNacida.\tNacido.\tX Y\t{'She' if 'F' in category else 'He'}\t{category}\tA\tnacida nacido"
            )
            write_tone(data / "MuST-SHE" / "wav" / f"{tgt}-{k:04d}.wav", seconds=0.5)
        (data / "MuST-SHE" / f"MONOLINGUAL.{tgt}_v1.2.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")


def test_the_fucci_data_block_runs_as_written_on_placeholder_native_files(tmp_path):
    """experiments/studies/README.md's Fucci block, run by bash: the paper's 5,061 / 1,078 segments of
    disjoint speakers, test-generic as test, and category-1 MuST-SHE manifests."""
    import json
    import os
    import subprocess
    import sys

    data = tmp_path / "data"
    _placeholder_fucci_files(data)
    block = _block_with(ROOT / "experiments" / "studies" / "README.md", "experiments.probe_data")
    script = block.replace("python -m ", f"{sys.executable} -m ")
    environment = os.environ | {"DATA": str(data), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["bash", "-e", "-c", script], env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in (data / "manifests" / "must_c-en-es-probe.jsonl").read_text().splitlines()]
    counts = {(split, gender): sum(r["split"] == split and r["gender"] == gender for r in rows) for split in ("train", "dev") for gender in ("female", "male")}
    assert counts == {("train", "female"): 2514, ("train", "male"): 2546, ("dev", "female"): 539, ("dev", "male"): 539}
    assert sum(r["split"] == "test" for r in rows) == 40  # MuST-C dev + tst-COMMON, every segment
    speakers = {split: {r["speaker"] for r in rows if r["split"] == split} for split in ("train", "dev", "test")}
    assert not speakers["train"] & speakers["dev"] and not (speakers["train"] | speakers["dev"]) & speakers["test"]
    for tgt in ("es", "fr", "it"):
        must_she = [json.loads(line) for line in (data / "manifests" / f"must_she-en-{tgt}.jsonl").read_text().splitlines()]
        assert sorted(r["extra"]["category"] for r in must_she) == ["1F", "1F", "1M"]  # category 1 only, as the paper's accuracy
