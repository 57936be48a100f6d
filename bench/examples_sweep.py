"""TileLang's own examples through capture, build and a served run: kernels tl_aot has never seen.

    python bench/examples_sweep.py --examples DIR --arch 90a [--arch 80] [--set sample|more|all] [--out WORK] [--table T.md]
        [-j N] [--budget S]
    python bench/examples_sweep.py --examples DIR --device gpu --serve -j 12 --budget 450 --out WORK   # GPU machine, one call

DIR is a TileLang checkout or its ``examples/`` folder (``git archive HEAD examples | tar -x``).
``--set`` picks the scripts: ``sample`` (default, ``SAMPLE``: one or two per example family),
``more`` (``SAMPLE_MORE``: every other NVIDIA example a user would run, kernel scripts such as
``deepseek_v32/sparse_mla_fwd.py`` or ``kda/chunk_o.py`` included) or ``all`` (both); ``--only
SUBSTRING`` narrows the set. Each example script chosen is run as a user would run
it, in its own folder, under ``python -m tl_aot capture --device H100-SXM`` (without a GPU the
script dies at its first CUDA tensor; the kernels TileLang's JIT compiled before that are what
counts). An example that records nothing so is run again under ``bench/examples_cuda_shim.py``
(torch's "cuda" mapped to the CPU, so inputs exist and the compiles they lead to happen), or,
where even that cannot reach a compile, by its few lines in ``DRIVERS`` (the example's kernel
factories called as it calls them, with its default sizes). Each
record is then built with ``python -m tl_aot build --capture REC --arch ... --keep-going`` and
the library's manifest read back (``inspect --json``): kernels captured, variants built per arch,
and what was left out with its first error line and TileLang's own verdict on it
(``bench/examples_refusal.py``: the recorded prim_func lowered by ``tilelang.lower`` for that arch).

``--device gpu`` (GPU machine): capture with TileLang's JIT compiling on the GPU, so each example
runs to its end and every kernel it compiles is recorded (on a CPU machine only those before its
first launch are); without ``--arch`` the library is built for the GPU's own arch (``sm_90a`` on
an H100/H200). ``--serve`` (with ``--device gpu``, in the same invocation): each example built is
then run again under ``python -m tl_aot run --serve LIB --strict``, so every kernel it compiles
must come from its library, and its own checks (``assert_close``, its ``main()``) judge the
results: the table gives the served run's exit ("pass" is exit 0) and the compiles seen while it
ran, which must be 0, by two witnesses: the requests the library did not answer (tl_aot's report
at the process's exit: compiled by the JIT + refused) and the kernels TileLang's own cache gained.

Each example has its own TileLang cache (``WORK/<example>.tilelang/{capture,served}``, emptied
first): the capture compiles every kernel itself, concurrent examples never write one cache, and
the served run starts from an empty one, so a kernel TileLang compiled there shows in it.

``-j N`` runs N examples at once (``bench/examples_pool.py``), each build with ``-j`` of its share
of the cores (and TileLang's autotuner held to the same share); the JSON lines and the table keep
the sample's order whatever order the examples finish in. ``--budget S``: after S seconds of the
whole run no example starts and those running are stopped (their process groups killed); both are
reported "not finished" / "not started", with what they had done. ``--timeout`` still bounds each
command (capture, build, served run). ``--resume`` continues such a run: the same call again takes every
example whose outcome ``WORK/<example>.outcome.json`` already holds, finished, from there and runs the
rest, so a set longer than one call's time (``--set more`` on the GPU machine) is swept by repeating
one command; the table covers them all.

Prints one JSON line per example and writes the Markdown table to ``--table`` (default
WORK/table.md), rewritten as each example's line is printed: a run cut short leaves its table so far.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

if not __package__:  # run as a script: bench/ is sys.path[0], the checkout is not
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.examples_pool import RunControl, Stopped, run_in_order  # noqa: E402

# Example scripts run as they are (paths under examples/).
SAMPLE: tuple[str, ...] = (
    "gemm/example_gemm.py",
    "gemm/example_gemm_intrinsics.py",
    "gemm/example_gemm_persistent.py",
    "gemm_fp8/example_tilelang_gemm_fp8.py",
    "gemm_fp8/example_tilelang_gemm_fp8_2xAcc.py",
    "gemm_int4/example_tilelang_gemm_int4.py",
    "dequantize_gemm/example_dequant_gemm_fp4_hopper.py",
    "dequantize_gemm/example_dequant_gemm_w4a8.py",
    "dequantize_gemm/example_dequant_gemv_fp16xint4.py",
    "dequantize_gemm/example_dequant_gemm_bf16_mxfp4_hopper.py",
    "gemm_splitk/example_tilelang_gemm_splitk.py",
    "gemm_splitk/example_tilelang_gemm_splitk_vectorize_atomicadd.py",
    "gemm_streamk/example_tilelang_gemm_streamk.py",
    "flash_attention/example_mha_fwd_bhsd.py",
    "flash_attention/example_gqa_fwd_bshd.py",
    "flash_attention/example_mha_fwd_varlen.py",
    "flash_attention/example_mha_bwd_bshd.py",
    "flash_decoding/example_gqa_decode.py",
    "flash_decoding/example_mha_inference.py",
    "deepseek_mla/example_mla_decode.py",
    "deepseek_mla/example_mla_decode_paged.py",
    "deepseek_nsa/example_tilelang_nsa_fwd.py",
    "deepseek_nsa/example_tilelang_nsa_decode.py",
    "blocksparse_attention/example_tilelang_block_sparse_attn.py",
    "blocksparse_gemm/example_blocksparse_gemm.py",
    "convolution/example_convolution.py",
    "elementwise/example_elementwise_add.py",
    "norm/rms_norm.py",
    "norm/layernorm.py",
    "online_softmax/online_softmax.py",
    "topk/example_topk.py",
    "cast/example_per_token_cast_to_fp8.py",
    "cast/example_group_per_split_token_cast_to_fp8.py",
    "dynamic_shape/example_dynamic.py",
    "grouped_gemm/example_grouped_gemm_fwd.py",
    "fusedmoe/example_fusedmoe_tilelang.py",
    "linear_attention/example_linear_attn_fwd.py",
    "linear_attention/example_mamba_chunk_scan.py",
    "gdn/example_chunk_o.py",
    "gdn/example_cumsum.py",
    "hadamard_transform/example_hadamard.py",
    "warp_specialize/example_warp_specialize_gemm_copy_1_gemm_0.py",
    "warp_specialize/example_warp_specialize_flashmla.py",
    "rand/rand_uint.py",
    "gemv/example_gemv.py",
    "seer_attention/block_sparse_attn_tilelang.py",
    "minference/example_vertical_slash_sparse_attn.py",
    "attention_sink/example_mha_sink_fwd_bhsd.py",
    # Blackwell (sm_100a: tcgen05 / TMEM) and consumer Blackwell (sm_120): swept with --device B200 --arch 100a,
    # --device RTX-5090 --arch 120 --arch 120a; Hopper-only ones with the default H100-SXM (docs/conformance.md).
    "gemm_tcgen05/gemm_mma.py",
    "gemm_tcgen05/gemm_tcgen5mma.py",
    "gemm_tcgen05/gemm_tcgen5mma_ws.py",
    "gemm_tcgen05/gemm_tcgen5mma_ws_clc.py",
    "gemm_tcgen05/gemm_tcgen5mma_ws_persistent.py",
    "gemm_tcgen05/gemm_tcgen5mma_ws_persistent_streamk.py",
    "gemm_fp8/example_tilelang_gemm_fp8_sm100.py",
    "blockscaled_gemm_sm100/gemm_mxfp8_blockscaled_1d1d.py",
    "blockscaled_gemm_sm100/grouped_gemm_mxfp8_blockscaled_1d1d.py",
    "deepseek_v4/fp8_fp4_gemm_1d1d_sm100.py",
    "flash_attention_sm100/mha_fwd_bshd.py",
    "flash_attention_sm100/gqa_fwd_bshd.py",
    "flash_attention_sm100/mha_bwd_bshd.py",
    "flash_attention_sm100/gqa_bwd_bshd.py",
    "aws/gemm.py",
    "aws/flash_attention.py",
    "gemm_sm120/sm120_nvfp4_blockscaled_gemm.py",
    "deepseek_v4/sparse_attn_fwd_sm90.py",
)

# The rest of TileLang's NVIDIA examples a user would run (``--set more``; ``--set all`` is both): kernel scripts
# beyond the example_*.py names. Left out of both: amd/ and the CDNA variants, Triton-only and torch-only
# references, benchmark_*/regression_*/test_* wrappers, helpers with no ``__main__`` (utils, refs, FLA_KDA/),
# plot_layout/ and visual_layout_inference/ (layout pictures), analyze/ (FLOP counts, no compile), autodd/ (a
# deliberately broken program for TileLang's delta debugger), bitnet-1.58b/'s model files and its bitblas one.
SAMPLE_MORE: tuple[str, ...] = (
    "quickstart.py",
    "gemm/example_gemm_autotune.py",
    "gemm/example_gemm_autotune_early_stop.py",
    "gemm/example_gemm_autotune_pass_configs.py",
    "gemm/example_gemm_advanced_autotune.py",
    "gemm_sp/example_gemm_sp.py",
    "deepseek_deepgemm/example_deepgemm_fp8_2xAcc.py",
    "dequantize_gemm/example_dequant_gemm_bf16_fp4_hopper.py",
    "dequantize_gemm/example_dequant_gemm_fine_grained.py",
    "grouped_gemm/example_grouped_gemm_fwd_ptr.py",
    "grouped_gemm/example_grouped_gemm_bwd.py",
    "convolution/example_convolution_autotune.py",
    "warp_specialize/example_warp_specialize_gemm_barrierpipe_stage2.py",
    "warp_specialize/example_warp_specialize_gemm_copy_0_gemm_1.py",
    "warp_specialize/example_warp_specialize_gemm_copy_gemm_0_1.py",
    "warp_specialize/example_warp_specialize_gemm_softpipe_stage2.py",
    "flash_attention/example_mha_fwd_bshd.py",
    "flash_attention/example_mha_bwd_bhsd.py",
    "flash_attention/example_gqa_fwd_varlen.py",
    "flash_attention/example_gqa_bwd.py",
    "flash_attention/example_gqa_bwd_tma_reduce.py",
    "flash_attention/example_gqa_bwd_tma_reduce_varlen.py",
    "flash_decoding/example_gqa_decode_varlen_logits.py",
    "attention_sink/example_mha_sink_bwd_bhsd.py",
    "attention_sink/example_gqa_sink_bwd_bhsd.py",
    "attention_sink/example_gqa_sink_fwd_varlen.py",
    "attention_sink/example_gqa_sink_bwd_varlen.py",
    "block_causal_attention/block_causal_attention.py",
    "block_causal_attention/block_causal_attention_varlen.py",
    "blocksparse_attention/example_tilelang_sparse_gqa_decode_paged.py",
    "blocksparse_attention/example_tilelang_sparse_gqa_decode_varlen_indice.py",
    "blocksparse_attention/example_tilelang_sparse_gqa_decode_varlen_mask.py",
    "deepseek_mla/example_mla_decode_persistent.py",
    "deepseek_mla/example_mla_decode_ws.py",
    "deepseek_mla/experimental/example_mla_decode_kv_fp8.py",
    "deepseek_nsa/example_tilelang_nsa_fwd_varlen.py",
    "deepseek_nsa/example_tilelang_nsa_bwd.py",
    "deepseek_mhc/example_mhc_pre.py",
    "deepseek_mhc/example_mhc_post.py",
    "deepseek_mhc/example_mhc_bwd.py",
    "deepseek_v32/fp8_lighting_indexer.py",
    "deepseek_v32/topk_selector.py",
    "deepseek_v32/sparse_mla_fwd.py",
    "deepseek_v32/sparse_mla_fwd_pipelined.py",
    "deepseek_v32/sparse_mla_fwd_seesaw.py",
    "deepseek_v32/sparse_mla_bwd.py",
    "deepseek_v4/act_quant.py",
    "dsa_sparse_finetune/sparse_mla_fwd.py",
    "dsa_sparse_finetune/sparse_mla_bwd.py",
    "dsa_sparse_finetune/sparse_mla_topk_reducesum.py",
    "dsa_sparse_finetune/indexer_topk_reducesum.py",
    "dsa_sparse_finetune/indexer_bwd.py",
    "dsa_hisa/fp8_block_mean_pooling.py",
    "dsa_hisa/pool_mqa_fp8.py",
    "dsa_hisa/block_sparse_mqa_fp8.py",
    "dsa_hisa/clean_and_maintain_logits.py",
    "dsa_hisa/hisa.py",
    "gdn/example_chunk_delta_h.py",
    "gdn/example_chunk_delta_bwd.py",
    "gdn/example_chunk_o_bwd.py",
    "gdn/example_chunk_scaled_dot_kkt.py",
    "gdn/example_wy_fast.py",
    "gdn/example_wy_fast_bwd_split.py",
    "kda/chunk_o.py",
    "kda/chunk_delta_h_fwd.py",
    "kda/chunk_intra_token_parallel.py",
    "kda/chunk_inter_solve_fused.py",
    "kda/wy_fast.py",
    "kda/wy_fast_bwd.py",
    "kda/chunk_delta_bwd.py",
    "kda/chunk_bwd_dv.py",
    "kda/chunk_bwd_dqkwg.py",
    "kda/chunk_bwd_gla_dA.py",
    "kda/chunk_bwd_intra.py",
    "linear_attention/example_linear_attn_bwd.py",
    "linear_attention/example_mamba_chunk_state.py",
    "linear_attention/example_retention_fwd.py",
    "iket/minimal.py",
    "iket/payload_minimal.py",
    "iket/all_features.py",
    "bitnet-1.58b/kernel_benchmark/tilelang_bitnet_158_int8xint2_decode.py",
    "bitnet-1.58b/kernel_benchmark/tilelang_bitnet_158_int8xint2_prefill.py",
)

# What --set picks: the first sample, the rest, or both (in that order).
SETS: dict[str, tuple[str, ...]] = {"sample": SAMPLE, "more": SAMPLE_MORE, "all": SAMPLE + SAMPLE_MORE}

SHIM = Path(__file__).resolve().parent / "examples_cuda_shim.py"
REFUSAL = Path(__file__).resolve().parent / "examples_refusal.py"

# Examples that cannot reach their first compile even under the shim (CUDA streams; gdn/'s call the reference they
# import from ``fla`` first, a NameError without it): a few lines of ours that call their kernel factories as the
# example's run_test does, with the sizes of its main().
_GDN = "import tilelang.language as T\nimport {module} as ex\n\nb, s, h, dk, dv, c = 1, 32768, {heads}, 128, 128, 64\n"
DRIVERS: dict[str, str] = {
    "gdn/example_wy_fast.py": _GDN.format(module="example_wy_fast", heads=32)
    + "ex.tilelang_recompute_w_u_fwd(b, s, h, dk, dv, T.bfloat16, T.bfloat16, T.float32, T.float32, c,\n"
    + "    block_S=c, block_DK=64, block_DV=32, threads=128, num_stages=3)\n",
    "gdn/example_chunk_delta_h.py": _GDN.format(module="example_chunk_delta_h", heads=32)
    + "ex.tilelang_chunk_gated_delta_rule_fwd_h(b, s, h, dk, dv, T.bfloat16, T.bfloat16, T.float32, T.float32, T.float32,\n"
    + "    c, True, False, True, True, block_DK=32, block_DV=32, threads=128, num_stages=2)  # main()'s: tuned on a GPU\n",
    "gdn/example_chunk_delta_bwd.py": _GDN.format(module="example_chunk_delta_bwd", heads=8)
    + "ex.tilelang_chunk_gated_delta_rule_bwd_dhu(b, s, h, dk, dv, T.bfloat16, T.bfloat16, T.float32, T.float32, T.float32,\n"
    + "    c, dk**-0.5, True, True, True, 32, 128, 1)\n",
    "gdn/example_chunk_o_bwd.py": _GDN.format(module="example_chunk_o_bwd", heads=8)
    + "ex.tilelang_chunk_o_bwd_dqkwg(b, s, h, dk, dv, T.bfloat16, T.bfloat16, T.float32, T.float32, T.float32,\n"
    + "    c, dk**-0.5, True, True, 64, 64, 128, 0)\n",
    "gdn/example_chunk_scaled_dot_kkt.py": _GDN.format(module="example_chunk_scaled_dot_kkt", heads=32)
    + "ex.tilelang_chunk_scaled_dot_kkt_fwd(b, s, h, dk, c, T.bfloat16, T.bfloat16, T.float32, True, c, 64, 128, 2)\n",
    "gdn/example_wy_fast_bwd_split.py": _GDN.format(module="example_wy_fast_bwd_split", heads=8)
    + "for factory in (ex.tilelang_wy_fast_bwd, ex.tilelang_wy_fast_bwd_split):\n"
    + "    factory(b, s, h, dk, dv, T.bfloat16, T.bfloat16, T.float32, T.float32, T.float32, c, 32, 32, 128, 0)\n",
    "fusedmoe/example_fusedmoe_tilelang.py": """
import tilelang.language as T
import example_fusedmoe_tilelang as ex

hidden, expert, routed, per_token, tokens = 7168, 2048, 8, 4, 8192
ex.moe_forward_tilelang_shared.compile(dhidden=hidden, dexpert=expert, num_tokens=tokens, dtype=T.float16)
ex.moe_forward_tilelang_routed.compile(
    dhidden=hidden, dexpert=expert, n_routed_experts=routed, dtype=T.float16, group_sum=tokens * per_token,
    group_count=routed, block_token=128, block_dhidden=128, block_dexpert=128, threads=256, num_stages=1,
)
""",
}


@dataclass(frozen=True)
class Outcome:
    """One example: what capture recorded, what the build made of it and (``--serve``) how its served run went."""

    example: str
    captured: int = 0  # kernels in the record
    shim: bool = False  # recorded only under examples_cuda_shim.py (or by the example's driver in DRIVERS)
    not_recorded: str = ""  # capture's own complaint, if any
    script_error: str = ""  # the last line the script printed to stderr (CUDA on a CPU machine, ...)
    built: dict[str, int] = field(default_factory=dict)  # arch -> variants built
    left_out: tuple[str, ...] = ()  # "entry (arch): first error line"
    build_error: str = ""  # a build that made no library at all
    served: str = ""  # --serve: "pass" (exit 0), "exit N", "timed out"; "" when not served
    served_error: str = ""  # a served run that failed: its last exception line
    served_kernels: int | None = None  # kernels the library answered (tl_aot's report at exit; None: no report)
    served_misses: int | None = None  # requests it did not answer: kernels compiled or refused, tunings run or refused (must be 0)
    tilelang_compiles: int | None = None  # kernels TileLang's own cache gained during the served run (must be 0)
    call_lookups: int | None = None  # requests the served run looked up by their call key, before TileLang traced them
    traced_lookups: int | None = None  # requests it looked up by their traced prim_func (calls no call key could spell)
    traced_why: tuple[str, ...] = ()  # "function: why no call key answered it", as the served processes named them at exit
    gpu: bool = False  # captured on this machine's GPU: the example ran to its end, so its exit counts
    unfinished: str = ""  # "not finished: ..." / "not started: ..." (--budget), else ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Sweep:
    """What every example's chain of commands reads: where things are, what to build, the limits."""

    root: Path  # the examples/ folder
    out: Path  # records, libraries, TileLang caches
    archs: tuple[str, ...]
    device: str  # capture's device profile, or "gpu"
    timeout: float  # seconds per command
    shim: bool  # retry an example that recorded nothing under the CUDA shim
    serve: bool  # run each built example again, served strictly
    share: int  # cores per example: each build's -j, TileLang's autotuner's CPU count
    resume: bool = False  # an example whose outcome OUT already holds, finished, is taken from there, not run again


_EXCEPTION = re.compile(r"^([\w.]+(Error|Exception|Used|Served)|tl_aot: error)\b.*:")
# The line a served process prints at exit (tl_aot/serving/active.py install_from_env).
_SERVE_REPORT = re.compile(
    r"^tl_aot serve \(pid \d+\): (\d+) served, (\d+) compiled by the JIT, (\d+) refused; "
    r"tunings \d+ served, (\d+) run by TileLang, (\d+) refused",
    re.MULTILINE,
)


# Its lookups, by path: "N lookups in T ms (A in T ms, X ms each by call key, B in T ms, Y ms each by a traced prim_func".
_TRACED_HEAD = re.compile(r"^tl_aot serve: \d+\+? function\(s\) served only after TileLang traced")
_LOOKUPS = re.compile(
    r"^tl_aot serve \(pid \d+\): .*?\b\d+ lookups in [\d.]+ ms.*? \((\d+) in [\d.]+ ms, [\d.]+ ms each by call key, (\d+) in ",
    re.MULTILINE,
)


def _last_line(text: str) -> str:
    """What a failed command died of: its last exception line, else its last line (tl_aot's own reports left out)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not re.match(r"tl_aot (capture|serve)\b", ln)]
    errors = [ln for ln in lines if _EXCEPTION.match(ln)]
    return (errors or lines or [""])[-1][:200]


def _build_failure(stderr: str) -> str:
    """What a build that made no library died of: its last error line, with the reason it lists under it (if any)."""
    last = _last_line(stderr)
    lines = stderr.splitlines()
    if last.endswith(":"):
        at = next((i for i, ln in enumerate(lines) if ln.strip().startswith(last.rstrip(":"))), None)
        below = next((ln.strip() for ln in lines[at + 1 :] if ln.strip()), "") if at is not None else ""
        return f"{last} {below}"[:400]
    return last


def served_counts(stderr: str) -> tuple[int, int] | None:
    """(kernels served, requests not served) summed over the served processes' exit reports; None when none reported.

    Not served: kernels compiled by the JIT or refused, and tunings TileLang's autotuner ran (each a compile per
    candidate) or that were refused.
    """
    reports = [[int(n) for n in m.groups()] for m in _SERVE_REPORT.finditer(stderr)]
    if not reports:
        return None
    return sum(r[0] for r in reports), sum(sum(r[1:]) for r in reports)


def traced_why(stderr: str) -> tuple[str, ...]:
    """Each ``function: why`` the served processes named below their exit line (served only after a trace), once each."""
    named: dict[str, None] = {}
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        if _TRACED_HEAD.match(line):
            for item in lines[i + 1 :]:
                if not item.startswith("  ") or item.startswith("  ... and "):
                    break
                named.setdefault(item.strip())
    return tuple(named)


def served_lookups(stderr: str) -> tuple[int, int] | None:
    """(lookups by call key, lookups by a traced prim_func) summed over the served processes' exit reports; None without one."""
    reports = [(int(a), int(b)) for a, b in _LOOKUPS.findall(stderr)]
    if not reports:
        return None
    return sum(r[0] for r in reports), sum(r[1] for r in reports)


def tilelang_cache_entries(cache: Path) -> int:
    """Kernels a TileLang cache folder holds: the entries of its ``kernels`` folders (0 when it was never written)."""
    return sum(
        1 for kernels in cache.rglob("kernels") if kernels.is_dir() for e in kernels.iterdir() if e.is_dir() and not e.name.startswith(".")
    )


def _fresh(folder: Path) -> Path:
    """``folder``, emptied (a TileLang cache a step starts from)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def _env(sweep: Sweep, tilelang_cache: Path) -> dict[str, str]:
    """This process's environment with the example's own TileLang cache and its share of the cores for the autotuner."""
    return {
        **os.environ,
        "TILELANG_CACHE_DIR": str(tilelang_cache),
        "TILELANG_DISABLE_CACHE": "0",  # the served run's cache is a witness: a kernel compiled there must land in it
        "TILELANG_AUTO_TUNING_CPU_COUNTS": str(sweep.share),
    }


def _command(script: Path, shim: bool = False) -> list[str]:
    """The example as a user runs it, or (``shim``) its driver if it has one, else itself under the CPU shim."""
    rel = f"{script.parent.name}/{script.name}"
    if shim and rel in DRIVERS:
        return [sys.executable, "-c", "import sys; sys.path.insert(0, '.')\n" + DRIVERS[rel]]
    return [sys.executable, *([str(SHIM)] if shim else []), script.name]


def capture(script: Path, record: Path, sweep: Sweep, control: RunControl, env: dict[str, str], shim: bool = False) -> tuple[int, str, str]:
    """Capture one example: (kernels recorded, capture's complaint, the script's last error line)."""
    record.unlink(missing_ok=True)
    on = ["--device", sweep.device] if sweep.device != "gpu" else []
    cmd = [sys.executable, "-m", "tl_aot", "capture", "--keep-going", *on, "-o", str(record), "--", *_command(script, shim)]
    proc = control.run(cmd, script.parent, sweep.timeout, env=env)
    complaint = next((ln for ln in proc.stderr.splitlines() if "not recorded" in ln and " 0 not recorded" not in ln), "")
    kernels = len(json.loads(record.read_text())["kernels"]) if record.exists() else 0
    return kernels, complaint.strip()[:200], "" if proc.returncode == 0 else _last_line(proc.stderr) or f"exit {proc.returncode}"


def build(record: Path, out: Path, sweep: Sweep, control: RunControl) -> tuple[dict[str, int], tuple[str, ...], str]:
    """Build one record for every arch, tolerantly: (variants built per arch, left out, fatal error)."""
    cmd = [sys.executable, "-m", "tl_aot", "build", "--capture", str(record), "-o", str(out), "--keep-going", "-j", str(sweep.share)]
    for arch in sweep.archs:
        cmd += ["--arch", arch]
    proc = control.run(cmd, out.parent, sweep.timeout)
    libs = sorted(out.glob("lib*.so"))
    if proc.returncode != 0 or not libs:
        fatal = _build_failure(proc.stderr) or f"exit {proc.returncode}"
        return {}, (), f"{fatal} [{_record_verdict(record, sweep, control)}]"
    inspected = control.run([sys.executable, "-m", "tl_aot", "inspect", "--json", str(libs[0])], out, sweep.timeout)
    manifest = json.loads(inspected.stdout)
    built: dict[str, int] = {}
    for entry in manifest["entries"]:
        for variant in entry["variants"]:
            built[variant["arch"]] = built.get(variant["arch"], 0) + 1
    left = tuple(
        f"{lo['entry']} ({lo['arch']}): {lo['error'][:160]} [{_tilelang_verdict(record, lo, sweep, control)}]"
        for lo in manifest["left_out"]
    )
    return built, left, ""


def _record_verdict(record: Path, sweep: Sweep, control: RunControl) -> str:
    """TileLang's verdict on every kernel of a record none of which was built (no library to name what it left out)."""
    kernels = json.loads(record.read_text())["kernels"]
    variants = [(f"{k['name']}_{key[:10]}", f"sm_{arch.removeprefix('sm_')}") for key, k in kernels.items() for arch in sweep.archs]
    verdicts = {f"{arch}: {_tilelang_verdict(record, {'entry': entry, 'arch': arch}, sweep, control)}" for entry, arch in variants}
    return "; ".join(sorted(verdicts))


def _tilelang_verdict(record: Path, left_out: dict, sweep: Sweep, control: RunControl) -> str:
    """Whether TileLang itself refuses a left-out variant: ``examples_refusal.py`` in a fresh process."""
    cmd = [sys.executable, str(REFUSAL), str(record), left_out["entry"], left_out["arch"]]
    proc = control.run(cmd, record.parent, sweep.timeout)
    try:
        verdict = json.loads(proc.stdout.splitlines()[-1])
    except (IndexError, ValueError):
        return f"TileLang's verdict unknown: {_last_line(proc.stderr)}"
    return "TileLang refuses too" if verdict["tilelang"] == "refuses" else "TileLang lowers it"


def serve(o: Outcome, script: Path, lib_dir: Path, sweep: Sweep, control: RunControl, tilelang_cache: Path) -> Outcome:
    """``o`` with its served run: the example again, every kernel served strictly from its library (GPU machine)."""
    cmd = [sys.executable, "-m", "tl_aot", "run", "--serve", str(lib_dir), "--strict", "--", *_command(script)]
    proc = control.run(cmd, script.parent, sweep.timeout, env=_env(sweep, tilelang_cache))
    counts = served_counts(proc.stderr)
    lookups = served_lookups(proc.stderr)
    return replace(
        o,
        served={0: "pass", 124: "timed out"}.get(proc.returncode, f"exit {proc.returncode}"),
        served_error="" if proc.returncode == 0 else _last_line(proc.stderr) or f"exit {proc.returncode}",
        served_kernels=None if counts is None else counts[0],
        served_misses=None if counts is None else counts[1],
        tilelang_compiles=tilelang_cache_entries(tilelang_cache),
        call_lookups=None if lookups is None else lookups[0],
        traced_lookups=None if lookups is None else lookups[1],
        traced_why=traced_why(proc.stderr),
    )


def finished_outcome(path: Path) -> Outcome | None:
    """The outcome an earlier run wrote at ``path`` if it finished (neither stopped by its budget nor unreadable), else None."""
    try:
        fields = json.loads(path.read_text())
        o = Outcome(**{**fields, "left_out": tuple(fields.get("left_out", ())), "traced_why": tuple(fields.get("traced_why", ()))})
    except (OSError, ValueError, TypeError):
        return None
    return None if o.unfinished else o


def _reusable(earlier: Outcome, sweep: Sweep) -> bool:
    """Whether an earlier outcome answers this run: captured the same way and, under ``--serve``, served if it was built."""
    same_capture = earlier.gpu == (sweep.device == "gpu")
    return same_capture and (not sweep.serve or bool(earlier.served) or not any(earlier.built.values()))


def sweep_one(rel: str, sweep: Sweep, control: RunControl) -> Outcome:
    """One example through capture, build and (``--serve``) a served run; stopped by the budget, what it had done so far."""
    start = time.monotonic()
    script = sweep.root / rel
    stem = rel.replace("/", "__").removesuffix(".py")
    record, lib_dir, caches = sweep.out / f"{stem}.json", sweep.out / stem, sweep.out / f"{stem}.tilelang"
    o = Outcome(rel, gpu=sweep.device == "gpu")
    if not script.exists():
        return replace(o, script_error="not in this checkout")
    done = sweep.out / f"{stem}.outcome.json"
    if sweep.resume and (earlier := finished_outcome(done)) is not None and _reusable(earlier, sweep):
        return earlier
    step = "capture"
    try:
        env = _env(sweep, _fresh(caches / "capture"))
        kernels, complaint, script_error = capture(script, record, sweep, control, env)
        shim = not kernels and sweep.shim and sweep.device != "gpu"
        if shim:
            kernels, complaint, script_error = capture(script, record, sweep, control, env, shim=True)
        o = replace(o, captured=kernels, shim=shim, not_recorded=complaint, script_error=script_error)
        if kernels:
            step = "build"
            built, left, fatal = build(record, lib_dir, sweep, control)
            o = replace(o, built=built, left_out=left, build_error=fatal)
        if sweep.serve and any(o.built.values()):
            step = "served run"
            o = serve(o, script, lib_dir, sweep, control, _fresh(caches / "served"))
    except Stopped as exc:
        o = replace(o, unfinished=f"not finished: {exc} (during its {step})")
    o = replace(o, seconds=round(time.monotonic() - start, 1))
    _write(done, json.dumps(asdict(o)))
    return o


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a reader, or a call killed meanwhile, never sees half of it)."""
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    part.replace(path)


def _why(o: Outcome) -> str:
    """Why an example did not come through whole: every reason it has, in the order its chain met them."""
    reasons = [o.unfinished, *o.left_out, o.build_error, o.not_recorded]
    if o.script_error and (o.gpu or not o.captured):  # on a CPU machine a script that recorded its kernels dies at a launch
        reasons.append(f"capture run: {o.script_error}" if o.gpu else o.script_error)
    if o.served_error:
        reasons.append(f"served run: {o.served_error}")
    return "; ".join(r for r in reasons if r)


def _compiles_cell(o: Outcome) -> str:
    """The compiles seen while served: ``0``, or the requests the library missed and the kernels TileLang compiled."""
    if not o.served:
        return ""
    if o.served_misses == 0 and o.tilelang_compiles == 0:
        return "0"
    missed = "no report" if o.served_misses is None else f"{o.served_misses} not served"
    return f"{missed}, {o.tilelang_compiles} compiled by TileLang"


def _lookups_cell(o: Outcome) -> str:
    """The served run's lookups: ``by call key / traced`` (a traced one paid TileLang's trace of the prim_func first)."""
    if o.call_lookups is None or o.traced_lookups is None:
        return ""
    why = f" (traced: {'; '.join(o.traced_why)})" if o.traced_why else ""
    return f"{o.call_lookups} / {o.traced_lookups}{why}"


def table(outcomes: list[Outcome], archs: list[str], *, served: bool = False) -> str:
    """The Markdown table of a sweep (with ``served``, the served run's columns)."""
    head = ["example", "captured", *[f"built sm_{a}" for a in archs]]
    head += ["served run", "compiles while served", "lookups: by call key / traced"] if served else []
    head += ["left out / why"]
    rows = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for o in outcomes:
        cells = [
            f"`{o.example}`",
            f"{o.captured}{(' (driver)' if o.example in DRIVERS else ' (shim)') if o.shim else ''}",
            *[str(o.built.get(f"sm_{a}", 0)) for a in archs],
            *([o.served, _compiles_cell(o), _lookups_cell(o)] if served else []),
            _why(o).replace("|", "\\|"),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def _gpu_arch() -> str:
    """The arch TileLang's JIT compiles for on this machine's GPU (``sm_90a`` on an H100), asked of the driver."""
    from tl_aot.capture.device_code import arch_of_cc
    from tl_aot.gpu.cuda_driver import current_gpu

    gpu = current_gpu()
    if not gpu:
        msg = f"--device gpu without --arch builds for this machine's GPU, but none is visible: {gpu.why_none}"
        raise SystemExit(msg)
    return arch_of_cc(gpu.cc)


def select(which: str, only: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The examples ``--set which`` names, narrowed to those whose path contains one of ``only`` (all when empty)."""
    return [e for e in SETS[which] if not only or any(s in e for s in only)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=Path, required=True, help="a TileLang checkout or its examples/ folder")
    ap.add_argument(
        "--arch", action="append", default=[], help="arch to build (repeat), e.g. 90a; with --device gpu: the GPU's own by default"
    )
    ap.add_argument("--out", type=Path, default=Path("/tmp/tl_aot_examples_sweep"), help="work folder (records, libraries)")
    ap.add_argument("--table", type=Path, help="Markdown table to write (default OUT/table.md)")
    ap.add_argument("--set", choices=sorted(SETS), default="sample", help="which examples: SAMPLE (default), SAMPLE_MORE, or all")
    ap.add_argument("--only", action="append", default=[], help="of the set, examples whose path contains this (repeat)")
    ap.add_argument("--device", default="H100-SXM", help="device profile capture answers queries as; 'gpu': capture on this machine's GPU")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per capture, build or served run")
    ap.add_argument("--no-shim", action="store_true", help="never retry an example under examples_cuda_shim.py")
    ap.add_argument("--serve", action="store_true", help="with --device gpu: run each example built again, served strictly by its library")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="examples at once (default 1); each build gets -j of its share of the cores")
    ap.add_argument("--budget", type=float, help="seconds for the whole run: then no example starts and those running are stopped")
    ap.add_argument(
        "--resume", action="store_true", help="take each example OUT holds a finished outcome of from there (run the same call again)"
    )
    args = ap.parse_args(argv)
    if args.serve and args.device != "gpu":
        ap.error("--serve runs each example on this machine's GPU, captured there: give --device gpu too")
    if not args.arch and args.device != "gpu":
        ap.error("--arch is required (it defaults to the GPU's own only with --device gpu)")
    if args.jobs < 1:
        ap.error("-j/--jobs must be at least 1")

    root = (args.examples / "examples" if (args.examples / "examples").is_dir() else args.examples).resolve()
    chosen = select(args.set, args.only)
    archs = tuple(args.arch) or (_gpu_arch(),)
    args.out.mkdir(parents=True, exist_ok=True)
    share = max(1, (os.cpu_count() or 1) // args.jobs)
    sweep = Sweep(root, args.out.resolve(), archs, args.device, args.timeout, not args.no_shim, args.serve, share, args.resume)
    env_note = {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    table_path, columns = args.table or args.out / "table.md", [a.removeprefix("sm_") for a in archs]
    done: list[Outcome] = []

    def emit(o: Outcome) -> None:  # each result as it comes, in the sample's order; the table so far kept on disk
        done.append(o)
        print(json.dumps({**asdict(o), **env_note}), flush=True)
        _write(table_path, table(done, columns, served=args.serve))

    control = RunControl(args.budget)
    outcomes = run_in_order(
        chosen,
        lambda rel, ctl: sweep_one(rel, sweep, ctl),
        jobs=args.jobs,
        control=control,
        unfinished=lambda rel, why, seconds: Outcome(rel, gpu=sweep.device == "gpu", unfinished=why, seconds=seconds),
        emit=emit,
    )
    text = table(outcomes, columns, served=args.serve)
    _write(table_path, text)
    print(text)
    unfinished = sum(1 for o in outcomes if o.unfinished)
    print(f"{len(outcomes)} examples in {control.elapsed:.0f} s with -j {args.jobs}; {unfinished} not finished", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
