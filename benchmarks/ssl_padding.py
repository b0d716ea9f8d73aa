"""How the ``ssl`` family batches a group-norm wav2vec 2.0 (wav2vec2-base's shape), measured: time and
how far each way's states are from one utterance at a time.

- ``one-by-one``: each utterance alone (no padding; the reference states);
- ``ours``: :meth:`extract.families.ssl.SSLExtractor.extract`: the convolutional encoder per
  utterance, the transformer on the padded batch with its mask;
- ``zero-padded``: the batch zero-padded without a mask, as the model card of wav2vec2-base says to
  feed it (the group norm then normalises over the padding).

Random weights from a config (throughput does not depend on them); clips of 3-8 s. Usage::

    .venv/bin/python benchmarks/ssl_padding.py --dims base --utterances 8
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

DIMS = {
    "base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
    "small": {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 1024},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", default="base", choices=sorted(DIMS))
    parser.add_argument("--utterances", type=int, default=8)
    args = parser.parse_args()
    from transformers import Wav2Vec2Config, Wav2Vec2FeatureExtractor, Wav2Vec2Model

    from extract.families.ssl import SSLExtractor

    torch.manual_seed(0)
    model = Wav2Vec2Model(Wav2Vec2Config(**DIMS[args.dims], feat_extract_norm="group", do_stable_layer_norm=False))
    extractor = SSLExtractor(model, Wav2Vec2FeatureExtractor(return_attention_mask=True, do_normalize=True), checkpoint=f"random-{args.dims}")
    rng = np.random.default_rng(0)
    audios = [(0.1 * rng.standard_normal(int(rng.uniform(3, 8) * 16_000))).astype(np.float32) for _ in range(args.utterances)]
    site = f"encoder.layer.{DIMS[args.dims]['num_hidden_layers'] - 1}"
    rows = {}

    def timed(name, run):
        started = time.perf_counter()
        states = run()
        rows[name] = {"seconds": time.perf_counter() - started, "states": states}

    timed("one-by-one", lambda: [extractor.extract([audio], [site])[0][site] for audio in audios])
    timed("ours", lambda: [states[site] for states in extractor.extract(audios, [site])])

    def zero_padded():
        batch = extractor.processor(audios, sampling_rate=16_000, return_tensors="pt", padding=True, return_attention_mask=True)
        frames = extractor.output_lengths(batch).tolist()
        with torch.inference_mode():
            out = model(batch.input_values, output_hidden_states=True).hidden_states[-1]
        return [out[index, :length].numpy() for index, length in enumerate(frames)]

    timed("zero-padded", zero_padded)
    reference = rows["one-by-one"]["states"]
    print(json.dumps({"dims": args.dims, "utterances": args.utterances, "audio_s": sum(len(a) for a in audios) / 16_000, "site": site}))
    print("| way | seconds | max abs difference from one-by-one |\n|---|---|---|")
    for name, row in rows.items():
        difference = max(float(np.abs(a - b).max()) for a, b in zip(row["states"], reference))
        print(f"| {name} | {row['seconds']:.2f} | {difference:.2e} |")


if __name__ == "__main__":
    main()
