"""Speech models in, hidden states and hypotheses out: audio, manifests, weights, extractors, shard store."""

__version__ = "0.1.0"
