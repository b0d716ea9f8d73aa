"""The demo's study and its work folder, as a library: what ``experiments.demo`` runs and what the
opt-in stages (``experiments.demo.extras``) read.

The demo is a study (``experiments.study``): :func:`demo_study` writes its study file into the work
folder (``WORK/demo.yaml``, absolute paths to the corpus), the study writes everything under
``WORK`` (``stores/MODEL/CORPUS-KEY``, ``hyps/``, ``behaviour/``, ``probes/probes.jsonl``,
``results/``, ``RESULTS.md``), and the report reads the collected results. The extras get the demo's
stores, transcription jobs and probe runs from here (:func:`extraction_jobs`,
:func:`transcription_jobs`, :func:`probe_configs`), built by the study's own stage functions, so that
a job here is the job the study ran.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from experiments.recipes.democorpus.build import DemoCorpus
from experiments.study.context import Context, Layout
from experiments.study.schema import load_study
from experiments.study.stages.extract import extraction_job
from experiments.study.stages.probe import probe_configs as study_probe_configs
from experiments.study.stages.transcribe import transcription_job
from extract.manifest import read_manifest, write_manifest

ATTENTION = {"lr": 1e-3, "max_epochs": 40}  # faster than the paper's 1e-4 on 2 CPU cores; stated in the report
TINY_PREFIX = "tiny-random-"  # the model label of a family's tiny random model: tiny-random-FAMILY
WHISPER_BASE_SITES = ("encoder.embed", *(f"encoder.layer.{index}" for index in range(6)), "encoder.final")
ASR, MUSTSHE, REAL = "demo", "must_she", "realvoices"  # the demo's corpora (the datasets its manifests' rows record)
REAL_PER_SPEAKER = {False: 6, True: 3}  # real-voice clips per voice, full demo and --trim: what fits the 20-minute budget
POOLED = f"{ASR}-all"  # the part name of the pooled English and Spanish manifest
HELD_OUT = ("dev", "test")  # the manifest splits whose speakers no probe, intervention file or GRAFN filter is fitted on


def log(message: str, stage: str = "") -> None:
    """One line of the demo's progress: ``[demo]``, or ``[demo:STAGE]`` from an opt-in stage."""
    print(f"[demo{':' + stage if stage else ''}] {message}", flush=True)


def tiny_families() -> dict[str, list[str]]:
    """The tiny random models the demo runs: family -> its demo sites. A function, not a constant: the
    family modules load torch, which ``python -m experiments.demo --help`` never needs."""
    from extract.families import FAMILIES

    return {name: list(family.demo_sites) for name, family in FAMILIES.items() if family.demo_sites}


@dataclass
class Work:
    """Where the demo writes: ``root`` is the study's ``out``; ``out`` the figures and report."""

    root: Path
    corpus: DemoCorpus
    out: Path
    dtype: str  # compute dtype of the Whisper models
    threads: int  # torch CPU threads

    @property
    def study_file(self) -> Path:
        return self.root / "demo.yaml"

    @property
    def layout(self) -> Layout:
        """The study's own layout of ``root``: its probe rows (``layout.probes``), collected tables
        (``layout.results``: ``long.csv``, ``f1_vs_gap.csv``, ``correlations.json``, ...)."""
        return Layout(self.root)

    @property
    def realvoices(self) -> Path:
        """The real-voice corpus of the demo (``manifest.jsonl``, ``CARD.md``), or ``skipped.json`` saying why not."""
        return self.root / "realvoices"

    def store(self, model: str, corpus: str = ASR) -> Path:
        """The store of ``model`` on a pooled corpus (``stores/MODEL/CORPUS-all``)."""
        return self.root / "stores" / model / f"{corpus}-all"

    def gap(self, model: str, corpus: str = ASR) -> Path:
        """The gap report of ``model`` on a pooled corpus (one entry per language)."""
        return self.root / "behaviour" / model / f"gap-{corpus}-all.json"

    def hypotheses(self, model: str, corpus: str = ASR) -> Path:
        return self.root / "hyps" / model / f"{corpus}-all.jsonl"

    @property
    def mustshe(self) -> Path:
        return self.root / "behaviour" / "whisper-base" / f"mustshe-{MUSTSHE}-en-es.json"


def demo_study(work: Work, positions: int, real: bool = False) -> dict:
    """The demo's study file as a document: Whisper base (every site, positional probes with the
    shuffled control, MDL at the last site, per-language probes and an attention probe applied to
    MuST-SHE at ``encoder.final``), its random-init twin, Whisper tiny.en on the English utterances,
    and the tiny random SeamlessM4T v2, S2T and ZeroSwot stand-in at their demo sites. With ``real``
    (the real-voice corpus was built), the second corpus: Whisper base's transcripts and gaps on it,
    and leave-one-speaker-out mean-pooled probes at every site beside the F0 baseline."""
    whisper = {"family": "whisper", "dtype": work.dtype}
    base = {**whisper, "checkpoint": "bundled-base"}
    last, earlier = WHISPER_BASE_SITES[-1], list(WHISPER_BASE_SITES[:-1])
    tiny = [f"{TINY_PREFIX}{family}" for family in tiny_families()]
    positional = {"probes": ["positional"], "corpora": [ASR], "positions": positions}
    study = {
        "name": "demo",
        "out": str(work.root),
        "models": [
            {"name": "whisper-base", **base, "sites": list(WHISPER_BASE_SITES)},
            {"name": "whisper-base-random", **base, "sites": list(WHISPER_BASE_SITES), "random_init": True, "transcribe": False},
            {"name": "whisper-tiny.en", **whisper, "checkpoint": "bundled-tiny.en", "languages": ["en"], "transcribe": [ASR], "sites": [last]},
            *(
                {"name": name, "family": family, "checkpoint": "tiny-random", "languages": ["en"], "transcribe": False, "sites": sites}
                for name, (family, sites) in zip(tiny, tiny_families().items())
            ),
        ],
        "corpora": [
            {"name": ASR, "task": "asr", "manifests": {"all": str(work.corpus.manifest)}},
            {"name": MUSTSHE, "task": "st", "manifests": {"en-es": str(work.corpus.mustshe_manifest)}, "mustshe": {"en-es": str(work.corpus.mustshe_tsv)}},
        ],
        "extract": {"storage_dtype": "float16"},
        "transcribe": {"num_beams": 1, "max_new_tokens": 128, "translate_by_forcing": True},
        "probes": [
            {**positional, "models": ["whisper-base"], "sites": earlier, "controls": ["none", "shuffled"]},
            {**positional, "models": ["whisper-base"], "sites": [last], "controls": ["none"], "mdl": True},
            {**positional, "models": ["whisper-base"], "sites": [last], "controls": ["shuffled"]},
            {**positional, "models": ["whisper-base-random"], "controls": ["none"]},
            {**positional, "models": ["whisper-base"], "sites": [last], "languages": ["en", "es"]},
            {**positional, "models": ["whisper-tiny.en"], "sites": [last], "languages": ["en"]},
            {"probes": ["attention"], "models": ["whisper-base"], "sites": [last], "corpora": [ASR], "apply_to": MUSTSHE, **ATTENTION},
            {"probes": ["attention"], "models": tiny, "corpora": [ASR], **ATTENTION},
        ],
        "behaviour": {"gap": {"iterations": 1000, "seed": 0, "corpora": [ASR]}},
        "report": {"site": last},
    }
    if real:
        study["corpora"].append({"name": REAL, "task": "asr", "manifests": {"all": str(work.realvoices / "manifest.jsonl")}})
        study["baselines"] = {"f0": {"corpora": [REAL]}}
        loso = {"probes": ["mean"], "corpora": [REAL], "split": "loso"}
        study["probes"].append({**loso, "models": ["whisper-base", "f0"], "controls": ["none"]})
        study["probes"].append({**loso, "models": ["whisper-base", "f0"], "sites": [last, "f0"], "controls": ["shuffled"]})
        study["behaviour"]["gap"]["corpora"].append(REAL)
    return study


def write_study(work: Work, positions: int, real: bool = False) -> Path:
    """``WORK/demo.yaml``, rewritten only when it changed (a rerun then only checks)."""
    import yaml

    class Plain(yaml.SafeDumper):  # every value written out, no &anchors for the grids' shared lists
        def ignore_aliases(self, data) -> bool:
            return True

    text = "# the demo's study, written by python -m experiments.demo (edits are overwritten)\n"
    text += yaml.dump(demo_study(work, positions, real), Dumper=Plain, sort_keys=False, allow_unicode=True, default_flow_style=None, width=160)
    work.root.mkdir(parents=True, exist_ok=True)
    if not work.study_file.exists() or work.study_file.read_text(encoding="utf-8") != text:
        work.study_file.write_text(text, encoding="utf-8")
    return work.study_file


def whisper(work: Work, checkpoint: str):
    """A bundled Whisper model in the demo's compute dtype (the default device), as the study loads it."""
    from extract.spec import ModelSpec

    return ModelSpec("whisper", checkpoint, dtype=work.dtype)


def context(work: Work):
    """The study context of the demo's study file (written by :func:`write_study`)."""
    from extract.spec import default_device

    study = load_study(work.study_file)
    return Context(study, study.device or default_device(), show_progress=False)


def _model_part(study, model: str, part: str):
    chosen = next(m for m in study.models if m.name == model)
    corpus = next(c for c in study.corpora if any(p.name == part for p in c.parts))
    return chosen, corpus, next(p for p in corpus.parts if p.name == part)


def extraction_jobs(work: Work) -> dict:
    """The demo's Whisper stores as the study's extraction jobs, by the names the extras use."""
    ctx = context(work)
    named = {"whisper-base": ("whisper-base", POOLED), "whisper-base-random": ("whisper-base-random", POOLED)}
    named |= {"whisper-tiny.en": ("whisper-tiny.en", POOLED), "whisper-base-mustshe": ("whisper-base", f"{MUSTSHE}-en-es")}
    return {name: extraction_job(ctx, *_model_part(ctx.study, model, part)) for name, (model, part) in named.items()}


def transcription_jobs(work: Work) -> dict:
    """The demo's hypotheses as the study's transcription jobs, by the names the extras use."""
    ctx = context(work)
    named = {"whisper-base": ("whisper-base", POOLED, None), "whisper-tiny.en": ("whisper-tiny.en", POOLED, None)}
    named["whisper-base-mustshe-es"] = ("whisper-base", f"{MUSTSHE}-en-es", "es")
    return {name: transcription_job(ctx, *_model_part(ctx.study, model, part), target) for name, (model, part, target) in named.items()}


def probe_configs(work: Work) -> list:
    """Every probe run of the demo's study (ProbeConfig), as the study plans them."""
    return study_probe_configs(context(work))[0]


def write_corpus_card(work: Work) -> bool:
    """The demo corpus's card (per-voice WER, pitch, duration; the build's intelligibility limit)
    from the study's Whisper base transcripts of the corpus, so the corpus is not transcribed twice.
    Written when missing or older than those transcripts; returns whether it was written."""
    from experiments.recipes.democorpus.card import write_card

    hypotheses = work.hypotheses("whisper-base")
    if work.corpus.card.exists() and work.corpus.card.stat().st_mtime >= hypotheses.stat().st_mtime:
        return False
    rows = [json.loads(line) for line in hypotheses.read_text(encoding="utf-8").splitlines() if line.strip()]
    described = f"the demo study's whisper-base transcripts ({work.dtype}, greedy, at most 128 new tokens, the language forced): {hypotheses}"
    write_card(work.corpus, {row["id"]: row["hypothesis"] for row in rows}, described, show_progress=False)
    return True


def build_real_voices(work: Work, trim: bool, seed: int) -> str | None:
    """The real-voice corpus (``experiments.recipes.realvoices``, every row's dataset ``realvoices``)
    in ``WORK/realvoices``, kept when its card records these settings. Returns None when built, else
    the reason it was skipped (``apt-get`` cannot reach the Debian archive, or no G.722 decoder),
    also written to ``WORK/realvoices/skipped.json`` for the report."""
    from experiments.recipes.realvoices.build import build_realvoices
    from experiments.recipes.realvoices.decode import DecoderMissingError
    from experiments.recipes.realvoices.fetch import FetchError
    from experiments.recipes.realvoices.sources import LANGUAGES

    settings = {"languages": sorted(LANGUAGES), "per_speaker": REAL_PER_SPEAKER[trim], "seed": seed, "dataset": REAL}
    card, skipped = work.realvoices / "card.json", work.realvoices / "skipped.json"
    if card.exists() and (work.realvoices / "manifest.jsonl").exists() and json.loads(card.read_text())["settings"] == settings:
        return None
    try:
        build_realvoices(work.realvoices, None, settings["per_speaker"], seed, show_progress=False, dataset=REAL)
    except (FetchError, DecoderMissingError) as error:
        reason = str(error).splitlines()[0]
        work.realvoices.mkdir(parents=True, exist_ok=True)
        skipped.write_text(json.dumps({"reason": reason}) + "\n")
        return reason
    skipped.unlink(missing_ok=True)
    return None


def real_voices_skipped(work: Work) -> str | None:
    """Why the demo's last run left the real voices out (None: they are in)."""
    skipped = work.realvoices / "skipped.json"
    return json.loads(skipped.read_text())["reason"] if skipped.exists() else None


def held_out_manifest(manifest: Path, out: Path) -> Path:
    """The utterances of ``manifest``'s :data:`HELD_OUT` speakers, written to ``out`` once."""
    if not out.exists():
        write_manifest(out, [u for u in read_manifest(manifest) if u.split in HELD_OUT])
    return out


def find_config(configs: list, store: Path, site: str, probe: str = "positional"):
    """The one run of ``configs`` on ``store`` at ``site`` with this probe, without a control or a language filter."""
    (config,) = [c for c in configs if Path(c.store) == Path(store) and c.site == site and c.probe == probe and c.control == "none" and c.language is None]
    return config
