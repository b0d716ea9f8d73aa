"""Each stage's options declared once (issue 31, item 1): the flags, the study file's keys and
docs/cli.md are derived from the option dataclasses (``extract.options``, ``experiments.options``),
and a bad value is refused the same way by the library, the command line and a study file."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from experiments import (
    correlate,
    embedding_store,
    erase,
    finetune,
    grafn,
    manifest,
    mustshe,
    probe_data,
    speakers,
    st_quality,
    winomt,
)
from experiments import extract as extract_cli
from experiments import probe as probe_cli
from experiments import stages as stage_list
from experiments import transcribe as transcribe_cli
from experiments.analysis.speakers import HdbscanSettings
from experiments.analysis_options import AcousticsOptions, F0Options, FeatureGapOptions, LexicalOptions
from experiments.argkit import CommaList
from experiments.cli import CommandParser, file_role
from experiments.decoder.probe import DecoderProbeOptions
from experiments.finetuning.options import LoraOptions
from experiments.finetuning.run import FinetuneConfig
from experiments.normalisation.transform import GrafnParameters
from experiments.options import add_options, flag_of, from_args, options_of
from experiments.patching.run import PatchOptions
from experiments.recipes.realvoices.__main__ import RealVoicesOptions
from experiments.scheduling import ExecutorOptions
from experiments.scoring.gaps import GapOptions
from experiments.scoring.vad import VadSettings
from experiments.study import study_file
from experiments.study.__main__ import StudyRunOptions
from experiments.study.schema import StudyError, load_study
from extract.options import OptionError, declared, option
from extract.stage_options import DecoderStatesOptions, ExtractOptions, ModelOptions, RandomInitOptions, TranscribeOptions
from probing.run import ProbeConfig
from tests.paths import CHECKOUT

CHECKOUT = CHECKOUT
# (stage, its options, the study file's section holding them (experiments.study.study_file), the fields the command line declares by hand)
STUDY_OWN_DEFAULTS = {("st_quality", "comet_model"), ("st_quality", "gpus")}  # a study scores COMET only where named, on the cpu unless given gpus
CONVERTED = [
    ("extract", ModelOptions, study_file.ModelEntry, ()),
    ("transcribe", ModelOptions, study_file.ModelEntry, ()),
    ("extract", ExtractOptions, study_file.Extract, ()),
    ("transcribe", TranscribeOptions, study_file.Transcribe, ()),
    ("probe", ProbeConfig, None, probe_cli.PROBE_FLAGS_BY_HAND),
    ("finetune", FinetuneConfig, None, ()),
    ("finetune", LoraOptions, None, ()),  # the adapters' options, on the same command
    ("grafn fit", GrafnParameters, None, ()),
    ("asr_gap", GapOptions, study_file.Gap, ()),
    ("speakers", HdbscanSettings, None, ()),
    ("vad_filter", VadSettings, None, ()),
    ("patch", PatchOptions, None, ()),
    ("decoder_states", DecoderStatesOptions, None, ()),
    ("decoder_states", RandomInitOptions, study_file.ModelEntry, ()),
    ("decoder_probe", DecoderProbeOptions, None, ()),
    ("extract", ExecutorOptions, None, ()),
    ("extract", RandomInitOptions, study_file.ModelEntry, ()),
    ("extract", extract_cli.StoreReplacement, None, ()),
    ("acoustics", AcousticsOptions, study_file.Acoustic, ()),
    ("correlate", correlate.CorrelateOptions, None, ()),
    ("embedding_store", embedding_store.EmbeddingStoreOptions, None, ()),
    ("erase fit", erase.ErasureFitOptions, None, ()),
    ("f0_baseline", F0Options, study_file.F0Baseline, ()),
    ("feature_gaps", FeatureGapOptions, study_file.FeatureGaps, ()),
    ("grafn fit", grafn.GrafnFitOptions, None, ()),
    ("grafn apply", grafn.GrafnApplyOptions, None, ()),
    ("lexical", LexicalOptions, study_file.Lexical, ()),
    ("manifest common_voice", manifest.ManifestOptions, None, ()),
    ("mustshe", mustshe.MustSheOptions, None, ()),
    ("probe_data", probe_data.ProbeDataOptions, None, ()),
    ("speakers", speakers.SpeakerOptions, None, ()),
    ("st_quality", st_quality.StQualityOptions, study_file.StQuality, ()),
    ("winomt", winomt.WinoMTOptions, None, ()),
    ("study run", ExecutorOptions, None, ("tasks",)),  # a study resubmits every unfinished task: no --tasks
    ("study run", StudyRunOptions, None, ()),
    ("probe", probe_cli.ProbeCommandOptions, None, ()),
    ("finetune", finetune.FinetuneRunOptions, None, ()),
    ("realvoices", RealVoicesOptions, None, ()),
]


def _reference_section(command: str) -> str:
    """A command's section of docs/cli.md (``## stage``, or ``### stage sub`` for a subcommand)."""
    text = (CHECKOUT / "docs" / "cli.md").read_text(encoding="utf-8")
    heading = "### " if " " in command else "## "
    return text.split(f"\n{heading}{command}\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]


def _parser(command: str) -> argparse.ArgumentParser:
    """The parser of ``speech-gender COMMAND`` (a stage, or a stage and its subcommand)."""
    stage, _, sub = command.partition(" ")
    parser = stage_list.parser_of(stage_list.find(stage))
    return next(p for p in stage_list.subcommands(parser) if p.prog.endswith(f" {sub}")) if sub else parser


@pytest.mark.parametrize(("stage", "options", "section", "by_hand"), CONVERTED, ids=[f"{stage}-{options.__name__}" for stage, options, *_ in CONVERTED])
def test_every_declared_option_is_a_flag_a_study_key_and_in_the_reference(stage, options, section, by_hand):
    parser = _parser(stage)
    flags = {flag: action for action in parser._actions for flag in action.option_strings}
    reference = _reference_section(stage)
    for item, declaration in declared(options):
        if not declaration.command or item.name in by_hand:
            continue
        flag = flag_of(item, declaration)
        assert flag in flags, f"{stage}: {item.name} is declared but {flag} is not a flag"
        assert flags[flag].dest == item.name and flags[flag].help.startswith(declaration.help.replace("%", "%%")[:40])
        assert re.search(rf"^\s+{re.escape(flag)}\b", reference, re.MULTILINE), f"docs/cli.md's {stage} section lacks {flag}"
        if declaration.study:
            assert section is not None and item.name in section.model_fields, f"{stage}: {item.name} is a study option the study schema lacks"
            default = item.default if item.default is not dataclasses.MISSING else None
            if (stage, item.name) not in STUDY_OWN_DEFAULTS:
                assert section.model_fields[item.name].default == (list(default) if isinstance(default, tuple) else default)  # YAML has lists


def test_the_study_sections_are_the_declared_study_options_and_the_grid_options_are_probeconfigs():
    extract, transcribe = study_file.Extract.model_fields, study_file.Transcribe.model_fields
    assert set(extract) == {"storage_dtype", "batch_seconds", "max_seconds", "keep_padding", "utterances_per_part", "num_shards"}
    assert set(transcribe) == {"batch_seconds", "max_seconds", "num_beams", "max_new_tokens", "translate_by_forcing", "engine", "compute_type"}
    assert extract["batch_seconds"].default == 120.0 and study_file.expected(extract["batch_seconds"].annotation) == "an integer or a number"
    assert transcribe["max_seconds"].default is None and study_file.expected(transcribe["max_seconds"].annotation) == "an integer or a number or null"
    assert study_file.Extract.model_validate({"storage_dtype": "float32"}).storage_dtype == "float32"
    with pytest.raises(ValueError, match="'float64' is not one of float16, float32"):
        study_file.Extract.model_validate({"storage_dtype": "float64"})
    assert set(study_file.PROBE_OPTIONS) <= {item.name for item in dataclasses.fields(ProbeConfig)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Toy:
    """Every kind of field a stage declares, for the derivation's hand-checked cases."""

    name: str = option(help="required: no default")
    count: int = option(3, "a count", least=1, study=True)
    rate: float | None = option(None, "a rate", positive=True)
    fast: bool = option(False, "a switch")
    exact: bool = option(True, "the switch off", flag="--no-exact")
    mode: str = option("a", "a choice", choices=("a", "b"), study=True)
    files: tuple[Path, ...] = option((), "files", flag="--file", role="input")
    words: tuple[str, ...] = option((), "names", choices=("x", "y"))
    hidden: int = option(0, "not a flag", command=False)
    renamed: int = option(0, "a renamed flag", aliases=("--old",))

    def __post_init__(self):
        object.__setattr__(self, "files", tuple(Path(path) for path in self.files))
        from extract.options import check_options

        check_options(self)


def _toy_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="toy")
    add_options(parser, Toy)
    return parser


def test_fields_become_the_flags_their_types_say():
    args = _toy_parser().parse_args(
        ["--name", "n", "--count", "4", "--rate", "0.5", "--fast", "--no-exact", "--mode", "b", "--file", "a", "b", "--words", "x,y"]
    )
    assert (args.name, args.count, args.rate, args.fast, args.exact, args.mode) == ("n", 4, 0.5, True, False, "b")
    assert args.files == [Path("a"), Path("b")] and args.words == ["x", "y"]
    defaults = _toy_parser().parse_args(["--name", "n"])
    assert (defaults.count, defaults.rate, defaults.fast, defaults.exact, defaults.mode, defaults.files, defaults.words) == (3, None, False, True, "a", [], [])
    assert not hasattr(defaults, "hidden")
    actions = {action.dest: action for action in _toy_parser()._actions}
    assert file_role(actions["files"]).kind == "input" and isinstance(actions["words"], CommaList) and actions["name"].required
    built = from_args(Toy, _toy_parser().parse_args(["--name", "n", "--file", "a"]))
    assert built == Toy(name="n", files=(Path("a"),))


def _pair(value: str) -> tuple[str, str]:
    key, _, wanted = value.partition("=")
    return key, wanted


def _two(value: str) -> tuple[int, int]:
    first, second = value.split(",")
    return int(first), int(second)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Parsed:
    """The fields a declared ``parse`` reads, a list without a default, an output with files beside it."""

    where: tuple[tuple[str, str], ...] = option((), "COLUMN=VALUE pairs", parse=_pair, metavar="COLUMN=VALUE")
    counts: tuple[int, int] = option(help="FEMALE,MALE", parse=_two)
    only: tuple[str, ...] | None = option(None, "names, or none given")
    site: str = option(help="required, unless another flag gives it")
    out: Path | None = option(None, "an output", role="output", sidecars=lambda out: [out.with_suffix(".md")])


def test_parsed_values_lists_without_default_and_outputs_with_sidecars():
    parser = CommandParser(prog="parsed")
    add_options(parser, Parsed, optional=("site",))
    args = parser.parse_args(["--where", "a=1", "b=2", "--where", "c=", "--counts", "3,4", "--out", "r.csv"])
    built = from_args(Parsed, args)
    assert built.where == (("a", "1"), ("b", "2"), ("c", "")) and built.counts == (3, 4) and built.only is None and built.site is None
    assert from_args(Parsed, parser.parse_args(["--counts", "1,2", "--only", "x,y"])).only == ("x", "y")
    actions = {action.dest: action for action in parser._actions}
    assert not actions["site"].required and actions["counts"].required
    assert file_role(actions["out"]).sidecars(Path("r.csv")) == [Path("r.md")]


def test_an_unknown_name_in_a_comma_list_gets_the_nearest_one(capsys):
    with pytest.raises(SystemExit):
        _toy_parser().parse_args(["--name", "n", "--words", "xx"])
    assert "--words xx: not one of x,y; did you mean 'x'?" in capsys.readouterr().err


def test_a_renamed_option_keeps_its_old_spelling(capsys):
    assert _toy_parser().parse_args(["--name", "n", "--old", "5"]).renamed == 5
    assert capsys.readouterr().err == "note: --old is deprecated; use --renamed\n"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--count", "0"], "error: --count 0: must be at least 1\n"),
        (["--rate", "0"], "error: --rate 0.0: must be positive\n"),
        (["--rate", "nan"], "error: --rate nan: must be a finite number\n"),
    ],
)
def test_a_refused_value_is_one_line_naming_the_flag(argv, error, capsys):
    with pytest.raises(SystemExit) as exited:
        from_args(Toy, _toy_parser().parse_args(["--name", "n", *argv]))
    assert exited.value.code == 2 and capsys.readouterr().err == error


def test_bad_choices_and_names_are_refused_while_parsing(capsys):
    for argv in (["--mode", "c"], ["--words", "x,z"]):
        with pytest.raises(SystemExit):
            _toy_parser().parse_args(["--name", "n", *argv])
    assert "--words z: not one of x,y" in capsys.readouterr().err


def test_the_study_view_of_the_toy_options():
    toy = study_file.section("Toy", Toy, bounds=True)
    assert {key: (study_file.expected(field.annotation), field.default) for key, field in toy.model_fields.items()} == {
        "count": ("an integer", 3),
        "mode": ("a string", "a"),
    }
    assert toy.model_validate({"count": 1}).count == 1
    for values, refusal in (
        ({"mode": "c"}, "'c' is not one of a, b"),
        ({"count": 0}, "must be at least 1, got 0"),
        ({"count": "1"}, "Input should be a valid integer"),
    ):
        with pytest.raises(ValueError, match=refusal):
            toy.model_validate(values)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_shards": 0}, "num_shards 0: must be at least 1"),
        ({"batch_seconds": 0.0}, "batch_seconds 0.0: must be positive"),
        ({"storage_dtype": "float64"}, "storage_dtype float64: not one of float16, float32"),
        ({"shard_index": 2, "num_shards": 2}, "shard_index 2 is outside 0..1 for num_shards 2"),
        ({"positions": 5, "pool": "mean"}, "positions and pool: give one"),
        ({"intervene_gender": "female"}, "intervene_gender needs at least one interventions FILE"),
    ],
)
def test_the_library_refuses_what_the_command_line_refuses(options, message):
    with pytest.raises(OptionError, match=re.escape(message)):
        ExtractOptions(**options)


def test_an_extraction_job_is_its_options_and_reads_sites_as_the_flag_does():
    from extract.jobs import ExtractionJob
    from extract.spec import ModelSpec

    job = ExtractionJob(ModelSpec("whisper"), Path("m.jsonl"), Path("store"), sites="encoder.layer.0,encoder.final", num_shards=2)
    assert job.sites == ("encoder.layer.0", "encoder.final") and job.num_shards == 2 and isinstance(job, ExtractOptions)
    with pytest.raises(OptionError, match="utterances_per_part 0: must be at least 1"):
        ExtractionJob(ModelSpec("whisper"), Path("m.jsonl"), Path("store"), utterances_per_part=0)


def test_transcription_options_need_a_target_for_st_and_make_the_job():
    from extract.jobs import TranscriptionJob
    from extract.spec import ModelSpec

    with pytest.raises(OptionError, match="task st needs tgt_lang"):
        TranscribeOptions(task="st")
    options = TranscribeOptions(task="st", tgt_lang="it", label="wb", num_beams=2, translate_by_forcing=True, batch_seconds=60.0)
    job = TranscriptionJob.of(options, ModelSpec("whisper"), Path("m.jsonl"), Path("h.jsonl"))
    assert (job.task, job.tgt_lang, job.name, job.batch_seconds, job.options.num_beams, job.options.translate_by_forcing) == ("st", "it", "wb", 60.0, 2, True)
    assert TranscriptionJob(ModelSpec("whisper"), Path("m"), Path("h"), "asr").batch_seconds == TranscribeOptions(task="asr").batch_seconds == 240.0


@pytest.mark.parametrize(
    ("cli", "argv", "error"),
    [
        (extract_cli, ["--num-shards", "0"], "error: --num-shards 0: must be at least 1"),
        (extract_cli, ["--batch-seconds", "-1"], "error: --batch-seconds -1.0: must be positive"),
        (extract_cli, ["--limit", "0"], "error: --limit 0: must be at least 1"),
        (transcribe_cli, ["--task", "st"], "error: --task st needs --tgt-lang"),
        (transcribe_cli, ["--task", "asr", "--num-beams", "0"], "error: --num-beams 0: must be at least 1"),
    ],
)
def test_the_command_line_names_the_flag_before_any_model_loads(cli, argv, error, tmp_path, capsys):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("")
    with pytest.raises(SystemExit) as exited:
        cli.main(["--family", "whisper", "--manifest", str(manifest), "--out", str(tmp_path / "out"), *argv])
    assert exited.value.code == 2 and capsys.readouterr().err == error + "\n"


def test_a_study_refuses_the_values_the_command_line_refuses(tmp_path):
    (tmp_path / "m.jsonl").write_text("")
    study = tmp_path / "s.yaml"
    for section, key in (("extract", "num_shards"), ("transcribe", "num_beams")):
        corpora = "corpora: [{name: c, task: asr, manifests: {en: m.jsonl}}]"
        study.write_text(f"name: s\nout: out\nmodels: [{{name: m, family: whisper}}]\n{corpora}\n{section}: {{{key}: 0}}\n")
        with pytest.raises(StudyError, match=rf"s\.yaml: {section}\.{key}: must be at least 1, got 0$"):
            load_study(study)


def test_only_declared_fields_are_options():
    names = {item.name for item, _ in options_of(ProbeConfig)}
    assert "c" not in names and "task" not in names and {"probe", "control", "memory_gb", "standardize"} <= names


def test_given_values_win_over_flags_and_a_field_cannot_have_both_kinds_of_other_spelling():
    assert from_args(Toy, _toy_parser().parse_args(["--name", "n", "--count", "4"]), count=7).count == 7

    @dataclasses.dataclass(frozen=True)
    class Both:
        size: int = option(1, "a size", aliases=("--old-size",), also=("--extent",))

    with pytest.raises(ValueError, match="aliases .* or also .*, not both"):
        add_options(CommandParser(prog="x"), Both)


def test_a_one_value_list_leaves_the_positional_after_it_alone():
    """``study run --stages probe STUDY.yaml``: the study file is not read as a stage (a list of
    names declared ``one_value`` takes one comma-separated value); a repeated flag still adds."""
    from experiments.study.__main__ import build_parser

    args = build_parser().parse_args(["run", "--stages", "probe,collect", "--redo", "probe", "--redo", "collect", "study.yaml"])
    assert str(args.study) == "study.yaml"
    assert args.stages == ["probe", "collect"] and args.redo == ["probe", "collect"]
