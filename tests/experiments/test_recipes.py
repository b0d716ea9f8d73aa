"""The corpus-recipe registry (``extract.corpora.RECIPES``) and the command that loops over it:
every recipe's declared arguments fill its reader, parse as a subcommand of ``python -m
experiments.manifest``, and read a tiny corpus in its native layout, with missing audio listed and
a missing source refused; a new recipe registered in a test gets all of that."""

import inspect
import json
from pathlib import Path

import pytest

from experiments.manifest import build_parser, main
from extract import corpora
from extract.corpora.base import AdapterResult, Collector, Recipe, argument
from tests.conftest import write_tone


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _common_voice(root: Path) -> tuple[list[str], list[Path]]:
    tsv = _write(root / "test.tsv", "client_id\tpath\tsentence\tgender\ns1\ta.wav\thi\tmale\ns2\tb.wav\tho\tfemale\n")
    return [str(tsv), "--language", "en"], [root / "clips/a.wav", root / "clips/b.wav"]


def _fleurs(root: Path) -> tuple[list[str], list[Path]]:
    tsv = _write(root / "dev.tsv", "1\t10.wav\tHello.\thello\th\t16000\tFEMALE\n2\t11.wav\tBye.\tbye\tb\t16000\tMALE\n")
    return [str(tsv), "--language", "en"], [root / "audio/dev/10.wav", root / "audio/dev/11.wav"]


def _voxpopuli(root: Path) -> tuple[list[str], list[Path]]:
    header = "id\traw_text\tnormalized_text\tspeaker_id\tsplit\tgender\n"
    tsv = _write(root / "asr_test.tsv", header + "2019-a_de_0\tTag.\ttag\t1\ttest\tfemale\n2019-b_de_0\tNacht.\tnacht\t2\ttest\tmale\n")
    return [str(tsv), "--language", "de", "--audio-dir", str(root / "audio")], [root / "audio/2019-a_de_0.wav", root / "audio/2019-b_de_0.wav"]


def _must_c(root: Path) -> tuple[list[str], list[Path]]:
    split = root / "data/tst"
    _write(
        split / "txt/tst.yaml",
        "- {duration: 0.5, offset: 0.1, speaker_id: spk.1, wav: ted_1.wav}\n- {duration: 0.5, offset: 0.1, speaker_id: spk.2, wav: ted_2.wav}\n",
    )
    _write(split / "txt/tst.en", "I was tired.\nHello.\n")
    _write(split / "txt/tst.it", "Ero stanca.\nCiao.\n")
    speakers = _write(root / "speakers.tsv", "TALK-ID\tTED-PRONOUN\n1\tShe\n2\tHe\n")
    return [str(split), "--split-name", "tst", "--tgt-lang", "it", "--speakers", str(speakers)], [split / "wav/ted_1.wav", split / "wav/ted_2.wav"]


def _must_she(root: Path) -> tuple[list[str], list[Path]]:
    header = "ID\tLANG\tTALK\tSRC\tREF\tWRONG-REF\tSPEAKER\tGENDER\tCATEGORY\tTEXT-CATEGORY\tGENDERTERMS\n"
    rows = (
        "it-1\ten-it\t1\tI was born.\tSono nata.\tSono nato.\tJane\tShe\t1F\tA\tnata nato\n"
        "it-2\ten-it\t2\tI was tired.\tEro stanco.\tEro stanca.\tJohn\tHe\t1M\tA\tstanco stanca\n"
    )
    return [str(_write(root / "MONOLINGUAL.it.tsv", header + rows))], [root / "wav/it-1.wav", root / "wav/it-2.wav"]


def _winost(root: Path) -> tuple[list[str], list[Path]]:
    aggregate = _write(root / "en.txt", "female\t1\tThe nurse said she was late.\tThe nurse\nmale\t1\tThe driver said he was late.\tThe driver\n")
    return [str(aggregate), "--wav-dir", str(root / "wav"), "--wav-template", "{line}.wav"], [root / "wav/1.wav", root / "wav/2.wav"]


def _tsv(root: Path) -> tuple[list[str], list[Path]]:
    tsv = _write(root / "list.tsv", "id\taudio\ttext\tgender\tspeaker\nu1\ta.wav\thi\tF\ts1\nu2\tb.wav\tho\tM\ts2\n")
    return [str(tsv), "--language", "en", "--dataset", "mine"], [root / "a.wav", root / "b.wav"]


def _jsonl(root: Path) -> tuple[list[str], list[Path]]:
    rows = [{"id": f"u{i}", "audio": f"{i}.wav", "text": "hi", "gender": gender, "speaker": f"s{i}"} for i, gender in ((1, "F"), (2, "M"))]
    jsonl = _write(root / "list.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    return [str(jsonl), "--language", "en"], [root / "1.wav", root / "2.wav"]


def _mtedx(root: Path) -> tuple[list[str], list[Path]]:
    from tests.mtedx import SEGMENTS, write_mtedx

    written = write_mtedx(root, audio=False, segments=SEGMENTS[1:])  # one segment per talk
    return [str(written["split_dir"]), "--split-name", "test", "--language", "fr", "--speakers", str(written["speakers"])], written["wavs"]


# One tiny native corpus per recipe: (root) -> (the subcommand's arguments, the two WAVs it names).
NATIVE = {
    "common_voice": _common_voice,
    "fleurs": _fleurs,
    "voxpopuli": _voxpopuli,
    "must_c": _must_c,
    "must_she": _must_she,
    "mtedx": _mtedx,
    "winost": _winost,
    "tsv": _tsv,
    "jsonl": _jsonl,
}


def check_recipe(recipe: Recipe, native, tmp_path: Path, capsys) -> list[dict]:
    """The contract of a registered recipe: its arguments fill its reader's parameters (every one
    without a default), it is a subcommand whose flags are the declared ones, it reads its tiny
    corpus to two utterances, lists a missing WAV (an error with --strict), and refuses a source
    that does not exist with one ``error:`` line naming it. Returns the manifest's rows."""
    parameters = inspect.signature(recipe.read).parameters
    open_ended = any(p.kind is p.VAR_KEYWORD for p in parameters.values())  # e.g. generic_tsv(tsv, **defaults)
    assert open_ended or {arg.parameter for arg in recipe.arguments} <= set(parameters), recipe.name
    needed = {name for name, p in parameters.items() if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD}
    assert needed <= {arg.parameter for arg in recipe.arguments if arg.positional or arg.options.get("required")}, recipe.name
    assert recipe.source.reads
    subcommand = build_parser()._subparsers._group_actions[0].choices[recipe.name]
    flags = {flag for action in subcommand._actions for flag in action.option_strings} | {a.dest for a in subcommand._actions if not a.option_strings}
    assert {flag for arg in recipe.arguments for flag in (*arg.flags, *arg.old_spellings)} | {"--out", "--json", "--strict", "-h", "--help"} == flags
    argv, wavs = native(tmp_path / "corpus")
    for wav in wavs:
        write_tone(wav, seconds=0.2)
    out = tmp_path / "manifest.jsonl"
    assert main([recipe.name, *argv, "--out", str(out)]) == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(Path(row["audio"]).name for row in rows) == sorted(wav.name for wav in wavs)
    assert all(row["id"] and row["speaker"] and row["language"] and row["gender"] in ("female", "male") for row in rows)
    capsys.readouterr()
    wavs[1].unlink()
    assert main([recipe.name, *argv, "--out", str(out)]) == 0
    (missing,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("missing audio: ")]
    assert wavs[1].stem in missing and len(out.read_text().splitlines()) == 1
    assert main([recipe.name, *argv, "--out", str(out), "--strict"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == "error: 1 rows have no audio file (--strict); no manifest written"
    gone = str(tmp_path / "no-such-source")
    assert main([recipe.name, *[gone if value == argv[0] else value for value in argv], "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ") and "no-such-source" in line
    return rows


def test_every_recipe_has_a_tiny_corpus_here():
    """A new recipe adds its tiny native corpus to NATIVE, and then gets every check below."""
    assert set(NATIVE) == set(corpora.RECIPES) == set(corpora.ADAPTERS)
    assert list(build_parser()._subparsers._group_actions[0].choices) == list(corpora.RECIPES)


@pytest.mark.parametrize("name", list(corpora.RECIPES))
def test_every_recipe_reads_its_native_layout_from_the_command_line(name, tmp_path, capsys):
    check_recipe(corpora.RECIPES[name], NATIVE[name], tmp_path, capsys)


def test_old_spellings_still_parse():
    args = build_parser().parse_args(["must_c", "d", "--split-name", "tst", "--target-language", "it", "--speakers", "s.tsv", "--out", "m.jsonl"])
    assert (args.tgt_lang, args.speakers, args.split_dir) == ("it", "s.tsv", "d")
    args = build_parser().parse_args(["tsv", "x.tsv", "--json", "m.jsonl"])
    assert (str(args.out), args.dataset, args.language) == ("m.jsonl", "", None)


def read_csv(csv: str, language: str, dataset: str = "") -> AdapterResult:
    """A throwaway recipe's reader: ``id,audio,text,gender,speaker`` per line, audio beside the file."""
    path = Path(csv)
    collector = Collector(path)
    for number, line in enumerate(path.read_text().splitlines(), 1):
        identifier, audio, text, gender, speaker = line.split(",")
        collector.add(number, id=identifier, audio=str(path.parent / audio), text=text, gender=gender, speaker=speaker, language=language, dataset=dataset)
    return collector.result


def test_a_throwaway_recipe_is_a_subcommand_and_passes_the_checks(monkeypatch, tmp_path, capsys):
    recipe = Recipe(
        "csv",
        "comma-separated id,audio,text,gender,speaker",
        read_csv,
        (argument("csv", reads=True), argument("--language", required=True), argument("--dataset", default="")),
    )
    monkeypatch.setitem(corpora.RECIPES, recipe.name, recipe)

    def native(root: Path) -> tuple[list[str], list[Path]]:
        csv = _write(root / "list.csv", "u1,a.wav,hi,female,s1\nu2,b.wav,ho,male,s2\n")
        return [str(csv), "--language", "fr", "--dataset", "mine"], [root / "a.wav", root / "b.wav"]

    rows = check_recipe(recipe, native, tmp_path, capsys)
    assert [(row["id"], row["language"], row["dataset"]) for row in rows] == [("u1", "fr", "mine"), ("u2", "fr", "mine")]
    assert "csv" in build_parser().format_help()
