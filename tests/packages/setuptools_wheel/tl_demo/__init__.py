"""tl_demo: two TileLang kernels (loaded through tvm_ffi only) and an ordinary C extension."""

from ._kernels import *  # noqa: F403  add_one, scale
from ._native import answer  # noqa: F401
