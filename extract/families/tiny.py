"""transformers' test-suite sizes, shared by the families' tiny random models (and the tests' own
tiny Whisper checkpoints): width 16, two attention heads and a feed-forward width of 32 per stack.
Changing a size changes every tiny model's weights, and the stores the tests and the demo make."""

from __future__ import annotations


def tiny_stacks(*stacks: str) -> dict[str, int]:
    """Config fields giving each named transformer stack (``encoder``, ``decoder``, ``t2u_encoder``,
    ...) two attention heads and a feed-forward width of 32."""
    return {f"{stack}_{field}": size for stack in stacks for field, size in (("attention_heads", 2), ("ffn_dim", 32))}


def tiny_encoder_decoder(**fields) -> dict:
    """A tiny encoder-decoder's config fields (Whisper, Speech2Text): width 16, two encoder layers and
    one decoder layer with :func:`tiny_stacks` sizes; ``fields`` add to them or replace them."""
    return {"d_model": 16, "encoder_layers": 2, "decoder_layers": 1, **tiny_stacks("encoder", "decoder"), **fields}
