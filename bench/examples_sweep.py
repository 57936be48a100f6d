"""TileLang's own examples through capture and build: kernels tl_aot has never seen.

    python bench/examples_sweep.py --examples DIR --arch 90a [--arch 80] [--out WORK] [--table T.md]
    python bench/examples_sweep.py --examples DIR --arch 90a --device gpu --out W   # on the GPU machine:
    python bench/examples_sweep.py --examples DIR --arch 90a --out W --serve        # then served there

DIR is a TileLang checkout or its ``examples/`` folder (``git archive HEAD examples | tar -x``).
Each example script of the sample (``SAMPLE``, or ``--only SUBSTRING``) is run as a user would run
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
first launch are). ``--serve`` (GPU machine, after a sweep on the same WORK folder): each example runs again under
``python -m tl_aot run --serve LIB --strict``, so every kernel it compiles must come from the
library, and the example's own checks (``assert_close``, its ``main()``) judge the results.

Prints one JSON line per example and writes the Markdown table to ``--table`` (default
WORK/table.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

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

SHIM = Path(__file__).resolve().parent / "examples_cuda_shim.py"
REFUSAL = Path(__file__).resolve().parent / "examples_refusal.py"

# Examples that need a GPU before their first compile even under the shim (CUDA streams, generators):
# a few lines of ours that call their kernel factories as the example does, with its default sizes.
DRIVERS: dict[str, str] = {
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
    """One example: what capture recorded and what the build made of it."""

    example: str
    captured: int = 0  # kernels in the record
    shim: bool = False  # recorded only under examples_cuda_shim.py (or by the example's driver in DRIVERS)
    not_recorded: str = ""  # capture's own complaint, if any
    script_error: str = ""  # the last line the script printed to stderr (CUDA on a CPU machine, ...)
    built: dict[str, int] = field(default_factory=dict)  # arch -> variants built
    left_out: tuple[str, ...] = ()  # "entry (arch): first error line"
    build_error: str = ""  # a build that made no library at all
    served: str = ""  # --serve: "ok" or the failure's last line
    seconds: float = 0.0


_EXCEPTION = re.compile(r"^([\w.]+(Error|Exception|Used|Served)|tl_aot: error)\b.*:")


def _last_line(text: str) -> str:
    """What a failed command died of: its last exception line, else its last line (tl_aot's own reports left out)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not re.match(r"tl_aot (capture|serve)\b", ln)]
    errors = [ln for ln in lines if _EXCEPTION.match(ln)]
    return (errors or lines or [""])[-1][:200]


def _run(cmd: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(cmd, 124, "", f"timed out after {timeout:.0f} s: {exc.cmd[-1]}")


def _command(script: Path, shim: bool = False) -> list[str]:
    """The example as a user runs it, or (``shim``) its driver if it has one, else itself under the CPU shim."""
    rel = f"{script.parent.name}/{script.name}"
    if shim and rel in DRIVERS:
        return [sys.executable, "-c", "import sys; sys.path.insert(0, '.')\n" + DRIVERS[rel]]
    return [sys.executable, *([str(SHIM)] if shim else []), script.name]


def capture(script: Path, record: Path, device: str, timeout: float, shim: bool = False) -> tuple[int, str, str]:
    """Capture one example: (kernels recorded, capture's complaint, the script's last error line)."""
    record.unlink(missing_ok=True)
    on = ["--device", device] if device != "gpu" else []
    cmd = [sys.executable, "-m", "tl_aot", "capture", "--keep-going", *on, "-o", str(record), "--", *_command(script, shim)]
    proc = _run(cmd, script.parent, timeout)
    complaint = next((ln for ln in proc.stderr.splitlines() if "not recorded" in ln and " 0 not recorded" not in ln), "")
    kernels = len(json.loads(record.read_text())["kernels"]) if record.exists() else 0
    return kernels, complaint.strip()[:200], "" if proc.returncode == 0 else _last_line(proc.stderr)


def build(record: Path, out: Path, archs: list[str], timeout: float) -> tuple[dict[str, int], tuple[str, ...], str]:
    """Build one record for every arch, tolerantly: (variants built per arch, left out, fatal error)."""
    cmd = [sys.executable, "-m", "tl_aot", "build", "--capture", str(record), "-o", str(out), "--keep-going"]
    for arch in archs:
        cmd += ["--arch", arch]
    proc = _run(cmd, out.parent, timeout)
    libs = sorted(out.glob("lib*.so"))
    if proc.returncode != 0 or not libs:
        return {}, (), _last_line(proc.stderr) or f"exit {proc.returncode}"
    manifest = json.loads(_run([sys.executable, "-m", "tl_aot", "inspect", "--json", str(libs[0])], out, timeout).stdout)
    built: dict[str, int] = {}
    for entry in manifest["entries"]:
        for variant in entry["variants"]:
            built[variant["arch"]] = built.get(variant["arch"], 0) + 1
    left = tuple(
        f"{lo['entry']} ({lo['arch']}): {lo['error'][:160]} [{_tilelang_verdict(record, lo, timeout)}]" for lo in manifest["left_out"]
    )
    return built, left, ""


def _tilelang_verdict(record: Path, left_out: dict, timeout: float) -> str:
    """Whether TileLang itself refuses a left-out variant: ``examples_refusal.py`` in a fresh process."""
    cmd = [sys.executable, str(REFUSAL), str(record), left_out["entry"], left_out["arch"]]
    proc = _run(cmd, record.parent, timeout)
    try:
        verdict = json.loads(proc.stdout.splitlines()[-1])
    except (IndexError, ValueError):
        return f"TileLang's verdict unknown: {_last_line(proc.stderr)}"
    return "TileLang refuses too" if verdict["tilelang"] == "refuses" else "TileLang lowers it"


def serve(script: Path, lib_dir: Path, timeout: float) -> str:
    """Run the example again with every kernel served strictly from its library (GPU machine)."""
    cmd = [sys.executable, "-m", "tl_aot", "run", "--serve", str(lib_dir), "--strict", "--", *_command(script)]
    proc = _run(cmd, script.parent, timeout)
    return "ok" if proc.returncode == 0 else _last_line(proc.stderr) or f"exit {proc.returncode}"


def table(outcomes: list[Outcome], archs: list[str]) -> str:
    """The Markdown table of a sweep."""
    head = ["example", "captured", *[f"built sm_{a}" for a in archs], "left out / why", "served"]
    rows = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for o in outcomes:
        why = "; ".join(o.left_out) or o.build_error or o.not_recorded or ("" if o.captured else o.script_error)
        cells = [
            f"`{o.example}`",
            f"{o.captured}{(' (driver)' if o.example in DRIVERS else ' (shim)') if o.shim else ''}",
            *[str(o.built.get(f"sm_{a}", 0)) for a in archs],
            why.replace("|", "\\|"),
            o.served,
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=Path, required=True, help="a TileLang checkout or its examples/ folder")
    ap.add_argument("--arch", action="append", required=True, help="arch to build (repeat), e.g. 90a")
    ap.add_argument("--out", type=Path, default=Path("/tmp/tl_aot_examples_sweep"), help="work folder (records, libraries)")
    ap.add_argument("--table", type=Path, help="Markdown table to write (default OUT/table.md)")
    ap.add_argument("--only", action="append", default=[], help="examples whose path contains this (repeat)")
    ap.add_argument("--device", default="H100-SXM", help="device profile capture answers queries as; 'gpu': capture on this machine's GPU")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per capture, build or served run")
    ap.add_argument("--no-shim", action="store_true", help="never retry an example under examples_cuda_shim.py")
    ap.add_argument("--serve", action="store_true", help="GPU machine: run each example served strictly by its library")
    args = ap.parse_args(argv)

    root = args.examples / "examples" if (args.examples / "examples").is_dir() else args.examples
    chosen = [e for e in SAMPLE if not args.only or any(s in e for s in args.only)]
    args.out.mkdir(parents=True, exist_ok=True)
    env_note = {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    outcomes: list[Outcome] = []
    for rel in chosen:
        script = root / rel
        stem = rel.replace("/", "__").removesuffix(".py")
        record, lib_dir = args.out / f"{stem}.json", args.out / stem
        start = time.monotonic()
        if not script.exists():
            outcomes.append(Outcome(rel, script_error="not in this checkout"))
            continue
        if args.serve:
            prior = json.loads((args.out / f"{stem}.outcome.json").read_text())
            prior["left_out"] = tuple(prior["left_out"])
            o = Outcome(**{**prior, "served": serve(script, lib_dir, args.timeout)})
        else:
            kernels, complaint, script_error = capture(script, record, args.device, args.timeout)
            shim = not kernels and not args.no_shim and args.device != "gpu"
            if shim:
                kernels, complaint, script_error = capture(script, record, args.device, args.timeout, shim=True)
            built, left, fatal = build(record, lib_dir, args.arch, args.timeout) if kernels else ({}, (), "")
            o = Outcome(rel, kernels, shim, complaint, script_error, built, left, fatal, seconds=round(time.monotonic() - start, 1))
            (args.out / f"{stem}.outcome.json").write_text(json.dumps(asdict(o)))
        outcomes.append(o)
        print(json.dumps({**asdict(o), **env_note}), flush=True)
    text = table(outcomes, [a.removeprefix("sm_") for a in args.arch])
    (args.table or args.out / "table.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
