"""Flash-attention forward, autotuned the way TileLang users write it: ``@autotune`` over a
``@tilelang.jit(out_idx=[3])`` factory (BSHD layout, optional causal mask)."""

import tilelang
import tilelang.language as T
from tilelang.autotuner import autotune


def candidate_configs():
    """Tile shapes worth trying on sm_90a: (block_M, block_N, num_stages, threads)."""
    shapes = [(64, 64, 1, 128), (128, 64, 2, 256), (128, 128, 2, 256), (64, 128, 2, 128)]
    return [dict(block_M=m, block_N=n, num_stages=s, threads=t) for m, n, s, t in shapes]


@autotune(configs=candidate_configs(), warmup=10, rep=20)
@tilelang.jit(out_idx=[3], pass_configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
def flash_fwd(batch, heads, seq_len, dim, causal=False, block_M=None, block_N=None, num_stages=None, threads=None):
    log2e_scale = (1.0 / dim) ** 0.5 * 1.44269504
    shape = [batch, seq_len, heads, dim]
    dtype, accum = "float16", "float32"

    @T.prim_func
    def fwd(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype), Out: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (mb, h, b):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            o_s = T.alloc_shared([block_M, dim], dtype)
            scores = T.alloc_fragment([block_M, block_N], accum)
            probs = T.alloc_fragment([block_M, block_N], dtype)
            acc = T.alloc_fragment([block_M, dim], accum)
            row_max = T.alloc_fragment([block_M], accum)
            prev_max = T.alloc_fragment([block_M], accum)
            rescale = T.alloc_fragment([block_M], accum)
            row_sum = T.alloc_fragment([block_M], accum)
            denom = T.alloc_fragment([block_M], accum)

            T.copy(Q[b, mb * block_M : (mb + 1) * block_M, h, :], q_s)
            T.fill(acc, 0)
            T.fill(denom, 0)
            T.fill(row_max, -T.infinity(accum))
            n_tiles = T.min(T.ceildiv(seq_len, block_N), T.ceildiv((mb + 1) * block_M, block_N)) if causal else T.ceildiv(seq_len, block_N)
            for t in T.Pipelined(n_tiles, num_stages=num_stages):
                T.copy(K[b, t * block_N : (t + 1) * block_N, h, :], k_s)
                if causal:
                    for i, j in T.Parallel(block_M, block_N):
                        scores[i, j] = T.if_then_else(mb * block_M + i >= t * block_N + j, 0, -T.infinity(accum))
                else:
                    T.clear(scores)
                T.gemm(q_s, k_s, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(row_max, prev_max)
                T.reduce_max(scores, row_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp2(prev_max[i] * log2e_scale - row_max[i] * log2e_scale)
                for i, j in T.Parallel(block_M, block_N):
                    scores[i, j] = T.exp2(scores[i, j] * log2e_scale - row_max[i] * log2e_scale)
                T.reduce_sum(scores, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    denom[i] = denom[i] * rescale[i] + row_sum[i]
                T.copy(scores, probs)
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] *= rescale[i]
                T.copy(V[b, t * block_N : (t + 1) * block_N, h, :], v_s)
                T.gemm(probs, v_s, acc, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc[i, j] /= denom[i]
            T.copy(acc, o_s)
            T.copy(o_s, Out[b, mb * block_M : (mb + 1) * block_M, h, :])

    return fwd
