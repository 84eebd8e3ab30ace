"""Tests of the turn contract."""
