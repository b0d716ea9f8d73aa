"""``python -m experiments.embedding_store``: speaker embeddings as a store, probed like any model's.

    python -m experiments.embedding_store --manifest M.jsonl --embeddings resemblyzer --out stores/ge2e/NAME
    python -m experiments.probe --store stores/ge2e/NAME --site embedding --probe mean --split loso --out results/probes.jsonl

Writes a store whose site ``embedding`` holds one frame per utterance: the utterance's speaker
embedding from ``--embeddings`` (``resemblyzer``: Resemblyzer's GE2E speaker encoder, offline;
``mfcc``: Praat MFCC statistics; ``speechbrain:HUB_ID``: a SpeechBrain speaker-verification model,
the embeddings of ``experiments.speakers``). Its probe rows sit beside the hidden-state rows
(subject model ``resemblyzer-ge2e``, ``mfcc-stats`` or ``speechbrain-NAME``; family
``speaker-embedding``, ``site_role`` ``baseline`` in collect's tables), with the same splits,
leave-one-speaker-out and controls: how well a model built to tell speakers apart reads gender
(docs/real-voices.md's GE2E column). The folder must be new or empty.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from experiments.cli import CommandParser, add_device_argument, add_quiet_argument, command_main, input_argument, output_argument
from experiments.options import add_options, from_args
from extract.manifest import read_manifest
from extract.options import option

SITE = "embedding"
FAMILY = "speaker-embedding"
PART = "part-00000.h5"


def embedding_label(source) -> str:
    """The model label of an embedding store: what its probe rows' subject names."""
    if source.kind == "resemblyzer":
        return "resemblyzer-ge2e"
    if source.kind == "mfcc":
        return "mfcc-stats"
    return "speechbrain-" + source.location.rstrip("/").rpartition("/")[2]


def write_embedding_store(manifest: Path, source_text: str, out: Path, device: str = "cpu", show_progress: bool = True) -> dict:
    """Embeds every utterance of ``manifest`` and writes the one-frame store; returns ``{"store", "stored", "dim", "label", "untrimmed"}``."""
    from experiments.analysis.speakers import ResemblyzerEncoder, SpeakerError, audio_embeddings, mfcc_statistics, parse_source, speechbrain_encoder
    from extract.provenance import file_sha256, provenance
    from extract.store import PartWriter, StoreAttributes, utterance_meta

    source = parse_source(source_text)
    if source.kind == "store":
        raise SpeakerError("--embeddings store:PATH is a store already: probe it directly (experiments.probe --store PATH)")
    if out.exists() and any(out.iterdir()):
        raise SpeakerError(f"{out} is not empty; give a new folder for the embedding store")
    utterances = read_manifest(manifest)
    embed = {"resemblyzer": lambda: ResemblyzerEncoder(device), "mfcc": lambda: mfcc_statistics}.get(
        source.kind, lambda: speechbrain_encoder(source.location, device)
    )()
    seconds: list[float] = []
    embeddings = audio_embeddings(utterances, embed, show_progress, seconds)
    label = embedding_label(source)
    out.mkdir(parents=True, exist_ok=True)
    config = {"label": label, "embeddings": source_text, "source": source.describe(), "manifest": str(manifest), "manifest_sha256": file_sha256(manifest)}
    attributes = StoreAttributes(
        model_id=label,
        family=FAMILY,
        site_modules={SITE: source.describe()},
        storage_dtype="float32",
        config=config,
        skipped=[],
        **provenance(),
    )
    untrimmed = [utterances[i].id for i in getattr(embed, "untrimmed", [])]
    with PartWriter(out / PART, {SITE: embeddings.shape[1]}, "float32", attributes) as writer:
        for utterance, vector, duration in zip(utterances, embeddings, seconds):
            writer.add(utterance.id, {SITE: vector[None]}, utterance_meta(utterance, duration))
    return {"store": str(out), "stored": len(utterances), "dim": int(embeddings.shape[1]), "label": label, "untrimmed": untrimmed}


@dataclass(frozen=True, kw_only=True)
class EmbeddingStoreOptions:
    """Which speaker embeddings the store holds."""

    embeddings: str = option(help="resemblyzer, mfcc or speechbrain:HUB_ID (as experiments.speakers)")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--manifest", required=True, type=Path, help="utterance manifest (JSONL)")
    add_options(parser, EmbeddingStoreOptions)
    output_argument(parser, "--out", required=True, type=Path, help="store folder (new or empty)")
    add_device_argument(parser, default="cpu", help="where a SpeechBrain or Resemblyzer model runs: cpu (default), cuda, cuda:N, mps or auto")
    add_quiet_argument(parser, "no progress bars")
    return parser


def _run(args: argparse.Namespace) -> int:
    embeddings = from_args(EmbeddingStoreOptions, args).embeddings
    written = write_embedding_store(args.manifest, embeddings, args.out, args.device, not args.quiet)
    print(f"[embedding_store] {written['stored']} records of {args.manifest}: {written['dim']}-d {embeddings} embeddings (model label {written['label']})")
    if written["untrimmed"]:
        listed = ", ".join(written["untrimmed"][:10])
        print(f"[embedding_store] {len(written['untrimmed'])} records in which webrtcvad found no speech, embedded untrimmed: {listed}")
    print(f"[embedding_store] store: {args.out} (site {SITE}); probe it with python -m experiments.probe --store {args.out} --site {SITE} --probe mean")
    return 0


main = command_main(build_parser, _run, module=__name__)
