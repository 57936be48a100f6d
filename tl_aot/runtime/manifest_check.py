"""A library's manifest texts checked before anything trusts them: the index against its ELF digest, the manifest against the index.

One set of checks, whichever way the texts were read: from the loaded library's exports
(:func:`tl_aot.runtime.loader.read_index`, ``read_manifest``) or from its file's sections without
loading it (:func:`tl_aot.runtime.manifest_file.manifest_of_file`, what ``inspect`` reads). An
altered text, an index of another shape and a library of another launcher ABI are refused with the
same words either way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common.abi import ABI_VERSION
from ..common.errors import LibraryError
from ..common.manifest_index import ManifestIndex, parse_index

if TYPE_CHECKING:
    from ..common.metadata import Manifest

__all__ = ["checked_index", "checked_manifest", "check_abi", "without_index"]


def checked_index(text: str, digest: str, path: Path) -> ManifestIndex:
    """The index ``text`` parsed, once its SHA-256 is ``digest`` and its ABI this runtime's.

    ``digest``: the ELF section's (:data:`tl_aot.runtime.elf.MANIFEST_SECTION`), "" for a library built before it.
    """
    if digest and hashlib.sha256(text.encode()).hexdigest() != digest:
        msg = f"{path}: its manifest was altered after the build (its SHA-256 differs from the one recorded then); rebuild the library"
        raise LibraryError(msg)
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")  # noqa: TRY301 (one message for every malformed index)
    except ValueError as e:
        msg = f"{path}: its manifest index is not valid JSON ({e}); rebuild the library"
        raise LibraryError(msg) from None
    check_abi(raw, path)
    try:
        return parse_index(raw)
    except Exception as e:  # noqa: BLE001 (an index of another shape)
        msg = f"{path}: its manifest index does not describe a library ({type(e).__name__}: {e}); rebuild the library"
        raise LibraryError(msg) from None


def checked_manifest(text: str, index: ManifestIndex, path: Path) -> Manifest:
    """The whole manifest ``text`` parsed, once its SHA-256 is the one ``index`` (itself checked) records."""
    from ..common.metadata import Manifest  # the dataclasses: what loading alone never imports
    from ..common.metadata_json import from_json

    if hashlib.sha256(text.encode()).hexdigest() != index.manifest_sha256:
        msg = f"{path}: its manifest was altered after the build (its SHA-256 differs from the one its index records); rebuild the library"
        raise LibraryError(msg)
    try:
        return from_json(Manifest, text)
    except Exception as e:  # noqa: BLE001 (a manifest of another shape)
        msg = f"{path}: its manifest does not describe a library ({type(e).__name__}: {e}); rebuild the library"
        raise LibraryError(msg) from None


def check_abi(raw: Mapping[str, Any], path: Path) -> None:
    """Refuse a manifest (or index) ``raw`` of a launcher ABI other than this runtime's, naming both tl_aot versions' way out."""
    abi = raw.get("abi_version")
    if abi != ABI_VERSION:
        msg = (
            f"{path} was built by tl_aot {raw.get('tl_aot_version', '?')} with launcher ABI {abi}; this tl_aot "
            f"understands ABI {ABI_VERSION}. Rebuild the library with this tl_aot, or install the tl_aot that built it."
        )
        raise LibraryError(msg)


def without_index(module, path: Path) -> LibraryError:
    """Why a loaded library exporting no manifest index cannot be read: not tl_aot's, or built before the index (ABI < 4)."""
    try:
        fn = module["tl_aot_manifest"]
    except Exception:  # noqa: BLE001
        return LibraryError(f"{path} is not a tl_aot library (it exports no tl_aot_manifest)")
    try:
        raw = json.loads(str(fn()))
        check_abi(raw if isinstance(raw, dict) else {}, path)
    except LibraryError as e:
        return e
    except ValueError:
        pass
    return LibraryError(f"{path}: it exports no manifest index (tl_aot_manifest_index); rebuild the library")
