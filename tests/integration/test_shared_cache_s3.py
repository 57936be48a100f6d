"""Builds through ``--cache-url s3://...`` against a real S3 API server that fails partially (a seeded sample).

moto's S3 server on 127.0.0.1 behind ``tests/support/s3faults.py``'s injector (timeouts, 5xx, slow
answers, truncated and stale objects) holds the shared cache; s3fs talks to it as to AWS. Each
build starts from an empty local cache and must finish with the library and every local cache
entry byte-identical to an undisturbed build's (0 unverified bytes used), or fail with one clean
error line. The >= 300-fault sweep is ``python bench/s3_faults.py``; the fsspec-layer faults,
in milliseconds, are ``tests/unit/test_shared_cache_faults.py``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("tilelang")
pytest.importorskip("moto.server")
pytest.importorskip("s3fs")


def test_builds_against_a_failing_s3_finish_identical_or_fail_cleanly(tmp_path):
    from support.s3faults import sweep

    result = sweep(tmp_path / "w", seed=7, builds=5, rate=0.5, sizes=(256, 512))
    print("\n" + result.summary())
    assert not result.bad, "\n".join(result.bad)
    assert result.finished + result.failed_cleanly == result.builds == 5
    assert result.faults >= 5, result.summary()
