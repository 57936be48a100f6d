"""The shared cache on a store that fails partially, faults injected at the fsspec layer (seeded, in milliseconds).

The store under the shared cache answers a seeded share of calls as an object store does when
it fails: a timeout, a 5xx, a slow answer, a truncated object, a stale one (another key's object,
or bytes replaced in it). Many "machines" (each a fresh local cache) look up and store one set of
keys through it. Whatever happens, no call raises, every hit's bytes are the ones stored for that
key (0 unverified bytes used), the local caches hold only those, and after a request failed the
build sends no more. The same over a real S3 API server with real builds:
``tests/integration/test_shared_cache_s3.py`` (a sample) and ``bench/s3_faults.py`` (>= 300 faults).
"""

from __future__ import annotations

import collections
import random
import time

from support.elf_images import cubin

from tl_aot.common.arch import parse_arch
from tl_aot.common.metadata import DeviceKernel, LoweredVariant
from tl_aot.common.metadata_json import to_json
from tl_aot.pipeline.cache import VariantCache
from tl_aot.pipeline.shared_cache import SharedCache, pack_entry

KINDS = ("timeout", "5xx", "slow", "truncated", "stale")


class _FailingStore:
    """The shared cache's filesystem, failing a seeded share of calls as an object store does (the rest pass on)."""

    def __init__(self, fs, rng: random.Random, rate: float, injected: collections.Counter, kinds=KINDS) -> None:
        self._fs, self._rng, self._rate, self.injected, self._kinds = fs, rng, rate, injected, kinds
        self.calls = 0
        self.failed_at = None  # the call count when a request other than a listing first failed

    def _fault(self, reading: bool, listing: bool = False) -> str | None:
        self.calls += 1
        if self._rng.random() >= self._rate:
            return None
        kind = self._rng.choice([k for k in self._kinds if reading or k not in ("truncated", "stale")])
        self.injected[kind] += 1
        if kind in ("timeout", "5xx") and not listing and self.failed_at is None:
            self.failed_at = self.calls
        if kind == "timeout":
            raise TimeoutError("read timeout")
        if kind == "5xx":
            raise OSError("503 SlowDown: Please reduce your request rate.")
        if kind == "slow":
            time.sleep(0.001)
            return None
        return kind

    def _damage(self, data: bytes, kind: str | None) -> bytes:
        if kind == "truncated":
            return data[: self._rng.randrange(len(data))]
        if kind == "stale":
            others = [p for p in self._fs.ls(self._fs._parent(self._last), detail=False) if p.endswith(".tlv")]
            if others and self._rng.random() < 0.5:
                return self._fs.cat_file(self._rng.choice(others))
            at = self._rng.randrange(len(data))
            return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]
        return data

    def cat_file(self, path, **kw):
        kind = self._fault(True)
        self._last = path
        return self._damage(self._fs.cat_file(path, **kw), kind)

    def cat(self, paths, **kw):
        """One batched read (a timeout, 5xx or slow answer for all), then each object maybe truncated or stale."""
        self._fault(False)
        got = self._fs.cat(paths, **kw)
        for p in list(got):
            self._last = p
            bad = [k for k in self._kinds if k in ("truncated", "stale")]
            if bad and not isinstance(got[p], BaseException) and self._rng.random() < self._rate:
                kind = self._rng.choice(bad)
                self.injected[kind] += 1
                got[p] = self._damage(got[p], kind)
        return got

    def ls(self, *a, **kw):
        self._fault(False, listing=True)  # a listing that fails: each key is read instead
        return self._fs.ls(*a, **kw)

    def pipe_file(self, *a, **kw):
        self._fault(False)
        return self._fs.pipe_file(*a, **kw)

    def makedirs(self, *a, **kw):
        self._fault(False)
        return self._fs.makedirs(*a, **kw)

    def exists(self, *a, **kw):
        self._fault(False)
        return self._fs.exists(*a, **kw)

    def __getattr__(self, name):
        return getattr(self._fs, name)


def _entries(n: int) -> dict:
    """key -> (variant, image): each a different kernel, so another key's bytes are told apart."""
    out = {}
    for i in range(n):
        variant = LoweredVariant(entry=f"e{i}", arch=parse_arch("sm_80"), kernels=(DeviceKernel(name=f"k{i}"),))
        out[f"key{i:02d}"] = (variant, cubin(f"k{i}"))
    return out


def test_seeded_faults_never_raise_and_never_serve_a_wrong_byte(tmp_path):
    rng, injected = random.Random(42), collections.Counter()
    truth = _entries(6)
    url = (tmp_path / "shared").as_uri()
    hits = fallbacks = 0
    for machine in range(80):
        cache = SharedCache(VariantCache(tmp_path / f"m{machine}"), url)
        cache.fs = store = _FailingStore(cache.fs, rng, 0.3, injected)
        found = cache.load_many([(k, None) for k in truth])
        for key, (variant, image) in found.items():
            assert image == truth[key][1] and variant.entry == truth[key][0].entry, key
        hits += len(found)
        for key in sorted(set(truth) - set(found)):  # what a build makes itself, then stores
            cache.store(key, *truth[key])
        if store.failed_at is not None:  # the build went on without the shared cache: no request after the failed one
            fallbacks += 1
            assert cache.off and store.calls == store.failed_at, (store.calls, store.failed_at)
        for key, (variant, image) in truth.items():  # the local cache holds only true bytes
            got = cache.local.load(key)
            assert got is not None and got[1] == image and got[0].entry == variant.entry
        for obj in (tmp_path / "shared").glob("*.tlv"):  # other machines' builds come and go
            if rng.random() < 0.3:
                obj.unlink()
    print(f"\n{sum(injected.values())} faults ({dict(sorted(injected.items()))}): {hits} verified hits, {fallbacks} went on without it")
    assert sum(injected.values()) >= 100 and set(injected) == set(KINDS), injected
    assert hits > 0 and fallbacks > 0


def test_an_entry_whose_digests_agree_over_a_damaged_image_is_a_miss(tmp_path):
    """A consistent header over bytes that are no cubin of the variant's kernels: a miss, rebuilt and stored again, not an error."""
    (variant, image), url = _entries(1)["key00"], (tmp_path / "shared").as_uri()
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "key00.tlv").write_bytes(pack_entry("key00", to_json(variant, indent=1), b"\x7fELF not a cubin"))
    cache = SharedCache(VariantCache(tmp_path / "local"), url)
    assert cache.load("key00") is None and cache.load_many([("key00", None)]) == {}
    cache.store("key00", variant, image)
    assert SharedCache(VariantCache(tmp_path / "other"), url).load("key00")[1] == image


def test_after_a_failed_request_the_build_goes_on_without_the_shared_cache(tmp_path):
    logged = []
    cache = SharedCache(VariantCache(tmp_path / "local"), (tmp_path / "shared").as_uri(), log=logged.append)
    cache.fs = store = _FailingStore(cache.fs, random.Random(0), 1.0, collections.Counter(), kinds=("timeout", "5xx"))
    truth = _entries(3)
    assert cache.load_many([(k, None) for k in truth]) == {}
    sent = store.calls
    for key, entry in truth.items():
        cache.store(key, *entry)
        assert cache.load(key) is not None  # from the local cache
    assert store.calls == sent and cache.off
    assert len(logged) == 1 and "building without it" in logged[0]
