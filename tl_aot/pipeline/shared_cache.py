"""A variant cache shared between machines: entries at an fsspec URL, behind the local cache.

``TL_AOT_CACHE_URL`` / ``--cache-url`` (``file:///mnt/shared/tl_aot``, ``s3://bucket/tl_aot``, any
fsspec URL whose filesystem is installed): CI runs, shards and cluster drivers reuse what any of
them built. Each entry is one object, ``<url>/<key>.tlv``: a header line (key, sizes and SHA-256
of both parts) then the variant's metadata (paths relative to its project, as the local cache
stores them) and its image. One object per entry, so a put is all or nothing on an object store;
on a folder it is written under a temporary name and renamed.

Reads are verified like the local cache's: an entry of another key, of the wrong size or digest,
or whose metadata does not parse is a miss, never used. A hit is copied into the local cache
(which checks it again: the image a complete cubin of the variant's kernels, the headers its flags
name) and served from there; one the local cache refuses is a miss too. No byte read from the
store is used before these checks.

An object store fails partially: a request times out, answers 5xx, is slow, or serves a truncated
or stale object. A bad object is a miss (rebuilt here, and overwritten by this build's store). A
request that fails is reported once and the build goes on without the shared cache: no later
request of this build is sent, so a store that hangs costs one request's timeout, not one per
variant (s3fs's timeouts and retries are set by fsspec's configuration, e.g. ``FSSPEC_S3``).
``bench/s3_faults.py`` drives builds against an S3 API server (moto) that injects these faults.

A plan looks all its keys up at once (:meth:`SharedCache.load_many`): one listing of the cache's
folder, then one batched read of the entries it holds (concurrent on an object store, whose
fsspec filesystem is asynchronous; a thread pool for a synchronous remote one): a 200-variant plan
against an object store is two requests' latency, not 200. What the listing found also spares
each store an existence check.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..common.errors import CompileError
from ..common.metadata import LoweredVariant
from ..common.metadata_json import from_json, to_json
from .cache import ROOT_TOKEN, VariantCache, relocate

__all__ = ["SharedCache", "CACHE_URL_ENV", "pack_entry", "unpack_entry"]

#: Entries a synchronous remote filesystem reads at once (an asynchronous one batches them itself).
_READ_THREADS = 16

#: The environment variable every front end reads for the shared cache (``--cache-url`` wins).
CACHE_URL_ENV = "TL_AOT_CACHE_URL"

_MAGIC = b"TL_AOT_VARIANT 1\n"


def pack_entry(key: str, variant_text: str, image: bytes) -> bytes:
    """One shared-cache object: the header line, the metadata JSON and the image."""
    text = variant_text.encode()
    head = {
        "key": key,
        "variant_bytes": len(text),
        "variant_sha256": hashlib.sha256(text).hexdigest(),
        "image_bytes": len(image),
        "image_sha256": hashlib.sha256(image).hexdigest(),
    }
    return _MAGIC + json.dumps(head, sort_keys=True).encode() + b"\n" + text + image


def unpack_entry(data: bytes, key: str) -> tuple[str, bytes] | None:
    """(metadata JSON, image) of an object written by :func:`pack_entry` for ``key``, if intact; else None."""
    try:
        if not data.startswith(_MAGIC):
            return None
        line_end = data.index(b"\n", len(_MAGIC))
        head = json.loads(data[len(_MAGIC) : line_end])
        body = data[line_end + 1 :]
        n = int(head["variant_bytes"])
        text, image = body[:n], body[n:]
        if head["key"] != key or len(image) != int(head["image_bytes"]):
            return None
        if hashlib.sha256(text).hexdigest() != head["variant_sha256"] or hashlib.sha256(image).hexdigest() != head["image_sha256"]:
            return None
        return text.decode(), image
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


class SharedCache:
    """The local :class:`~tl_aot.pipeline.cache.VariantCache` with a shared one behind it; the same interface as the local one."""

    def __init__(self, local: VariantCache, url: str, *, log=None) -> None:
        try:
            import fsspec
        except ImportError:
            from ..common.errors import ToolchainNotFound

            msg = f"a shared cache ({url}) needs fsspec: pip install 'tl_aot[cluster]'"
            raise ToolchainNotFound(msg) from None
        self.local = local
        self.url = url.rstrip("/")
        try:
            self.fs, self.path = fsspec.core.url_to_fs(self.url)
        except (ImportError, ValueError) as e:
            from ..common.errors import SpecError

            msg = f"shared cache {url}: {e} (for s3:// install s3fs, for gs:// gcsfs)"
            raise SpecError(msg) from None
        self.log = log
        self._warned = False
        self.off = False  # a request failed: the rest of this build goes without the shared cache
        self._lock = threading.Lock()
        self.adopted: set[str] = set()  # keys whose entry came from the shared cache in this build
        self._bad: set = set()  # keys whose shared entry was damaged: rewritten by store()
        self._listed: set | None = None  # keys the shared folder held when load_many listed it (None: not listed)
        self._made = False  # the shared folder exists (made once, not per store)

    @property
    def hits(self) -> int:
        """How many variants this build took from the shared cache."""
        return len(self.adopted)

    def __getattr__(self, name):  # everything else (root, the runtime object's folder, ...) is the local cache's
        return getattr(self.local, name)

    def _object(self, key: str) -> str:
        return f"{self.path}/{key}.tlv"

    def _warn(self, what: str, e: BaseException) -> None:
        with self._lock:
            self.off = True
            if self._warned:
                return
            self._warned = True
        if self.log:
            self.log(f"shared cache {self.url}: cannot {what} ({type(e).__name__}: {e}); building without it")

    def load(self, key: str, project=None):
        """The local entry, else the shared one (verified, then copied into the local cache and read from there)."""
        hit = self.local.load(key, project)
        if hit is not None or self.off:
            return hit
        try:
            data = self.fs.cat_file(self._object(key))
        except FileNotFoundError:
            return None
        except Exception as e:  # noqa: BLE001 (an unreachable store is a miss: the build goes on)
            self._warn("read", e)
            return None
        return self._adopt(key, data, project)

    def load_many(self, items: Iterable[tuple[str, Path | None]]) -> dict[str, tuple[LoweredVariant, bytes]]:
        """``{key: (variant, image)}`` of the ``(key, project)`` items found, locally or shared; the others are misses.

        The local cache first; for its misses, one listing of the shared folder and one batched read
        of the entries it holds, each verified as :meth:`load` verifies one.
        """
        found, missing = {}, {}
        for key, project in items:
            hit = self.local.load(key, project)
            if hit is not None:
                found[key] = hit
            else:
                missing[key] = project
        if not missing or self.off:
            return found
        listed = self._list()
        wanted = [k for k in missing if listed is None or k in listed]
        for key, data in zip(wanted, self._read_all([self._object(k) for k in wanted])):
            if isinstance(data, FileNotFoundError):
                continue
            if isinstance(data, BaseException):
                self._warn("read", data)
                continue
            hit = self._adopt(key, data, missing[key])
            if hit is not None:
                found[key] = hit
        return found

    def _list(self) -> set | None:
        """The keys the shared folder holds now (one listing), or None where it cannot be listed (each key is then read)."""
        try:
            names = self.fs.ls(self.path, detail=False, refresh=True)  # what the store holds now, not a listing cached earlier
        except FileNotFoundError:
            names = []
        except Exception:  # noqa: BLE001 (a store that lists nothing, e.g. plain HTTP: read each key instead)
            return None
        keys = {n.rstrip("/").rsplit("/", 1)[-1][: -len(".tlv")] for n in names if n.endswith(".tlv")}
        self._listed = keys
        return keys

    def _read_all(self, paths: list) -> list:
        """Each object's bytes, or the exception reading it raised: one batched call (or a thread pool)."""
        if not paths:
            return []
        try:
            if getattr(self.fs, "async_impl", False) or "file" in _protocols(self.fs):
                got = self.fs.cat(paths, on_error="return")
                return [got.get(p, FileNotFoundError(p)) for p in (self.fs._strip_protocol(p) for p in paths)]

            def one(path):
                try:
                    return self.fs.cat_file(path)
                except Exception as e:  # noqa: BLE001 (returned: the caller tells a miss from an unreachable store)
                    return e

            with ThreadPoolExecutor(max_workers=min(_READ_THREADS, len(paths))) as pool:
                return list(pool.map(one, paths))
        except Exception as e:  # noqa: BLE001 (an unreachable store: every key a miss)
            return [e] * len(paths)

    def _adopt(self, key: str, data: bytes, project):
        """A shared entry's bytes, verified, copied into the local cache and read back from there; None if unusable."""
        entry = unpack_entry(data, key)
        try:
            variant = None if entry is None else from_json(LoweredVariant, entry[0])
        except Exception:  # noqa: BLE001 (metadata of another shape: a miss)
            variant = None
        if entry is None or variant is None:
            self._bad.add(key)  # damaged or foreign: rebuilt, and overwritten by store()
            return None
        if project is not None:
            variant = relocate(variant, ROOT_TOKEN, str(project))
        try:
            self.local.store(key, variant, entry[1], project)
        except CompileError:  # digests that agree over an image that is no cubin of the variant's kernels
            self._bad.add(key)
            return None
        found = self.local.load(key, project)
        if found is not None:
            with self._lock:
                self.adopted.add(key)  # counted by hits
        return found

    def store(self, key: str, variant, image: bytes, project=None, *, replace: bool = False) -> None:
        """Store locally, then put the entry in the shared cache (atomically: one object, or a temporary name renamed)."""
        self.local.store(key, variant, image, project, replace=replace)
        if self.off:
            return
        shared = relocate(variant, str(project), ROOT_TOKEN) if project is not None else variant
        data = pack_entry(key, to_json(shared, indent=1), image)
        final = self._object(key)
        try:
            if not replace and key not in self._bad and self._present(key, final):
                return  # content addressed: an entry of this key is this entry (a damaged one is rewritten by a miss's store)
            if not self._made:
                self.fs.makedirs(self.path, exist_ok=True)
                self._made = True
            if "file" in _protocols(self.fs):
                tmp = f"{self.path}/.{key}.{uuid.uuid4().hex}.tmp"
                self.fs.pipe_file(tmp, data)
                os.replace(tmp, final)
            else:
                self.fs.pipe_file(final, data)  # an object store's put is all or nothing
            if self._listed is not None:
                self._listed.add(key)
        except Exception as e:  # noqa: BLE001 (the local cache has it; the shared one is best effort)
            self._warn("write", e)

    def _present(self, key: str, final: str) -> bool:
        """Whether the shared cache has ``key``: from the plan's listing where there was one, else asked.

        A key another machine stored since the listing is written again, harmlessly (same bytes, one atomic put).
        """
        if self._listed is not None:
            return key in self._listed
        return self.fs.exists(final)


def _protocols(fs: Any) -> tuple[str, ...]:
    p = fs.protocol
    return (p,) if isinstance(p, str) else tuple(p)
