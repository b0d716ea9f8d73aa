"""``python -m experiments.demo``: the end-to-end demo on the embedded default corpus.

Today it builds the synthetic demo corpus (with its corpus card) and extracts every site of the
bundled, converted Whisper base into a shard store; probes, gaps and figures join as their
stages land. Every stage skips work already done.
"""

from __future__ import annotations

import argparse
import time

from experiments.democorpus.build import build_demo_corpus, default_root
from experiments.extract import main as extract_main
from extract.manifest import read_manifest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0, help="seed of the demo corpus (voice splits, speaking rates)")
    args = parser.parse_args(argv)
    started = time.time()
    root = default_root(args.seed)
    print(f"[demo] corpus: {root} (synthetic voices: the numbers prove the pipeline, not a finding)")
    corpus = build_demo_corpus(root, seed=args.seed)
    utterances = read_manifest(corpus.manifest)
    speakers = {(u.speaker, u.gender) for u in utterances}
    print(
        f"[demo] {len(utterances)} ASR utterances, {len(speakers)} voices "
        f"({sum(g == 'female' for _, g in speakers)} female, {sum(g == 'male' for _, g in speakers)} male), "
        f"languages {sorted({u.language for u in utterances})}; MuST-SHE en-es: {len(read_manifest(corpus.mustshe_manifest))} utterances"
    )
    print(f"[demo] corpus card: {corpus.root / 'CARD.md'}")

    store = corpus.root.parent.parent / "stores" / f"demo-seed{args.seed}" / "whisper-base"
    status = extract_main(["--model", "whisper", "--checkpoint", "bundled-base", "--manifest", str(corpus.manifest), "--sites", "all", "--out", str(store)])
    if status != 0:
        raise SystemExit(f"[demo] extraction failed with status {status}")
    print(f"[demo] done in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
