"""Loading built libraries with only apache-tvm-ffi: ``load``, ``Library``, the ELF check, torch ops."""

from .loader import *  # noqa: F403
from .loader import __all__  # noqa: F401
