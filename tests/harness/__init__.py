"""Tests of the ARC-AGI-3 harness."""
