"""Passages: every stored message found by full text and by meaning, fused."""
