"""Tile sizes shared by the sample GEMM: a local module, so the build depends on it (tl_aot's depfile)."""

BLOCK_M = 64
BLOCK_N = 64
BLOCK_K = 32
STAGES = 2
THREADS = 128
