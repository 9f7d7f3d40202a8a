"""Checkpoints of a running sample: their contents, their policy and their lock."""
