"""A study file, read and checked: the one description of an experiment (``python -m experiments.study``).

A study file is YAML. Every key is checked (a typo gets the nearest known name), every value's type
(the models of :mod:`experiments.study.study_file`), every path's existence and the rules between
keys (here); an error is one line naming the file and the key. Relative paths (``out``,
manifests, MuST-SHE definitions, a local checkpoint) are resolved against the study file's folder,
or against ``root`` (``--root``: the paper studies under ``experiments/studies/`` name their data
relative to a folder of the user's)::

    name: tiny                        # required: the study's name (RESULTS.md)
    out: runs/tiny                    # required: the folder everything is written to
    device: cpu                       # default: cuda if a GPU is visible, else cpu (--device overrides)
    models:                           # required, at least one
      - name: wb                      # required, unique: the model label of every output (extract/transcribe --label)
        family: whisper               # required: whisper, seamless, s2t, zeroswot, ssl
        checkpoint: bundled-base      # hub id, local folder or bundled-NAME; default: the family's reference checkpoint
        revision: null                # hub commit; remote code (ZeroSwot) needs a 40-hex one
        dtype: float32                # compute dtype: float32, float16, bfloat16
        random_init: false            # the random-weights baseline of the architecture (weights drawn from seed)
        seed: 0
        trust_remote_code: false
        sites: [encoder.final]        # this model's sites (default: the study's sites)
        decoder: null                 # ZeroSwot: the NLLB checkpoint that decodes (default: the one its config names)
        languages: null               # on pooled parts (key all): only these languages' utterances (e.g. [en] for an English-only model)
        transcribe: true              # false: probed only (random weights, a tiny random model); or the corpora it transcribes
    corpora:                          # required, at least one
      - name: common_voice            # required, unique: the dataset the manifests' rows record (their `dataset`)
        task: asr                     # required: asr or st
        manifests: {en: m/cv-en.jsonl, it: m/cv-it.jsonl}   # required: language -> manifest (its rows' language)
      - {name: demo, task: asr, manifests: {all: m/demo.jsonl}}  # key all: one pooled manifest of every language (below)
      - name: must_she
        task: st                      # st: manifests keyed SRC-TGT, or keyed by language with tgt_langs
        manifests: {en-es: m/mustshe-es.jsonl}
        mustshe: {en-es: MuST-SHE/MONOLINGUAL.es_v1.2.tsv}  # MuST-SHE definitions, keyed like manifests
      - {name: must_c, task: st, manifests: {en: m/mustc-train.jsonl}, tgt_langs: [es]}
    sites: all                        # or a list (default: all)
    extract: {storage_dtype: float16, batch_seconds: 120, max_seconds: 30, keep_padding: false, utterances_per_part: 256, num_shards: 1}
    transcribe: {batch_seconds: 240, max_seconds: null, num_beams: null, max_new_tokens: null, translate_by_forcing: false}
    probes:                           # the probe grid (absent: no probes), or a list of such grids
      probes: [positional]            # positional, attention, mean, max, sampled
      controls: [none, shuffled]      # none, shuffled, speaker
      seeds: [0]
      corpora: [common_voice]         # the corpora probes learn from (default: every corpus but apply_to's)
      apply_to: must_she              # attention probes: also predict this corpus's stores of the same model
      models: [wb]                    # the models probed (default: every model)
      sites: [encoder.final]          # only these of each model's sites (default: every site of the model)
      languages: [en, es]             # one run per language, on pooled parts only (ProbeConfig's language filter)
      positions: 1000                 # ... and any other option of probing.run.ProbeConfig (mdl, task, split, lr, max_epochs, memory_gb, ...)
    baselines:
      f0: {corpora: [realvoices], range_by: speaker}   # F0-only stores (experiments.f0_baseline) at OUT/stores/f0/CORPUS-KEY;
                                      # a grid probes them by naming the model f0 (site f0), e.g. {models: [f0], probes: [mean], split: loso}
    behaviour:
      gap: {iterations: 1000, seed: 0, groups: [female, male], gap_estimate: resampled, normalizer: whisper, cer_spaces: drop}
      # or a list of comparisons, each with its groups, e.g. [{groups: [female, male]}, {groups: [other, male], languages: [ca, de]}];
      # languages: only the parts with these keys (default: every part of its corpora);
      # attribute: groups of a field of the manifests' extra instead of genders, e.g. {attribute: age, groups: [teens, thirties]}
      # (two or more values, each against the last; docs/attributes.md)
      st_quality: {comet_model: null, comet_python: null, batch_size: 16, gpus: 0}   # BLEU, chrF (COMET with a model; comet_python: where)
      # each takes corpora: [...], the corpora it scores (default: every asr corpus for gap, every st corpus for st_quality)
    report: {site: encoder.final}     # the site of the headline scatter plots (default: each model's last site)
    analyses:                         # Attanasio et al. 2024, section 5 (absent: none); each part true/a mapping (on) or false (off)
      acoustic: {speech: vad, range_by: speaker, tokenizer: bundled-base, workers: 1}   # experiments.acoustics per manifest
      lexical:                        # experiments.lexical per manifest and language, with a spaCy pipeline per language
        pipelines: {en: en_core_web_md, it: it_core_news_md, yo: null}   # every analysed language; null: its lexical analysis left out
        batch_size: 64
      feature_gaps: {groups: [female, male], unit: record, student: false, correction: holm, bootstrap: 10000}
                                      # experiments.feature_gaps per corpus, with the gap reports of behaviour.gap
                                      # (default: on when acoustic or lexical is)
      corpora: [common_voice]         # the asr corpora analysed (default: those the female-male gap scores, else every asr corpus)

What is extracted, transcribed and scored follows from it: stores of each model on every corpus a
grid probing it reads (its ``corpora`` and ``apply_to``); hypotheses of every model but those with
``transcribe: false`` where a behaviour needs them (the corpora of ``behaviour.gap`` and
``behaviour.st_quality``, and the manifests with a MuST-SHE definition).

**Pooled parts.** An asr corpus may key one manifest ``all``: every language of the manifest in one
store and one hypotheses file (a mixed store: its probes' subject language is the store's languages,
e.g. ``en+es``; the gap report splits per language). A grid's ``languages`` runs one probe per
language on such parts, and a model's ``languages`` restricts its stores and hypotheses there to those
languages (the study writes the filtered manifest to ``OUT/manifests/MODEL/CORPUS-all.jsonl``; its
sha256 is what the store records). Two grids must not produce one run twice: a run appears once.

**Analyses.** ``analyses`` runs the paper's section 5 on the analysed corpora's manifests: acoustic
features (mean F0, intensity, speaking rate) and lexical features of the reference texts per record,
then their contrasts between the groups and their correlation with each model's E. A language of an
analysed part missing from ``lexical.pipelines`` is refused when the plan reads its manifest (name
it, with null to leave it out); a pipeline that is not installed is refused by the plan (so by
``--dry-run``), naming it and how to install it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.study.values import PROBE_OPTIONS, name_problem, shown
from extract.errors import UserError
from extract.manifest import GENDERS
from probing.controls import CONTROLS
from probing.data import ProbeError
from probing.grid import GridError, check_option_types, load_yaml
from probing.kinds import DEFAULT_KIND, KINDS
from probing.run import ProbeConfig

if TYPE_CHECKING:
    from experiments.study.study_file import Analyses, Baselines, Grid, ModelEntry

F0 = "f0"  # the F0 baseline's model name in grids (and its site)
POOLED = "all"  # the manifest key of a pooled part: every language of the manifest in one store


class StudyError(UserError, ValueError):
    """A study file that cannot run as written: one line naming the file and the key."""


@dataclass(frozen=True)
class Model:
    """One model of the study; ``name`` is its label in every output."""

    name: str
    family: str
    checkpoint: str | None = None
    revision: str | None = None
    dtype: str = "float32"
    random_init: bool = False
    seed: int = 0
    trust_remote_code: bool = False
    sites: str | tuple[str, ...] = "all"
    decoder: str | None = None
    languages: tuple[str, ...] | None = None
    transcribe: bool | tuple[str, ...] = True  # or the corpora whose hypotheses it makes


@dataclass(frozen=True)
class Part:
    """One manifest of a corpus: ``key`` as written (``en``, ``en-es``), the source ``language`` of its
    rows, the translation ``targets`` (``(None,)`` for asr) and its MuST-SHE definition, if any."""

    corpus: str
    key: str
    language: str | None  # None: a pooled part (key ``all``), every language of its manifest
    manifest: Path
    targets: tuple[str | None, ...] = (None,)
    mustshe: Path | None = None

    @property
    def pooled(self) -> bool:
        return self.language is None

    @property
    def name(self) -> str:
        """The part's name in the study's file names: ``CORPUS-KEY``."""
        return f"{self.corpus}-{self.key}"

    def output_name(self, target: str | None) -> str:
        """Its hypotheses' name for one target: the target is added when the key does not say it."""
        return self.name if target is None or self.key.endswith(f"-{target}") else f"{self.name}-{target}"


@dataclass(frozen=True)
class Corpus:
    name: str
    task: str
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class ProbeGrid:
    """Probes x controls x seeds on every site of every store of ``corpora``, with ``options`` (ProbeConfig fields);
    ``models`` and ``sites`` restrict it (None: all), ``languages`` runs it per language on pooled parts."""

    probes: tuple[str, ...]
    controls: tuple[str, ...]
    seeds: tuple[int, ...]
    corpora: tuple[str, ...]
    apply_to: str | None = None
    options: dict = field(default_factory=dict)
    models: tuple[str, ...] | None = None
    sites: tuple[str, ...] | None = None
    languages: tuple[str | None, ...] = (None,)
    where: str = "probes"  # its key in the study file, for errors

    def probes_model(self, model: str) -> bool:
        return self.models is None or model in self.models

    @property
    def read(self) -> tuple[str, ...]:
        """The corpora whose stores it reads: those it learns from and the one it is applied to."""
        return (*self.corpora, self.apply_to) if self.apply_to else self.corpora


@dataclass(frozen=True)
class Study:
    path: Path
    name: str
    out: Path
    device: str | None
    models: tuple[Model, ...]
    corpora: tuple[Corpus, ...]
    extract: dict
    transcribe: dict
    probes: tuple[ProbeGrid, ...]  # empty: no probes
    f0: dict | None  # the F0 baseline: {"corpora": (...), "range_by": ...}
    gaps: tuple[dict, ...]  # one per comparison (behaviour.gap: a mapping, or a list of them); empty: no gap
    st_quality: dict | None
    report: dict
    analyses: dict | None = None  # section 5: {"acoustic", "lexical", "feature_gaps": options or None, "corpora": (...)}

    @property
    def gap(self) -> dict | None:
        """The first gap comparison (the study's headline one), or None."""
        return self.gaps[0] if self.gaps else None

    def gaps_of(self, corpus: Corpus, part: Part) -> tuple[dict, ...]:
        """The gap comparisons that score ``part`` of ``corpus`` (its corpus named, its key among ``languages`` where given)."""
        return tuple(gap for gap in self.gaps if corpus.name in gap["corpora"] and (gap["languages"] is None or part.key in gap["languages"]))

    def analysed(self, analysis: str) -> tuple[Corpus, ...]:
        """The corpora ``analysis`` (``acoustic``, ``lexical`` or ``feature_gaps``) runs on: none when it is off."""
        if self.analyses is None or self.analyses[analysis] is None:
            return ()
        return tuple(corpus for corpus in self.corpora if corpus.name in self.analyses["corpora"])

    def corpus(self, name: str) -> Corpus:
        return next(corpus for corpus in self.corpora if corpus.name == name)

    def probed(self, model: Model) -> tuple[Corpus, ...]:
        """The corpora whose stores of ``model`` are extracted: those a grid probing it learns from or is applied to."""
        names = {name for grid in self.probes if grid.probes_model(model.name) for name in grid.read}
        return tuple(corpus for corpus in self.corpora if corpus.name in names)

    def scored(self, behaviour: str, corpus: Corpus) -> bool:
        """Whether ``behaviour`` (``gap`` or ``st_quality``) scores ``corpus``: one of its task named in the behaviour's ``corpora``."""
        if behaviour == "gap":
            return corpus.task == "asr" and any(corpus.name in gap["corpora"] for gap in self.gaps)
        options = self.st_quality
        return options is not None and corpus.task == "st" and corpus.name in options["corpora"]

    def transcribed(self, model: Model, corpus: Corpus) -> tuple[Part, ...]:
        """The parts of ``corpus`` whose hypotheses of ``model`` a behaviour needs (none with ``transcribe: false``)."""
        if not model.transcribe or (model.transcribe is not True and corpus.name not in model.transcribe):
            return ()
        if self.scored("gap", corpus) or self.scored("st_quality", corpus):
            return corpus.parts
        return tuple(part for part in corpus.parts if part.mustshe is not None)


class _Reader:
    """Checks values of one study file, naming the file and the key in every error."""

    def __init__(self, path: Path, root: Path):
        self.path, self.root = path, root
        self.missing: list[tuple[str, Path]] = []  # (key, path) of every input file that does not exist, said at once

    def input_file(self, value, where: str) -> Path:
        """A manifest or MuST-SHE definition; one that does not exist is noted (:meth:`check_missing`
        names them all in one line) instead of ending the check at the first."""
        if not isinstance(value, str) or not value:
            raise self.error(where, f"expected a path, got {shown(value)}")
        path = self.resolve(value)
        if not path.exists():
            self.missing.append((where, path))
        elif not path.is_file():
            raise self.error(where, f"{path} " + ("is a folder, not a file" if path.is_dir() else "does not exist"))
        return path

    def check_missing(self, shown: int = 3) -> None:
        """Every missing input file at once (a paper's study names 49), with what to do."""
        if not self.missing:
            return
        listed = "; ".join(f"{where}: {path}" for where, path in self.missing[:shown])
        more = f"; ... ({len(self.missing)} in all)" if len(self.missing) > shown else ""
        folder = f"--root {self.root}" if self.root != self.path.resolve().parent else f"the study file's folder {self.root}"
        raise StudyError(
            f"{self.path}: {len(self.missing)} input file(s) do not exist, relative to {folder}: {listed}{more}; "
            "give --root the folder that holds them, or write placeholders to try the plan (study run STUDY --placeholders DIR, then --root DIR --dry-run)"
        )

    def error(self, where: str, message: str) -> StudyError:
        return StudyError(f"{self.path}: {where}: {message}")

    def resolve(self, value: str) -> Path:
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.root / path

    def names(self, value, where: str, kinds=(str,), choices: tuple = ()) -> tuple:
        """A non-empty list of distinct names (or integers), each one of ``choices`` where given."""
        if not (isinstance(value, list) and value) or not all(isinstance(item, kinds) and not isinstance(item, bool) for item in value):
            raise self.error(where, f"expected a non-empty list of {'integers' if int in kinds else 'names'}, got {shown(value)}")
        unknown = [item for item in value if choices and item not in choices]
        if unknown:
            raise self.error(where, f"{unknown[0]!r} is not one of {', '.join(map(str, choices))}")
        if len(set(value)) != len(value):
            raise self.error(where, f"{value!r} names one twice")
        return tuple(value)


def load_study(path: str | Path, root: str | Path | None = None) -> Study:
    """The study in ``path``, every key, value and path checked (:class:`StudyError` otherwise).
    Relative paths are resolved against ``root``, by default the study file's folder."""
    from pydantic import ValidationError

    from experiments.study.study_file import StudyFile, refusal  # pydantic's models: not for --help

    path = Path(path)
    try:
        document = load_yaml(path, "study file", "experiments/studies/")
    except GridError as error:
        raise StudyError(str(error)) from None
    reader = _Reader(path, Path(root).expanduser().resolve() if root is not None else path.resolve().parent)
    if not isinstance(document, dict):
        raise StudyError(f"{path}: a study is a mapping of keys ({', '.join(StudyFile.model_fields)}), got {shown(document)}")
    try:
        study = StudyFile.model_validate(document)
    except ValidationError as error:
        raise StudyError(refusal(error, path, document)) from None
    for key in ("name", "out", "device"):
        if key in document and not document[key].strip():
            wanted = {"name": "the study's name", "out": "the folder of its outputs", "device": "a device such as cpu"}[key]
            raise reader.error(key, f"is empty; give {wanted}")
    out = reader.resolve(study.out)
    if out.exists() and not out.is_dir():
        raise reader.error("out", f"{out} is a file; give a folder for the study's outputs")
    sites = _sites(reader, study.sites, "sites")
    models = _models(reader, study.models, sites)
    corpora = _corpora(reader, study.corpora)
    reader.check_missing()
    f0 = _f0(reader, study.baselines, models, corpora)
    where = "probes[{}]" if isinstance(document.get("probes"), list) else "probes"  # one grid (a mapping) or a list of grids
    probes = tuple(_probes(reader, grid, models, corpora, f0, where.format(index)) for index, grid in enumerate(study.probes or ()))
    models = tuple(_transcribed_corpora(reader, model, index, corpora) for index, model in enumerate(models))
    gaps = _gaps(reader, study.behaviour.gap, isinstance((document.get("behaviour") or {}).get("gap"), list), corpora)
    st_quality = study.behaviour.st_quality.model_dump() if study.behaviour.st_quality is not None else None
    if st_quality is not None:
        st_quality["corpora"] = _scored(reader, st_quality["corpora"], corpora, "st", "behaviour.st_quality.corpora")
    return Study(
        path=path,
        name=study.name,
        out=out,
        device=study.device,
        models=models,
        corpora=corpora,
        extract=study.extract.model_dump(),
        transcribe=study.transcribe.model_dump(),
        probes=probes,
        f0=f0,
        gaps=gaps,
        st_quality=st_quality,
        report=_report(reader, study.report.model_dump(), models),
        analyses=_analyses(reader, study.analyses, corpora, gaps) if study.analyses is not None else None,
    )


def _analyses(reader: _Reader, given: Analyses, corpora: tuple[Corpus, ...], gaps: tuple[dict, ...]) -> dict | None:
    """``analyses``: each of acoustic, lexical and feature_gaps with its defaults, None where it is off;
    ``corpora`` defaults to those the female-male gap scores."""
    analyses = given.model_dump()
    if not any(analyses[name] is not None for name in ("acoustic", "lexical", "feature_gaps")):
        raise reader.error("analyses", "acoustic, lexical and feature_gaps are all off; turn one on, or leave analyses out")
    if analyses["feature_gaps"] is not None and analyses["acoustic"] is None and analyses["lexical"] is None:
        raise reader.error("analyses.feature_gaps", "contrasts the acoustic or lexical features: turn one of them on")
    lexical = analyses["lexical"]
    if lexical is not None:
        if lexical["pipelines"] is None:
            raise reader.error("analyses.lexical.pipelines", "is required: a spaCy pipeline per language, e.g. {en: en_core_web_md, yo: null}")
        for language, name in lexical["pipelines"].items():
            if name is not None and not (isinstance(name, str) and name.strip()):
                raise reader.error(f"analyses.lexical.pipelines.{language}", f"expected a spaCy pipeline's name or null, got {shown(name)}")
        lexical["pipelines"] = {str(language): name for language, name in lexical["pipelines"].items()}
    options = analyses["feature_gaps"]
    if options is not None:
        options["groups"] = list(reader.names(options["groups"], "analyses.feature_gaps.groups", choices=GENDERS))
        if len(options["groups"]) != 2:
            raise reader.error("analyses.feature_gaps.groups", f"expected two groups, e.g. [female, male]; got {options['groups']!r}")
    headline = next((gap for gap in gaps if gap["attribute"] is None and gap["groups"] == ["female", "male"]), None)
    default = list(headline["corpora"]) if headline else None
    corpora_given = analyses["corpora"] if analyses["corpora"] is not None else default
    analyses["corpora"] = _scored(reader, corpora_given, corpora, "asr", "analyses.corpora")
    if lexical is not None:
        keys = [part.key for corpus in corpora if corpus.name in analyses["corpora"] for part in corpus.parts if not part.pooled]
        missing = [key for key in keys if key not in lexical["pipelines"]]
        if missing:
            raise reader.error(
                "analyses.lexical.pipelines",
                f"no pipeline for {', '.join(dict.fromkeys(missing))}; "
                "name a spaCy pipeline for each analysed language, or null to leave its lexical analysis out",
            )
    return analyses


def _report(reader: _Reader, report: dict, models: tuple[Model, ...]) -> dict:
    """``report``: its ``site`` must be a site of a model (checked where every model lists its sites;
    a model with ``sites: all`` has its sites known once extracted)."""
    if report["site"] is not None and all(model.sites != "all" for model in models):
        known = sorted({site for model in models for site in model.sites})
        if report["site"] not in known:
            raise reader.error("report.site", f"{report['site']!r} is no site of the study's models; their sites: {', '.join(known)}")
    return report


def _gaps(reader: _Reader, given: list | None, listed: bool, corpora: tuple[Corpus, ...]) -> tuple[dict, ...]:
    """``behaviour.gap``: one comparison (a mapping) or several (a list of mappings, each its own
    ``groups``, e.g. [female, male] and, on some languages, [other, male]). A comparison with
    ``attribute`` compares groups of that field of the manifests' ``extra`` (two or more of its values,
    named: each against the last) instead of genders; its ``where`` (its key) names it in the plan's refusals."""
    gaps, seen = [], {}
    for index, item in enumerate(given or ()):
        where = f"behaviour.gap[{index}]" if listed else "behaviour.gap"
        gap = item.model_dump()
        if gap["attribute"] is None:
            gap["groups"] = list(reader.names(gap["groups"], f"{where}.groups", choices=GENDERS))
            if len(gap["groups"]) != 2:
                raise reader.error(f"{where}.groups", f"expected two groups, e.g. [female, male]; got {gap['groups']!r}")
        else:
            gap["groups"] = _attribute_groups(reader, gap["attribute"], gap["groups"] if "groups" in item.model_fields_set else None, where)
        compared = (gap["attribute"], tuple(gap["groups"]))
        if compared in seen:
            of = f"{gap['attribute']} " if gap["attribute"] else ""
            raise reader.error(f"{where}.groups", f"{of}{','.join(gap['groups'])} is compared in {seen[compared]} already; give each comparison once")
        seen[compared] = where
        gap["corpora"] = _scored(reader, gap["corpora"], corpora, "asr", f"{where}.corpora")
        if gap["languages"] is not None:
            keys = sorted({part.key for corpus in corpora if corpus.name in gap["corpora"] for part in corpus.parts})
            gap["languages"] = list(reader.names(gap["languages"], f"{where}.languages", choices=tuple(keys)))
        gaps.append(gap | {"where": where})
    return tuple(gaps)


def _attribute_groups(reader: _Reader, attribute: str, groups, where: str) -> list[str]:
    """An attribute comparison's ``groups``: given (the gender default means nothing here), two or more
    different values of ``attribute`` as the manifest spells them (a whole number read as its digits),
    none holding a comma (the gap's task, ``attribute:NAME:A,B``, could not tell its groups apart)."""
    from extract.attributes import LabelError, check_attribute_name

    try:
        check_attribute_name(attribute)
    except LabelError as error:
        raise reader.error(f"{where}.attribute", str(error)) from None
    if groups is None:
        raise reader.error(f"{where}.groups", f"an attribute comparison names its groups: two or more values of {attribute}, e.g. [A, B] (E(A, B))")
    named = [str(group).strip() if isinstance(group, (str, int)) and not isinstance(group, bool) else group for group in groups]
    if len(named) < 2 or not all(isinstance(group, str) and group for group in named) or len(set(named)) < len(named):
        raise reader.error(f"{where}.groups", f"expected two or more different values of {attribute} (strings or whole numbers), got {shown(groups)}")
    if comma := next((group for group in named if "," in group), None):  # [a,b, c] and [a, b, c] would be one task, one report file
        raise reader.error(f"{where}.groups", f"{attribute} {comma!r} holds a comma, which the gap's task and report name cannot spell; rename it")
    return named


def _scored(reader: _Reader, value, corpora: tuple[Corpus, ...], task: str, where: str) -> tuple[str, ...]:
    """The corpora a behaviour scores: those named (each of ``task``), by default every corpus of ``task``."""
    of_task = tuple(corpus.name for corpus in corpora if corpus.task == task)
    if value is None:
        return of_task
    return reader.names(value, where, choices=of_task)


def _sites(reader: _Reader, value, where: str) -> str | tuple[str, ...]:
    if value == "all":
        return "all"
    return reader.names(value, where)


def _models(reader: _Reader, entries: list[ModelEntry], sites) -> tuple[Model, ...]:
    from extract.families import FAMILIES
    from extract.spec import DTYPES, TINY_RANDOM, ModelSpec, ModelSpecError

    models, seen = [], {}
    for index, entry in enumerate(entries):
        where, checked = f"models[{index}]", entry.model_dump()
        name = checked["name"]
        if name in seen:
            raise reader.error(f"{where}.name", f"{name!r} is also models[{seen[name]}]'s name; each model needs its own label")
        seen[name] = index
        if checked["family"] not in FAMILIES:
            raise reader.error(f"{where}.family", f"{checked['family']!r} is not one of {', '.join(sorted(FAMILIES))}")
        if checked["dtype"] not in DTYPES:
            raise reader.error(f"{where}.dtype", f"{checked['dtype']!r} is not one of {', '.join(sorted(DTYPES))}")
        checkpoint = checked["checkpoint"]
        local = checkpoint and (checkpoint.startswith((".", "/", "~")) or reader.resolve(checkpoint).exists())
        if local and not checkpoint.startswith("bundled-") and checkpoint != TINY_RANDOM:
            checkpoint = str(reader.resolve(checkpoint))  # a local folder, relative to the study
        try:
            ModelSpec(checked["family"], checkpoint, device="cpu", random_init=bool(checked["random_init"])).check_checkpoint()
        except ModelSpecError as error:
            raise reader.error(f"{where}.checkpoint", str(error)) from None
        own_sites = _sites(reader, checked["sites"], f"{where}.sites") if checked["sites"] is not None else sites
        languages = reader.names(checked["languages"], f"{where}.languages") if checked["languages"] is not None else None
        models.append(Model(**{**checked, "checkpoint": checkpoint, "sites": own_sites, "languages": languages}))
    return tuple(models)


def _transcribed_corpora(reader: _Reader, model: Model, index: int, corpora: tuple[Corpus, ...]) -> Model:
    """A model's ``transcribe`` given as corpora: each must be one of the study's."""
    if isinstance(model.transcribe, bool):
        return model
    names = reader.names(list(model.transcribe), f"models[{index}].transcribe", choices=tuple(corpus.name for corpus in corpora))
    return replace(model, transcribe=names)


def _corpora(reader: _Reader, entries: list) -> tuple[Corpus, ...]:
    corpora, seen = [], {}
    for index, entry in enumerate(entries):
        where, checked = f"corpora[{index}]", entry.model_dump()
        if checked["name"] in seen:
            raise reader.error(f"{where}.name", f"{checked['name']!r} is also corpora[{seen[checked['name']]}]'s name")
        seen[checked["name"]] = index
        corpora.append(Corpus(checked["name"], checked["task"], _parts(reader, checked, where)))
    _distinct_manifests(reader, corpora)
    return tuple(corpora)


def _distinct_manifests(reader: _Reader, corpora: list[Corpus]) -> None:
    """Each manifest belongs to one corpus: its rows record one ``dataset``, the corpus's name, on which
    the tables join (two corpora reading one manifest would give two probe rows claiming one dataset)."""
    seen: dict[Path, tuple[int, str]] = {}
    for index, corpus in enumerate(corpora):
        for part in corpus.parts:
            where = f"corpora[{index}].manifests.{part.key}"
            identity = part.manifest.resolve()
            if identity in seen and seen[identity][0] != index:  # within one corpus, its keys' languages tell the parts apart
                raise reader.error(
                    where, f"{part.manifest} is also {seen[identity][1]}; a manifest's rows record one dataset, so each corpus needs its own manifest"
                )
            seen.setdefault(identity, (index, where))


def _parts(reader: _Reader, corpus: dict, where: str) -> tuple[Part, ...]:
    """A corpus's manifests: asr keys are languages; st keys are SRC-TGT directions, or languages
    translated into every one of ``tgt_langs``."""
    task, targets = corpus["task"], corpus["tgt_langs"]
    if targets is not None:
        if task != "st":
            raise reader.error(f"{where}.tgt_langs", "only an st corpus has target languages")
        targets = reader.names(targets, f"{where}.tgt_langs")
    if corpus["mustshe"] is not None and task != "st":
        raise reader.error(f"{where}.mustshe", "MuST-SHE definitions belong to an st corpus")
    manifests, definitions = corpus["manifests"], corpus["mustshe"] or {}
    if not manifests:
        raise reader.error(f"{where}.manifests", "expected at least one KEY: manifest")
    parts = []
    for key, manifest in manifests.items():
        key_where = f"{where}.manifests.{key}"
        if problem := name_problem(str(key)):
            raise reader.error(key_where, problem)
        language, direction = _language(reader, str(key), task, targets, key_where)
        mustshe = reader.input_file(definitions[key], f"{where}.mustshe.{key}") if key in definitions else None
        parts.append(Part(corpus["name"], str(key), language, reader.input_file(manifest, key_where), direction or targets or (None,), mustshe))
    unknown = [key for key in definitions if key not in manifests]
    if unknown:
        raise reader.error(f"{where}.mustshe.{unknown[0]}", f"no manifest has this key; keys: {', '.join(map(str, manifests))}")
    return tuple(parts)


def _language(reader: _Reader, key: str, task: str, targets, where: str) -> tuple[str, tuple[str, ...] | None]:
    """A manifest key's source language, and its target when the key is a direction."""
    if task == "asr" and key == POOLED:
        return None, None
    if task == "asr" or targets is not None:
        if task == "st" and "-" in key:
            raise reader.error(where, f"{key!r} is a direction, but tgt_langs are given: key the manifests by source language")
        return key, None
    source, _, target = key.partition("-")
    if not (source and target):
        raise reader.error(where, f"an st manifest is keyed by direction, e.g. en-es (or by language with tgt_langs: [...]); got {key!r}")
    return source, (target,)


def _f0(reader: _Reader, baselines: Baselines, models: tuple[Model, ...], corpora: tuple[Corpus, ...]) -> dict | None:
    """``baselines.f0``: the corpora whose F0 stores are written (default: every asr corpus) and the pitch range rule."""
    if baselines.f0 is None:
        return None
    if any(model.name == F0 for model in models):
        raise reader.error("baselines.f0", f"a model is named {F0!r}, which names the F0 baseline in grids; rename the model")
    f0 = baselines.f0.model_dump()
    f0["corpora"] = _scored(reader, f0["corpora"], corpora, "asr", "baselines.f0.corpora")
    return f0


def _probes(reader: _Reader, grid: Grid, models: tuple[Model, ...], corpora: tuple[Corpus, ...], f0: dict | None, where: str) -> ProbeGrid:
    mapping = grid.model_dump(exclude_unset=True)  # the keys given
    options = {key: mapping[key] for key in PROBE_OPTIONS if key in mapping}
    try:
        check_option_types(options, f"{reader.path}: {where}")
    except GridError as error:
        raise StudyError(str(error)) from None
    probes = reader.names(mapping.get("probes", [DEFAULT_KIND]), f"{where}.probes", choices=tuple(KINDS))
    controls = reader.names(mapping.get("controls", ["none"]), f"{where}.controls", choices=CONTROLS)
    seeds = reader.names(mapping.get("seeds", [0]), f"{where}.seeds", kinds=(int,))
    names = tuple(corpus.name for corpus in corpora)
    apply_to = mapping.get("apply_to")
    if apply_to is not None:
        if apply_to not in names:
            raise reader.error(f"{where}.apply_to", f"{apply_to!r} is no corpus of the study; corpora: {', '.join(names)}")
        applying = [name for name, kind in KINDS.items() if kind.applies_to_other_stores]
        if not set(applying) & set(probes):
            raise reader.error(f"{where}.apply_to", f"only {' or '.join(applying)} probes are applied to another store; add {applying[0]} to {where}.probes")
    learn_from = reader.names(mapping["corpora"], f"{where}.corpora", choices=names) if "corpora" in mapping else tuple(n for n in names if n != apply_to)
    if apply_to in learn_from:
        raise reader.error(f"{where}.corpora", f"{apply_to!r} is also apply_to: a probe is applied to speakers it did not learn from")
    choices = tuple(model.name for model in models) + ((F0,) if f0 is not None else ())
    model_names = reader.names(mapping["models"], f"{where}.models", choices=choices) if "models" in mapping else None
    if model_names and F0 in model_names:
        outside = [name for name in learn_from if name not in f0["corpora"]]
        if outside:
            raise reader.error(f"{where}.corpora", f"{outside[0]!r} has no F0 store: add it to baselines.f0.corpora, or leave f0 off this grid")
    sites = reader.names(mapping["sites"], f"{where}.sites") if "sites" in mapping else None
    languages: tuple[str | None, ...] = (None,)
    if "languages" in mapping:
        languages = reader.names(mapping["languages"], f"{where}.languages")
        unpooled = [part.name for name in learn_from for part in next(c for c in corpora if c.name == name).parts if not part.pooled]
        if unpooled:
            raise reader.error(
                f"{where}.languages", f"a language filter needs pooled parts (manifests keyed {POOLED}); {unpooled[0]} holds one language already"
            )
    for probe in probes:
        for control in controls:
            try:
                ProbeConfig(store="-", site="-", probe=probe, control=control, **options)
            except (ProbeError, TypeError) as error:
                raise reader.error(where, str(error)) from None
    if sites is not None:
        _grid_sites(reader, sites, [model for model in models if model_names is None or model.name in model_names], model_names, where)
    return ProbeGrid(probes, controls, seeds, learn_from, apply_to, options, model_names, sites, languages, where)


def _grid_sites(reader: _Reader, sites: tuple[str, ...], models: list[Model], model_names, where: str) -> None:
    """A grid's ``sites`` must each be a site of one of its models whose sites are listed (a model with
    ``sites: all`` has its sites known once extracted: the probe stage checks those)."""
    if any(model.sites == "all" for model in models):
        return
    known = {site for model in models for site in model.sites} | ({F0} if model_names and F0 in model_names else set())
    unknown = [site for site in sites if site not in known]
    if unknown:
        raise reader.error(f"{where}.sites", f"{unknown[0]!r} is no site of the models it probes; their sites: {', '.join(sorted(known))}")
