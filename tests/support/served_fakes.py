"""A captured kernel's library as serving reads it, without building one: for unit tests of serving's lookups."""

from __future__ import annotations

import types
from pathlib import Path

from tl_aot.capture.record_specs import recorded_calls
from tl_aot.common.arch import parse_arch
from tl_aot.common.manifest_index import index_of
from tl_aot.common.metadata import ArchVariant, LoweredEntry, Manifest

__all__ = ["FakeLibrary", "fake_library"]


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
