"""Split-KV GQA decoding: one kernel writes per-split partial outputs and log-sum-exps into
``T.alloc_global`` scratch buffers, a second combines them (two launches, one entry)."""

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[3])
def decode_splitkv(batch, heads, kv_heads, seqlen, dim, num_split=4, block_N=64, threads=128, dtype="float16"):
    accum = "float32"
    block_H = 16
    group = heads // kv_heads
    assert group % block_H == 0, "heads per KV head must be a multiple of 16"
    chunk = seqlen // num_split
    assert chunk % block_N == 0, "each split must hold whole blocks of keys"
    log2e_scale = (1.0 / dim) ** 0.5 * 1.44269504

    @T.prim_func
    def decode(
        Q: T.Tensor([batch, heads, dim], dtype),
        K: T.Tensor([batch, seqlen, kv_heads, dim], dtype),
        V: T.Tensor([batch, seqlen, kv_heads, dim], dtype),
        Out: T.Tensor([batch, heads, dim], dtype),
    ):
        partial_lse = T.alloc_global([batch, heads, num_split], accum)
        partial_out = T.alloc_global([batch, heads, num_split, dim], accum)
        with T.Kernel(batch, heads // block_H, num_split, threads=threads) as (b, hb, s):
            q_s = T.alloc_shared([block_H, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            p_s = T.alloc_shared([block_H, block_N], dtype)
            scores = T.alloc_fragment([block_H, block_N], accum)
            acc = T.alloc_fragment([block_H, dim], accum)
            row_max = T.alloc_fragment([block_H], accum)
            prev_max = T.alloc_fragment([block_H], accum)
            rescale = T.alloc_fragment([block_H], accum)
            row_sum = T.alloc_fragment([block_H], accum)
            denom = T.alloc_fragment([block_H], accum)
            kvh = hb * block_H // group

            T.copy(Q[b, hb * block_H : (hb + 1) * block_H, :], q_s)
            T.fill(acc, 0)
            T.fill(denom, 0)
            T.fill(row_max, -T.infinity(accum))
            for t in T.Pipelined(chunk // block_N, num_stages=2):
                start = s * chunk + t * block_N
                T.copy(K[b, start : start + block_N, kvh, :], k_s)
                T.clear(scores)
                T.gemm(q_s, k_s, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(row_max, prev_max)
                T.reduce_max(scores, row_max, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    rescale[i] = T.exp2(prev_max[i] * log2e_scale - row_max[i] * log2e_scale)
                for i, j in T.Parallel(block_H, block_N):
                    scores[i, j] = T.exp2(scores[i, j] * log2e_scale - row_max[i] * log2e_scale)
                T.reduce_sum(scores, row_sum, dim=1)
                for i in T.Parallel(block_H):
                    denom[i] = denom[i] * rescale[i] + row_sum[i]
                T.copy(scores, p_s)
                for i, j in T.Parallel(block_H, dim):
                    acc[i, j] *= rescale[i]
                T.copy(V[b, start : start + block_N, kvh, :], v_s)
                T.gemm(p_s, v_s, acc, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_H, dim):
                partial_out[b, hb * block_H + i, s, j] = acc[i, j] / denom[i]
            for i in T.Parallel(block_H):
                partial_lse[b, hb * block_H + i, s] = T.log2(denom[i]) + row_max[i] * log2e_scale

        with T.Kernel(heads, batch, threads=dim) as (h, b):
            best = T.alloc_local([1], accum)
            total = T.alloc_local([1], accum)
            weight = T.alloc_local([1], accum)
            o = T.alloc_fragment([dim], accum)
            T.clear(o)
            best[0] = -T.infinity(accum)
            for k in T.serial(num_split):
                best[0] = T.max(best[0], partial_lse[b, h, k])
            total[0] = 0
            for k in T.serial(num_split):
                total[0] += T.exp2(partial_lse[b, h, k] - best[0])
            total[0] = T.log2(total[0]) + best[0]
            for k in T.serial(num_split):
                weight[0] = T.exp2(partial_lse[b, h, k] - total[0])
                for i in T.Parallel(dim):
                    o[i] += partial_out[b, h, k, i] * weight[0]
            for i in T.Parallel(dim):
                Out[b, h, i] = o[i]

    return decode
