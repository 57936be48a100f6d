"""TileLang kernels built by CMake (add_tilelang_kernel) into this wheel; loading them needs only apache-tvm-ffi."""

from pathlib import Path

import tvm_ffi

_HERE = Path(__file__).resolve().parent

#: ``add_one(X, Y)``: Y = X + 1 for any length.
add_one = tvm_ffi.load_module(str(_HERE / "libskb_add_one.so"))["skb_add_one"]
#: ``axpy(X, Y, alpha, shift)``: Y = alpha * X + Y + shift for length 1024.
axpy = tvm_ffi.load_module(str(_HERE / "libskb_axpy.so"))["skb_axpy"]

__all__ = ["add_one", "axpy"]
