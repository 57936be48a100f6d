"""A capturing process's life: started from the environment ``capture`` sets, kept right across forks.

``python -m tl_aot capture`` runs its command with the start-up hook (:mod:`tl_aot.serving.startup`)
on ``PYTHONPATH`` and the record, the parts folder and the device profile in the environment;
:func:`install_from_env` turns them into a :class:`~tl_aot.capture.recorder.Capturer` that
records until the process exits. :func:`watch_forks` keeps it right in children: each starts
empty (the parent writes what it captured itself), and a multiprocessing child, which ends with
``os._exit`` and skips ``atexit``, flushes at its end.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager

from ..gpu.cuda_driver import emulating
from .device_code import arch_of_cc
from .record_parts import PARTS_ENV
from .recorder import Capturer

__all__ = ["install_from_env", "watch_forks"]

#: Contexts entered for the whole process (kept alive: a collected generator would undo them).
_held: list[AbstractContextManager[object]] = []


def _enter(ctx: AbstractContextManager[object]) -> None:
    ctx.__enter__()
    _held.append(ctx)


def install_from_env() -> Capturer | None:
    """In a process started by ``python -m tl_aot capture``: capture into ``$TL_AOT_CAPTURE`` until exit.

    With ``$TL_AOT_CAPTURE_DEVICE`` (a device profile) nothing is compiled (there may be no GPU):
    device queries answer as that GPU and each compile returns a stand-in. Each new request is
    then lowered by TileLang for that GPU's arch to record its device code digest (about the
    build's own lowering time per kernel; ``$TL_AOT_CAPTURE_LOWER=0`` skips it, and the build
    then has no digest to prove its device code against).
    """
    import atexit

    from ..jit.import_hooks import on_import

    path = os.environ.get("TL_AOT_CAPTURE")
    if not path:
        return None
    device = os.environ.get("TL_AOT_CAPTURE_DEVICE", "")
    cap = Capturer(path, compile_for_real=not device, parts=os.environ.get(PARTS_ENV) or None)
    # a tuning must run to be recorded: TileLang's own tuning cache would answer it unseen
    os.environ.setdefault("TILELANG_AUTO_TUNING_DISABLE_CACHE", "1")
    if device:
        from ..gpu.device import _emulate_tilelang, _emulate_torch, emulate_tilelang_nvcc, find_profile, traits_of

        profile = find_profile(device)
        _enter(emulating(profile.cc, traits_of(profile), profile.reported_name))
        if os.environ.get("TL_AOT_CAPTURE_LOWER", "1") != "0":
            cap.lower_arch = arch_of_cc(profile.cc)
        on_import("torch", lambda _m: _enter(_emulate_torch(profile)))
        on_import("tilelang.carver.arch.driver.cuda_driver", lambda _m: _enter(_emulate_tilelang(profile)))
        on_import("tilelang.contrib.nvcc", lambda m: _enter(emulate_tilelang_nvcc(profile, m)))
    cap.install()
    atexit.register(cap.at_exit)
    watch_forks(cap)
    return cap


def watch_forks(cap: Capturer) -> None:
    """Keep ``cap`` right in forked children: each starts empty, and a multiprocessing child flushes at its end."""
    from multiprocessing import util

    os.register_at_fork(after_in_child=cap.forked)
    util.register_after_fork(cap, _flush_at_child_end)


def _flush_at_child_end(cap: Capturer) -> None:
    """In a multiprocessing child (fork, forkserver): flush at its end, which is ``os._exit`` (no atexit) after its finalisers.

    Registered with ``multiprocessing.util.register_after_fork``, which runs once the child's
    finaliser registry has been cleared (a finaliser registered by :meth:`Capturer.forked` would be lost).
    """
    from multiprocessing import util

    util.Finalize(cap, Capturer.at_exit, args=(cap,), exitpriority=0)
