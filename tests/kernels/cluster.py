"""A kernel launched in thread-block clusters (sm_90+): each CTA writes its rank in the cluster."""

import tilelang.language as T

from tl_aot.common.tilelang_compat import cluster_kernel


def cluster_rank(N, cluster=2, block=128):
    @T.prim_func
    def main(Y: T.Tensor((N,), "int32")):
        with cluster_kernel(T.ceildiv(N, block), threads=block, cluster_dims=(cluster, 1, 1)) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = T.block_rank_in_cluster()

    return main
