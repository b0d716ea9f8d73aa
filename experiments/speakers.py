"""``python -m experiments.speakers``: speaker ids by clustering speaker embeddings with HDBSCAN
(Attanasio et al. 2024, §3 and appendix A.4), for corpora without them (Fleurs).

    python -m experiments.speakers --manifest M.jsonl --embeddings SOURCE --out M2.jsonl
        [--min-cluster-size 2] [--min-samples N] [--metric cosine] [--epsilon 0] [--selection eom]
        [--standardize] [--no-per-gender]

SOURCE: ``speechbrain:speechbrain/spkrec-ecapa-voxceleb`` (the paper's; needs ``pip install
speechbrain`` and the hub), ``store:PATH[@SITE]`` (mean-pooled states of an ``experiments.extract``
store, offline), ``mfcc`` (Praat MFCC statistics, offline) or ``resemblyzer`` (the GE2E speaker
encoder of Resemblyzer 0.1.4, a trained speaker model that runs offline: its weights ship in the
wheel; ``pip install 'speech-gender-probing[speakers]'``). Writes the manifest with ``speaker``
replaced by the cluster's id (noise points: one singleton id each) and ``extra.speaker_cluster``
(cluster, scope, noise, the original speaker), and ``M2.clustering.json`` with the source, the HDBSCAN
parameters, the clusters per scope and, where the manifest's speakers are real ids, the adjusted Rand
index and purity against them (a true speaker taken per scope: a voice recorded in two languages is
expected as two clusters). Definitions: ``experiments.analysis.speakers``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from experiments.analysis.speakers import (
    HdbscanSettings,
    ResemblyzerEncoder,
    agreement,
    assign_speakers,
    audio_embeddings,
    clustering_record,
    known_speakers,
    mfcc_statistics,
    parse_source,
    speechbrain_encoder,
    store_embeddings,
)
from experiments.cli import CommandParser, add_device_argument, add_out_argument, add_quiet_argument, input_argument, run_cli
from experiments.options import add_options, from_args
from extract.manifest import read_manifest, write_manifest
from extract.options import option


def clustering_path(out: Path) -> Path:
    """``OUT.clustering.json`` (with ``OUT``'s suffix replaced): the clustering report beside the manifest ``out``."""
    return out.with_suffix(".clustering.json")


@dataclass(frozen=True, kw_only=True)
class SpeakerOptions:
    """Where the embeddings come from and what is clustered together (HDBSCAN's own settings: :class:`HdbscanSettings`)."""

    embeddings: str = option(help="speechbrain:HUB_ID, store:PATH[@SITE], mfcc or resemblyzer")
    per_gender: bool = option(True, "cluster per dataset and language, not per gender too", flag="--no-per-gender")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--manifest", required=True, help="utterance manifest (JSONL)")
    add_options(parser, SpeakerOptions)
    add_out_argument(
        parser, "the manifest with speaker ids from the clusters (JSONL); OUT.clustering.json beside it", sidecars=lambda out: [clustering_path(out)]
    )
    add_options(parser, HdbscanSettings)
    add_device_argument(parser, default="cpu", help="where a SpeechBrain or Resemblyzer model runs: cpu (default), cuda, cuda:N, mps or auto")
    add_quiet_argument(parser)
    return parser


def _run(args: argparse.Namespace) -> int:
    options = from_args(SpeakerOptions, args)
    utterances = read_manifest(args.manifest)
    source = parse_source(options.embeddings)
    settings = from_args(HdbscanSettings, args)
    print(f"[speakers] {len(utterances)} records; embeddings: {source.describe()}; HDBSCAN {settings}")
    site, untrimmed = None, []
    if source.kind == "store":
        embeddings, site = store_embeddings(source.location, source.site, [u.id for u in utterances])
    elif source.kind == "mfcc":
        embeddings = audio_embeddings(utterances, mfcc_statistics, not args.quiet)
    elif source.kind == "resemblyzer":
        encoder = ResemblyzerEncoder(args.device)
        embeddings = audio_embeddings(utterances, encoder, not args.quiet)
        untrimmed = [utterances[i].id for i in encoder.untrimmed]
        if untrimmed:
            print(f"[speakers] {len(untrimmed)} record(s) embedded untrimmed, webrtcvad found no speech in them: {', '.join(untrimmed[:10])}")
    else:
        embeddings = audio_embeddings(utterances, speechbrain_encoder(source.location, args.device), not args.quiet)
    assigned = assign_speakers(utterances, embeddings, settings, options.per_gender)
    known = known_speakers(utterances)
    rewritten = []
    for utterance, found in zip(utterances, assigned):
        cluster = {"cluster": found["cluster"], "scope": found["scope"], "noise": found["noise"], "original_speaker": utterance.speaker}
        rewritten.append(replace(utterance, speaker=found["speaker"], extra={**utterance.extra, "speaker_cluster": cluster}))
    per_scope = Counter(found["scope"] for found in assigned)
    report = {
        "clustering": clustering_record(source, site, settings, options.per_gender),
        "scopes": {
            scope: {
                "records": count,
                "clusters": len({f["speaker"] for f in assigned if f["scope"] == scope and not f["noise"]}),
                "noise": sum(f["noise"] for f in assigned if f["scope"] == scope),
            }
            for scope, count in sorted(per_scope.items())
        },
        # a true speaker is one per scope: a voice heard in two languages is two clusters by design
        "against_known_speakers": agreement([f"{assigned[i]['scope']}|{utterances[i].speaker}" for i in known], [assigned[i]["speaker"] for i in known])
        if known
        else None,
        "records_without_known_speaker": len(utterances) - len(known),
        **({"embedded_untrimmed": untrimmed} if untrimmed else {}),
    }
    write_manifest(args.out, rewritten)
    report_path = clustering_path(args.out)
    report_path.write_text(json.dumps(report, indent=1))
    clusters = sum(scope["clusters"] for scope in report["scopes"].values())
    noise = sum(scope["noise"] for scope in report["scopes"].values())
    print(f"[speakers] {clusters} clusters and {noise} noise singletons over {len(per_scope)} scope(s)")
    if known:
        score = report["against_known_speakers"]
        print(
            f"[speakers] against the manifest's speakers ({score['true_speakers']} speaker-scope pairs): "
            f"ARI {score['adjusted_rand_index']:.3f}, purity {score['purity']:.3f}"
        )
    print(f"[speakers] wrote {args.out} and {report_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.min_cluster_size < 2:
        parser.error(f"--min-cluster-size must be at least 2, got {args.min_cluster_size}")
    if args.min_samples is not None and args.min_samples < 1:
        parser.error(f"--min-samples must be at least 1, got {args.min_samples}")
    return run_cli(lambda: _run(args))


if __name__ == "__main__":
    sys.exit(main())
