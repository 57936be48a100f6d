"""Tuning ahead of time on a GPU host and the tuning record the build reads."""
