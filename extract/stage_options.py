"""The options of the model flags and the extraction and transcription stages, declared once (:mod:`extract.options`).

``speech-gender extract`` / ``transcribe`` derive their flags from these fields, a study file its
``extract:`` / ``transcribe:`` keys (those marked ``study``), and :class:`extract.jobs.ExtractionJob`
is an :class:`ExtractOptions` plus the model, the manifest and the store: so a default, a choice or a
check is written here and nowhere else. Light on purpose: every ``--help`` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from extract.device import DTYPE_NAMES, dtype_name
from extract.families import FAMILY_NAMES
from extract.options import OptionError, check_options, option, seed_option
from extract.provenance import label_argument

GENDER_CHOICES = ("female", "male")
ENGINES = ("transformers", "ctranslate2")  # transcribe --engine (extract.families.whisper_ct2)
COMPUTE_TYPES = ("int8", "int8_float16", "float16", "float32")  # --engine ctranslate2's quantisations


def _interventions_option(edited: str, recorded: str):
    """``--intervene FILE ...``, an option of extraction and transcription (``edited``: what the
    files edit; ``recorded``: where the run records them)."""
    return option(
        (),
        f"an eraser or steering vector (python -m experiments.erase fit) edited into the {edited} at its site while it runs; "
        f"several are applied in the order given; recorded in {recorded} (default: none)",
        flag="--intervene",
        metavar="FILE",
        role="input",
    )


def _intervene_gender_option():
    """``--intervene-gender``, beside :func:`_interventions_option`."""
    return option(None, "apply the --intervene files only to utterances of this gender (default: every utterance)", choices=GENDER_CHOICES)


def _sites(value: str) -> str | tuple[str, ...]:
    """``--sites``: ``all``, or names (and ``every:K``) separated by commas."""
    return "all" if value == "all" else tuple(name.strip() for name in value.split(",") if name.strip())


def _check_interventions(options) -> None:
    if options.intervene_gender is not None and not options.interventions:
        raise OptionError("{intervene_gender} needs at least one {interventions} FILE", "intervene_gender", "interventions")


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """Which model runs: the model flags of every stage that loads one (``--device`` aside: its
    default depends on the machine) and, those marked ``study``, a study's model keys."""

    family: str = option(help="the model family (--model: deprecated spelling)", choices=tuple(sorted(FAMILY_NAMES)), aliases=("--model",))
    checkpoint: str | None = option(
        None,
        "hub id or local folder (default: the family's reference checkpoint); 'bundled-base' or 'bundled-tiny.en' for the offline Whisper; "
        "'tiny-random': the family's tiny model with random weights (offline; Whisper's also transcribes offline, with the bundled tokenizer)",
        role="input",
        study=True,
    )
    revision: str | None = option(None, "hub revision (a 40-hex commit is required for remote code)", study=True)
    trust_remote_code: bool = option(False, "allow hub code (ZeroSwot), at a pinned --revision", study=True)
    dtype: str = option(
        "float32",
        "model compute dtype; fp32, fp16 and bf16 are accepted too",
        parse=dtype_name,
        metavar="{" + ",".join(DTYPE_NAMES) + "}",
        study=True,
    )


@dataclass(frozen=True, kw_only=True)
class RandomInitOptions:
    """The random-weights baseline of an architecture: ``extract``'s flags and a study model's keys."""

    random_init: bool = option(False, "same architecture, random weights (the random-model baseline)", study=True)
    seed: int = seed_option("seed for --random-init", study=True)


@dataclass(frozen=True, kw_only=True)
class ExtractOptions:
    """How a store is extracted; what of it determines the stored values is in the store's config."""

    sites: str | tuple[str, ...] = option(
        "all",
        "comma-separated site names, 'all', or every:K (every K-th site and the last; see docs/scale.md)",
        parse=_sites,
        metavar="SITES",
    )
    label: str | None = option(
        None,
        "the model's name in every output built from this store (probe rows, collected tables); "
        "default: from the family and checkpoint, e.g. whisper-base, whisper-base-random with --random-init",
        parse=label_argument,
    )
    storage_dtype: str = option("float16", "dtype of the stored states", choices=("float16", "float32"), study=True)
    batch_seconds: float = option(120.0, "total seconds of model input per batch on a CPU", positive=True, study=True)
    batch_size: int | None = option(
        None,
        "utterances per batch, instead of --batch-seconds (default on a GPU: as many as half its free memory holds, at most 16; "
        "Whisper pads every clip to 30 s, so there a batch costs its count)",
        least=1,
    )
    max_seconds: float = option(30.0, "trim audio to this length (30 for ASR, 60 for ST)", positive=True, study=True)
    limit: int | None = option(None, "only the first N utterances of the manifest", least=1)
    num_shards: int = option(1, "split the manifest into this many shards, each extracted by its own run", least=1, study=True)
    shard_index: int = option(0, "the shard this run extracts, from 0 to --num-shards - 1")
    utterances_per_part: int = option(256, "utterances per part file (the unit of resume)", least=1, study=True)
    keep_padding: bool = option(False, "Whisper: store all 1500 frames of the padded 30 s input", study=True)
    positions: int | None = option(None, "store only the first N frames of each utterance (enough for per-position probes up to --positions N)", least=1)
    pool: str | None = option(
        None, "store one vector per utterance and site, the mean over its speech frames (enough for --probe mean, LOSO included)", choices=("mean",)
    )
    interventions: tuple[Path, ...] = _interventions_option(edited="model", recorded="the store's config")
    intervene_gender: str | None = _intervene_gender_option()

    def __post_init__(self):
        if isinstance(self.sites, str) and self.sites != "all":
            object.__setattr__(self, "sites", _sites(self.sites))
        object.__setattr__(self, "interventions", tuple(Path(path) for path in self.interventions))
        check_options(self)
        if not 0 <= self.shard_index < self.num_shards:
            raise OptionError(
                f"{{shard_index}} {self.shard_index} is outside 0..{self.num_shards - 1} for {{num_shards}} {self.num_shards}", "shard_index", "num_shards"
            )
        if self.positions is not None and self.pool is not None:
            raise OptionError("{positions} and {pool}: give one (a pooled store keeps one vector per utterance, not positions)", "positions", "pool")
        _check_interventions(self)


@dataclass(frozen=True, kw_only=True)
class TranscribeOptions:
    """How a hypotheses file is made; what of it a resumed run must match is in ``OUT.settings.json``."""

    task: str = option(help="asr: transcripts; st: translations into --tgt-lang", choices=("asr", "st"))
    tgt_lang: str | None = option(None, "target language for --task st (ISO 639-1, or the model's own code)")
    label: str | None = option(
        None,
        "the model label written in each row as model (default: from the family and checkpoint, e.g. whisper-base); --name is its older spelling",
        also=("--name",),
        parse=label_argument,
    )
    batch_seconds: float = option(240.0, "total input seconds per batch", positive=True, study=True)
    max_seconds: float | None = option(None, "trim audio to this length (default 30 for asr, 60 for st)", positive=True, study=True)
    limit: int | None = option(None, "only the first N utterances of the manifest", least=1)
    num_beams: int | None = option(None, "override the model's generation config", least=1, study=True)
    max_new_tokens: int | None = option(None, "override the model's generation config", least=1, study=True)
    decoder: str | None = option(
        None, "ZeroSwot: the NLLB decoder checkpoint (default: the NLLB model named by the checkpoint's config, nllb_model_name_or_path)", role="input"
    )
    adapter: str | None = option(None, "MMS (ssl family): the language adapter to load, an ISO 639-3 code such as fra (default: the manifest language's)")
    translate_by_forcing: bool = option(
        False,
        "Whisper, ST into a language other than English: transcribe with the target language forced (not a trained direction)",
        flag="--whisper-translate-by-forcing",
        study=True,
    )
    interventions: tuple[Path, ...] = _interventions_option(edited="encoder", recorded="OUT.settings.json")
    intervene_gender: str | None = _intervene_gender_option()
    engine: str = option(
        "transformers",
        "what runs the model: transformers, or ctranslate2 for Whisper checkpoints (converted once into the cache; "
        "no --intervene); recorded in OUT.settings.json, and the model label gets -ct2-COMPUTE_TYPE",
        choices=ENGINES,
        study=True,
    )
    compute_type: str | None = option(
        None, "--engine ctranslate2: the weights' quantisation (default int8 on a CPU, float16 on a GPU)", choices=COMPUTE_TYPES, study=True
    )

    def __post_init__(self):
        object.__setattr__(self, "interventions", tuple(Path(path) for path in self.interventions))
        check_options(self)
        if self.task == "st" and not self.tgt_lang:
            raise OptionError("{task} st needs {tgt_lang}", "task", "tgt_lang")
        _check_interventions(self)
        if self.compute_type is not None and self.engine != "ctranslate2":
            raise OptionError("{compute_type} is an option of {engine} ctranslate2", "compute_type", "engine")
        if self.engine == "ctranslate2" and self.interventions:
            raise OptionError(
                "{engine} ctranslate2 cannot apply {interventions}: the edits are hooks, which only the transformers engine has", "engine", "interventions"
            )


@dataclass(frozen=True, kw_only=True)
class DecoderStatesOptions:
    """How a decoder-state store is made (``speech-gender decoder_states``): the decoding of
    ``transcribe``, the storing of ``extract``; what of it determines the rows is in the store's config."""

    sites: str | tuple[str, ...] = option(
        "all", "comma-separated decoder sites (decoder.layer.I, decoder.final), 'all', or every:K (every K-th site and the last)", parse=_sites, metavar="SITES"
    )
    task: str = option(help="asr: transcripts; st: translations into --tgt-lang", choices=("asr", "st"))
    tgt_lang: str | None = option(None, "target language for --task st (ISO 639-1, or the model's own code)")
    label: str | None = option(
        None, "the model's name in every output built from this store (default: from the family and checkpoint, e.g. whisper-base)", parse=label_argument
    )
    num_beams: int | None = option(None, "override the model's generation config", least=1)
    max_new_tokens: int | None = option(None, "override the model's generation config", least=1)
    translate_by_forcing: bool = option(
        False,
        "Whisper, ST into a language other than English: transcribe with the target language forced (not a trained direction)",
        flag="--whisper-translate-by-forcing",
    )
    storage_dtype: str = option("float16", "dtype of the stored states", choices=("float16", "float32"))
    batch_seconds: float = option(240.0, "total input seconds per batch", positive=True)
    batch_size: int | None = option(None, "utterances per batch, instead of --batch-seconds", least=1)
    max_seconds: float | None = option(None, "trim audio to this length (default 30 for asr, 60 for st)", positive=True)
    limit: int | None = option(None, "only the first N utterances of the manifest", least=1)
    num_shards: int = option(1, "split the manifest into this many shards, each extracted by its own run", least=1)
    shard_index: int = option(0, "the shard this run extracts, from 0 to --num-shards - 1")
    utterances_per_part: int = option(256, "utterances per part file (the unit of resume)", least=1)

    def __post_init__(self):
        if isinstance(self.sites, str) and self.sites != "all":
            object.__setattr__(self, "sites", _sites(self.sites))
        check_options(self)
        if self.task == "st" and not self.tgt_lang:
            raise OptionError("{task} st needs {tgt_lang}", "task", "tgt_lang")
        if not 0 <= self.shard_index < self.num_shards:
            raise OptionError(
                f"{{shard_index}} {self.shard_index} is outside 0..{self.num_shards - 1} for {{num_shards}} {self.num_shards}", "shard_index", "num_shards"
            )
        if not self.sites:
            raise OptionError("{sites} names no site: give decoder site names, 'all' or every:K", "sites")
