"""An S3 API server that fails partially: moto's S3 behind a seeded fault injector, on 127.0.0.1.

:class:`FaultyS3` runs moto's server application (``moto[server]``, the real S3 REST API: list,
get, put, head) under a WSGI layer that, for a share of requests chosen by a seeded
:class:`random.Random`, answers as a failing object store does:

* ``5xx``: ``503 SlowDown`` or ``500 InternalError``, S3's XML error body;
* ``timeout``: no answer within the client's read timeout (the request is held, then dropped);
* ``slow``: the right answer, late (under the client's timeout);
* ``truncated``: a GET answers the first part of the object only (a cut upload or a proxy's cut);
* ``stale``: a GET answers other bytes under the same key: another key's object (a mixed-up
  rename or cache), or the object with bytes replaced in its body (a partial overwrite).

Every injected fault is counted by kind in :attr:`FaultyS3.injected`. :func:`s3_options` gives
the s3fs options (endpoint, dummy credentials, timeouts) that point fsspec's ``s3://`` at it.
Nothing leaves this machine: the server listens on the loopback address only, and stops with
the context.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import random
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs

from support.helpers import in_folder

__all__ = ["FaultyS3", "s3_options", "sweep", "Sweep", "FAULT_KINDS", "READ_TIMEOUT_S"]

#: What a request may be failed with.
FAULT_KINDS = ("5xx", "timeout", "slow", "truncated", "stale")

#: The client's read timeout the harness sets (a ``timeout`` fault holds a request longer).
READ_TIMEOUT_S = 0.5

_ERRORS = {
    503: ("SlowDown", "Please reduce your request rate."),
    500: ("InternalError", "We encountered an internal error. Please try again."),
}


class FaultyS3:
    """moto's S3 on ``127.0.0.1:<port>`` with a seeded share ``rate`` of requests failed (see the module's doc)."""

    def __init__(self, *, seed: int = 0, rate: float = 0.0, kinds=FAULT_KINDS) -> None:
        from moto.server import DomainDispatcherApplication, create_backend_app

        self.rng = random.Random(seed)
        self.rate, self.kinds = rate, tuple(kinds)
        self.injected: collections.Counter = collections.Counter()
        self.requests = 0
        self.paused = False  # the harness's own setup and checks go through unharmed
        self._lock = threading.Lock()
        self._objects: set = set()  # object paths seen (what a stale answer may serve instead)
        self._moto = DomainDispatcherApplication(create_backend_app)
        self._server = None

    # --- running ------------------------------------------------------------------------------
    def __enter__(self) -> FaultyS3:
        import logging

        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
        self._server = make_server("127.0.0.1", 0, self, threaded=True)
        threading.Thread(target=self._server.serve_forever, name="faulty-s3", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    # --- the WSGI layer -----------------------------------------------------------------------
    def _decide(self, method: str, path: str) -> str | None:
        with self._lock:
            self.requests += 1
            if self.paused or self.rng.random() >= self.rate:
                return None
            is_get_object = method == "GET" and path.count("/") >= 2 and not path.endswith("/")
            kinds = [k for k in self.kinds if is_get_object or k not in ("truncated", "stale")]
            kind = self.rng.choice(kinds)
            self.injected[kind] += 1
            return kind

    def __call__(self, environ, start_response):
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        query = parse_qs(environ.get("QUERY_STRING", ""))
        if method == "GET" and path.count("/") >= 2 and "list-type" not in query:
            with self._lock:
                self._objects.add(path)
        fault = self._decide(method, path)
        if fault == "5xx":
            return self._error(start_response, self.rng.choice(sorted(_ERRORS)))
        if fault == "timeout":
            time.sleep(READ_TIMEOUT_S * 3)  # the client has given up; the answer goes nowhere
            return self._error(start_response, 503)
        if fault == "slow":
            time.sleep(READ_TIMEOUT_S * 0.6)
        if fault in ("truncated", "stale"):
            return self._bad_object(environ, start_response, path, fault)
        return self._moto(environ, start_response)

    def _error(self, start_response, status: int):
        code, message = _ERRORS[status]
        body = f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>'.encode()
        start_response(f"{status} {code}", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        return [body]

    def _inner(self, environ, path: str):
        """moto's answer to a GET of ``path``: (status line, headers, body)."""
        got = {}

        def capture(status, headers, exc_info=None):
            got["status"], got["headers"] = status, headers

        env = dict(environ, PATH_INFO=path, QUERY_STRING="")
        body = b"".join(self._moto(env, capture))
        return got["status"], got["headers"], body

    def _bad_object(self, environ, start_response, path: str, fault: str):
        status, headers, body = self._inner(environ, path)
        if not status.startswith("200"):
            start_response(status, headers)
            return [body]
        if fault == "truncated":
            body = body[: self.rng.randrange(0, max(1, len(body)))]
        else:
            with self._lock:
                others = sorted(p for p in self._objects if p != path)
            other = self._inner(environ, self.rng.choice(others)) if others and self.rng.random() < 0.5 else None
            if other is not None and other[0].startswith("200"):
                body = other[2]
            elif body:
                at = self.rng.randrange(len(body))
                body = body[:at] + bytes([body[at] ^ 0xFF]) + body[at + 1 :]
        kept = [
            (k, v)
            for k, v in headers
            if k.lower() not in ("content-length", "etag", "content-md5") and not k.lower().startswith("x-amz-checksum")
        ]
        start_response(status, [*kept, ("Content-Length", str(len(body)))])
        return [body]


def s3_options(endpoint: str) -> dict:
    """s3fs's options for the server at ``endpoint``: dummy credentials, short timeouts (s3fs retries as it does by default)."""
    return {
        "endpoint_url": endpoint,
        "key": "testing",
        "secret": "testing",
        "skip_instance_cache": True,
        "config_kwargs": {
            "connect_timeout": READ_TIMEOUT_S,
            "read_timeout": READ_TIMEOUT_S,
            "retries": {"max_attempts": 1},
            "request_checksum_calculation": "when_required",
            "response_checksum_validation": "when_required",
        },
    }


# --- builds against it --------------------------------------------------------------------------

#: A library of several variants of one small kernel: each a cache entry, so a build makes several requests.
SPEC = """[library]
name = "s3lib"
archs = ["90a"]
{entries}"""

ENTRY = """
[[entry]]
name = "add{n}"
source = "k.py"
function = "add"
args = {{ N = {n} }}
"""


@dataclasses.dataclass
class Sweep:
    """What a sweep of builds against the failing server saw."""

    builds: int = 0
    finished: int = 0  # exit 0, the library and every local cache entry byte-identical to an undisturbed build's
    failed_cleanly: int = 0  # exit 1 with one "tl_aot: error:" line, no traceback
    bad: list = dataclasses.field(default_factory=list)  # anything else: a traceback, or bytes that differ (an unverified byte used)
    fell_back: int = 0  # builds that reported the shared cache unusable and went on without it
    requests: int = 0
    injected: dict = dataclasses.field(default_factory=dict)
    seconds: float = 0.0

    @property
    def faults(self) -> int:
        return sum(self.injected.values())

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.injected.items()))
        return (
            f"{self.builds} builds, {self.requests} requests, {self.faults} faults injected ({kinds}): "
            f"{self.finished} finished byte-identical ({self.fell_back} of them without the shared cache after a fault), "
            f"{self.failed_cleanly} failed cleanly, {len(self.bad)} bad; {self.seconds:.0f} s"
        )


def sweep(work: Path, *, seed: int, builds: int, rate: float, sizes=(256, 512, 1024), min_faults: int = 0, log=None) -> Sweep:
    """Builds of one library through ``--cache-url s3://...`` at the failing server, each judged against an undisturbed one.

    ``builds`` of them, or fewer once ``min_faults`` faults were injected.

    Every build starts from an empty local cache, so each variant comes from the shared cache or is
    built again; between builds a seeded share of the shared entries is deleted, so builds also
    store. Tools are replayed (:class:`faultfs.ToolMemo`): a build costs tenths of a second.
    """
    import fsspec.config

    from support.faultfs import ToolMemo
    from support.helpers import ADD_KERNEL

    rng = random.Random(seed)
    work.mkdir(parents=True, exist_ok=True)
    (work / "k.py").write_text(ADD_KERNEL)
    (work / "kernels.toml").write_text(SPEC.format(entries="".join(ENTRY.format(n=n) for n in sizes)))
    result = Sweep()
    t0 = time.monotonic()
    with ToolMemo(), in_folder(work), FaultyS3(seed=seed, rate=0.0) as s3:
        saved = fsspec.config.conf.get("s3")
        fsspec.config.conf["s3"] = s3_options(s3.endpoint)
        try:
            code, err = _build(work, url=None)
            assert code == 0, err
            reference = _outputs(work)
            fs = fsspec.filesystem("s3", **s3_options(s3.endpoint))
            fs.mkdir("bucket")
            for i in range(builds):
                s3.paused = True
                for obj in fs.ls("bucket/tl_aot", detail=False, refresh=True) if fs.exists("bucket/tl_aot") else []:
                    if rng.random() < 0.4:
                        fs.rm_file(obj)
                s3.paused, s3.rate = False, rate
                code, err = _build(work, url="s3://bucket/tl_aot")
                s3.paused = True
                result.builds += 1
                problem = _judge(code, err, _outputs(work), reference)
                if problem:
                    result.bad.append(f"build {i}: {problem}")
                elif code == 0:
                    result.finished += 1
                    result.fell_back += "shared cache s3://bucket/tl_aot: cannot" in err
                else:
                    result.failed_cleanly += 1
                if min_faults and sum(s3.injected.values()) >= min_faults:
                    break
                if log:
                    log(f"build {i}: exit {code}, {sum(s3.injected.values())} faults so far, {time.monotonic() - t0:.1f} s")
        finally:
            fsspec.config.conf.pop("s3", None)
            if saved is not None:
                fsspec.config.conf["s3"] = saved
        result.requests, result.injected = s3.requests, dict(s3.injected)
    result.seconds = time.monotonic() - t0
    return result


def _build(work: Path, *, url: str | None) -> tuple[int, str]:
    """One build in this process, from an empty local cache: (exit status, stderr then stdout; a traceback is exit 99)."""
    import io
    import shutil
    import traceback

    from tl_aot.frontends import cli

    for d in ("out", "cache"):
        shutil.rmtree(work / d, ignore_errors=True)
    args = ["build", "--spec", "kernels.toml", "-o", "out", "--cache-dir", "cache", "-j", "1"]
    args += ["--cache-url", url] if url else []
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = cli.main(args)
        except BaseException:  # noqa: BLE001 (a traceback is what must never happen)
            err.write(traceback.format_exc())
            code = 99
    return int(code or 0), err.getvalue() + out.getvalue()  # the build's log (a shared cache given up on) is on stdout


def _outputs(work: Path) -> dict:
    """The library, header and every local cache entry's files, as bytes (what a build used)."""
    out = {p: (work / p).read_bytes() for p in ("out/libs3lib.so", "out/s3lib.h") if (work / p).is_file()}
    for entry in sorted((work / "cache").glob("[!.]*")):
        for f in sorted(entry.iterdir()):
            out[str(f.relative_to(work))] = f.read_bytes()
    return out


def _judge(code: int, err: str, now: dict, reference: dict) -> str | None:
    """What is wrong with a build under faults (None: nothing)."""
    if "Traceback" in err or code not in (0, 1):
        return f"exit {code}: {err[-1500:]}"
    if code == 1:
        return None if "tl_aot: error:" in err else f"exit 1 with no error line: {err[-800:]}"
    if now != reference:
        differ = sorted(k for k in set(now) | set(reference) if now.get(k) != reference.get(k))
        return f"exit 0 but these differ from an undisturbed build's (bytes used unverified?): {differ}"
    return None
