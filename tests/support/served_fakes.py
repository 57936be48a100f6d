"""A captured kernel's library as serving reads it, without building one: for unit tests of serving's lookups."""

from __future__ import annotations

import types
from pathlib import Path

from tl_aot.capture.record_specs import recorded_calls
from tl_aot.common.arch import parse_arch
from tl_aot.common.manifest_index import index_of
from tl_aot.common.metadata import ArchVariant, LoweredEntry, Manifest

__all__ = ["LAZY_SCALE", "FakeLibrary", "fake_library"]


#: A user's module with a lazy ``@tilelang.jit`` kernel that reads the tensor it is given (its shape): no call key spells
#: such a call, so serving answers it by its traced prim_func. ``_body`` builds the prim_func for a size.
LAZY_SCALE = """
import tilelang
import tilelang.language as T


def _body(N, scale):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(N):
                B[i] = A[i] * scale

    return main


@tilelang.jit(out_idx=[-1])
def scale_by(X, scale):
    return _body(X.shape[0], scale)
"""


class FakeLibrary(types.SimpleNamespace):
    """A loaded library's shape as serving reads it: its index, tunings, records, path and entries by name.

    An entry, called, returns ``("ran", its name, the arguments)``.
    """

    def __getitem__(self, name: str):
        return lambda *args: ("ran", name, args)


def fake_library(record: Path, request_key: str, name: str, capture_name: str) -> FakeLibrary:
    """A library holding the kernel ``record`` captured under ``request_key`` as entry ``name``, calls included.

    What ``build --capture`` makes of the record, short of the built images.
    """
    variant = ArchVariant(request_key=request_key, arch=parse_arch("sm_90a"))
    entry = LoweredEntry(
        variants=(variant,), capture_key=request_key, name=name, capture_name=capture_name, function="captured", source="k.py"
    )
    manifest = Manifest(abi_version=0, library="fake", entries=(entry,), calls=recorded_calls([record], {request_key}))
    return FakeLibrary(index=index_of(manifest), tunings=(), signature=manifest.entry, path=record.parent / "libfake.so")
