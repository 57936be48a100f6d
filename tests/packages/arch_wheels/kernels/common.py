"""Shared by the kernel files: a local import tl_aot tracks (editing it rebuilds add_one)."""

BLOCK = 256
