"""The ARC-AGI-3 benchmarking harness."""
