"""An elementwise kernel that asks for an L2 persisting window on its input."""

import tilelang.language as T


def add_one_l2(N, block=256, hit_ratio=0.8):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            T.annotate_l2_hit_ratio({X: hit_ratio})
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] + 1.0

    return main
