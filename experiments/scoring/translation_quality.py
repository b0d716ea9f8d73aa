"""BLEU, chrF and COMET of translations, overall and per speaker gender (``python -m experiments.st_quality``).

Rows are those of ``experiments.transcribe --task st``: ``reference`` (a string or a list of
references), ``hypothesis``, ``source`` (the transcript, for COMET), ``gender``, ``tgt_lang``; they are read with the
shared id-keyed reader (a duplicate id, a missing key, a null or numeric hypothesis or reference,
an empty file: an error naming the file and line). BLEU and chrF come from sacrebleu with
references passed as a list of streams, and their signatures are recorded. COMET loads a local
checkpoint or a hub name (which needs the network), in this interpreter when unbabel-comet is
installed here (the ``[comet]`` extra) or in another one (:mod:`experiments.scoring.comet_worker`). The scores per gender go through the
group-metrics frame; COMET is scored once per segment.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from sacrebleu.metrics import BLEU, CHRF

from experiments.results.records import StQualityScores
from experiments.scoring import comet_worker
from experiments.scoring.group_metrics import GroupMetricFrame
from extract.errors import UserError
from extract.manifest import ManifestError, read_keyed_rows
from extract.provenance import hypotheses_subject, identified
from extract.records import schema_version, write_document

DEFAULT_COMET = "Unbabel/wmt22-comet-da"
SCORES_SCHEMA = schema_version("st_quality")  # the scores JSON's version (extract.records.FORMATS); files without ``schema`` read as version 1

Scorer = Callable[[list[dict]], list[float]]  # [{"src", "mt", "ref"}] -> segment scores


REQUIRED = ("reference", "hypothesis", "gender")


def _is_reference(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and bool(value) and all(isinstance(r, str) for r in value))


def read_rows(path: Path) -> list[dict]:
    """``experiments.transcribe --task st`` rows; bad rows raise :class:`ManifestError` with file:line."""
    rows = []
    for number, row in read_keyed_rows(path, required=REQUIRED, strings=("hypothesis", "source"), what="translation row", genders=True):
        if not _is_reference(row["reference"]):
            raise ManifestError(
                path,
                number,
                f"reference must be a string or a non-empty list of strings, got {json.dumps(row['reference'], ensure_ascii=False)}; "
                "the manifest needs a translation for every utterance",
            )
        rows.append(row)
    return rows


def target_language(rows: list[dict], path: Path) -> str | None:
    """The rows' one ``tgt_lang`` (None when absent), which picks sacrebleu's tokenizer; several are an error."""
    languages = sorted({row["tgt_lang"] for row in rows if row.get("tgt_lang")})
    if len(languages) > 1:
        raise ManifestError(path, None, f"rows translate into several languages {languages}; score one target language per file")
    return languages[0] if languages else None


def reference_streams(references: list[str | list[str]]) -> list[list[str]]:
    """sacrebleu's layout: one stream per reference index; every segment needs the same count."""
    as_lists = [r if isinstance(r, list) else [r] for r in references]
    counts = {len(r) for r in as_lists}
    if len(counts) != 1:
        raise ValueError(f"every segment needs the same number of references, got {sorted(counts)}")
    return [list(stream) for stream in zip(*as_lists)]


def bleu_chrf(hypotheses: list[str], references: list[str | list[str]], target_language: str | None = None) -> dict:
    streams = reference_streams(references)
    tokenize = {"ja": "ja-mecab", "zh": "zh", "ko": "ko-mecab"}.get(target_language or "", "13a")
    bleu, chrf = BLEU(tokenize=tokenize), CHRF()
    return {
        "bleu": bleu.corpus_score(hypotheses, streams).score,
        "chrf": chrf.corpus_score(hypotheses, streams).score,
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


class CometUnavailableError(UserError, RuntimeError):
    """COMET asked for where it cannot run: unbabel-comet is not installed in this interpreter."""


COMET_PINS = "it pins numpy<2, transformers<5, torchmetrics<0.11 and jsonargparse==3.13.1"
COMET_ELSEWHERE = (
    "install the [comet] extra into its own environment (make install-legacy, or a virtualenv with pip install unbabel-comet) "
    "and pass --comet-python with that environment's python"
)


def comet_installed() -> bool:
    """Whether unbabel-comet can be imported here (looked up, not imported: it loads torch and Lightning)."""
    return importlib.util.find_spec("comet") is not None


def comet_scorer(model: str = DEFAULT_COMET, batch_size: int = 16, gpus: int = 0, devices: list[int] | None = None, python: str | None = None) -> Scorer:
    """A COMET scorer from a local checkpoint (a ``.ckpt`` or a folder holding ``checkpoints/model.ckpt``) or a hub name,
    on ``gpus`` GPUs (``devices``: which ones; default: Lightning's choice). In this interpreter, or with ``python``
    in another one that holds COMET (:mod:`experiments.scoring.comet_worker`, segments and scores passed as files)."""
    if python is not None:
        return _scorer_in(python, model, batch_size, gpus, devices)
    if not comet_installed():
        raise CometUnavailableError(f"COMET needs unbabel-comet, which is not installed here ({COMET_PINS}): {COMET_ELSEWHERE}, or use --no-comet")
    from experiments.scoring.comet_worker import CometLoadError, load_comet, predict

    try:
        loaded = load_comet(model)
    except CometLoadError as error:
        raise RuntimeError(str(error)) from error
    return lambda segments: predict(loaded, segments, batch_size, gpus, devices)


def _scorer_in(python: str, model: str, batch_size: int, gpus: int, devices: list[int] | None) -> Scorer:
    """A scorer that runs the COMET worker in the interpreter ``python``, once per call."""
    executable = shutil.which(python) or python
    if not (Path(executable).is_file() and os.access(executable, os.X_OK)):
        raise CometUnavailableError(f"--comet-python {python}: not an executable file; give the python of an environment with unbabel-comet")

    def score(segments: list[dict]) -> list[float]:
        with tempfile.TemporaryDirectory(prefix="comet-") as folder:
            request, answer = Path(folder) / "request.json", Path(folder) / "scores.json"
            request.write_text(json.dumps({"model": model, "batch_size": batch_size, "gpus": gpus, "devices": devices, "segments": segments}), encoding="utf-8")
            done = subprocess.run([executable, comet_worker.__file__, str(request), str(answer)], capture_output=True, text=True)
            if done.returncode != 0:
                lines = done.stderr.strip().splitlines()
                raise RuntimeError(f"COMET in {python} failed (exit {done.returncode}): {lines[-1] if lines else 'no message'}")
            scores = json.loads(answer.read_text(encoding="utf-8"))["scores"]
        if len(scores) != len(segments):
            raise RuntimeError(f"COMET in {python} returned {len(scores)} scores for {len(segments)} segments")
        return scores

    return score


def segment_comet(rows: list[dict], scorer: Scorer) -> list[float]:
    """COMET per row (source, hypothesis and the first reference); every row needs its ``source``."""
    missing = [r["id"] for r in rows if not r.get("source")]
    if missing:
        raise ValueError(f"COMET needs the source transcript; rows without 'source': {missing[:5]}")
    return scorer([{"src": r["source"], "mt": r["hypothesis"], "ref": r["reference"] if isinstance(r["reference"], str) else r["reference"][0]} for r in rows])


def quality_metric(target_language: str | None, with_comet: bool):
    """The group metric of translation quality: segments, corpus BLEU and chrF of the members, and
    their mean COMET (in percent) when it was scored."""

    def metric(columns) -> dict:
        hypotheses = list(columns["hypothesis"])
        entry = {"segments": len(hypotheses), **bleu_chrf(hypotheses, list(columns["reference"]), target_language)}
        if with_comet:
            entry["comet"] = 100.0 * sum(columns["comet"]) / len(hypotheses)
        return entry

    return metric


def evaluate(rows: list[dict], scorer: Scorer | None = None, target_language: str | None = None) -> dict:
    """Overall (``all``) and per-gender BLEU, chrF and (with a scorer) COMET, in sacrebleu's and
    COMET's scales; the genders in order of first appearance."""
    columns = {"hypothesis": [r["hypothesis"] for r in rows], "reference": [r["reference"] for r in rows]}
    if scorer is not None:
        columns["comet"] = segment_comet(rows, scorer)
    frame = GroupMetricFrame(quality_metric(target_language, scorer is not None), columns, [r["gender"] for r in rows])
    return {"all": frame.overall, **frame.by_group}


def quality_report(rows: list[dict], hypotheses: Path, scorer: Scorer | None = None, comet_model: str | None = None) -> dict:
    """The ``experiments.st_quality`` document of the rows of a hypotheses file (:func:`read_rows`): :func:`evaluate`'s
    groups, the target language and the COMET model (None without COMET), headed by :func:`extract.provenance.identified`."""
    language = target_language(rows, hypotheses)
    result = {"groups": evaluate(rows, scorer, language), "target_language": language, "comet_model": comet_model if scorer is not None else None}
    return identified(result, SCORES_SCHEMA, [hypotheses], hypotheses_subject(rows, hypotheses), kind="st_quality")


def save_quality_report(result: dict, out: Path) -> Path:
    """Writes :func:`quality_report`'s document to ``out`` through its record (JSON, UTF-8, one final newline)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_document(StQualityScores.from_dict(result, str(out)), out)
