"""Probes trained on stored hidden states (per-position logistic, attention, MDL, controls)."""
