"""Tests of harness summary compaction."""
