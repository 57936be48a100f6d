"""What a strict serving miss says: which kernel or tuning missed, why, and the command that adds it.

Apart from :mod:`.server` (which answers requests) because a miss's message is read by a person: the
nearest prebuilt kernels, an arch the library lacks, a GPU model it was not captured on, and the
incremental capture to run are its whole job.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from ..common.json_types import JsonObject
from ..gpu.cuda_driver import Gpu, current_gpu, gpu_name

if TYPE_CHECKING:
    from ..gpu.image_select import Image
    from ..jit.seam import CompileRequest, JitCall
    from ..runtime.loader import Library

__all__ = ["Held", "miss_message", "tuning_message"]


class Held(Protocol):
    """What the served libraries hold, as a miss's message reads it (a :class:`tl_aot.serving.server.Server`)."""

    libraries: list[Library]
    index: dict[str, tuple[Library, str, tuple[Image, ...]]]
    by_name: dict[str, list[tuple[Library, str]]]
    tunings: dict[str, tuple[Library, int]]


def tuning_message(server: Held, material: JsonObject, key: str, gpu: Gpu) -> str:
    """Why a tuning is not served: no GPU visible, or no library holds it (with the tunings of that function it holds)."""
    from ..tune.runtime_choice import describe

    what = f"TileLang's autotuner was asked to tune {describe(material)}"
    if not gpu:
        return f"tl_aot.serve: {what}; it cannot be served: no GPU is visible to this process ({gpu.why_none})"
    same = [t for lib in server.libraries for t in lib.tunings if t.function == material["function"]]
    if same:
        listing = "; ".join(f"{t.args[:80]} on sm_{t.cc}" for t in same[:3])
        hint = f"the libraries hold {len(same)} tuning(s) of that function, for other arguments, candidates or GPUs: {listing}"
    else:
        hint = f"no served library holds a tuning of that function ({len(server.tunings)} tunings loaded)"
    more = _capture_more(server.libraries, tuning=True)
    return f"tl_aot.serve: {what} on {gpu.sm} (tuning key {key}); {hint}{_other_model(server.libraries, gpu)}. {more}"


def miss_message(server: Held, req: CompileRequest, key: str, jit_call: JitCall | None = None) -> str:
    """Which kernel missed and why: no GPU visible, or the nearest prebuilt ones (same jit function, closest arguments first)."""
    from ..jit.request_origin import jit_origin, jit_text

    origin = jit_origin(jit_call)
    jit, args = origin.get("jit", ""), origin.get("args", {})
    what = jit_text(origin) if jit else f"prim_func {req.name!r}"
    gpu = current_gpu()
    if not gpu:
        held = "a library holds it" if key in server.index else "no library holds it either"
        return (
            f"tl_aot.serve: {what} (key {key}) cannot be served: no GPU is visible to this process ({gpu.why_none}); "
            f"served kernels run on an NVIDIA GPU ({held})"
        )
    head = f"tl_aot.serve: {what} (key {key}) is not in the served libraries for this GPU ({gpu.sm})"
    if key in server.index:
        lib, entry, images = server.index[key]
        archs = ", ".join(sorted(f"sm_{cc}" for cc, *_ in images))
        return (
            f"{head}; {entry} holds it for {archs} only ({lib.path}). Build the library for this GPU's arch too "
            f"(python -m tl_aot build --capture RECORD --arch sm_{gpu.cc}{'a' if int(gpu.cc) >= 90 else ''} ...)"
        )
    prebuilt = [lib.signature(name) for lib, name in server.by_name.get(jit, [])]  # parsed only now, for the message
    near = sorted(prebuilt, key=lambda e: -sum(1 for k, v in e.args if args.get(k) == v))
    if near:
        listing = "; ".join(f"{e.name} ({', '.join(f'{k}={v}' for k, v in e.args[:8])})" for e in near[:3])
        hint = f"nearest prebuilt: {listing}"
    else:
        hint = f"no prebuilt kernel comes from that function ({len(server.index)} kernels loaded)"
    return f"{head}; {hint}{_other_model(server.libraries, gpu)}. {_capture_more(server.libraries)}"


def _other_model(libraries: Iterable[Library], gpu: Gpu) -> str:
    """Where this GPU's model is none the libraries were captured on: that, as a clause of a miss's message ('' otherwise).

    A workload may choose its kernels by the GPU's model, not only its arch (a kernel it runs on an
    H200 only): a library captured on an H100 then lacks kernels an H200 asks for, with nothing
    wrong in the capture, the build or the keys. Old libraries (no ``captured_on``) say nothing.
    """
    captured = sorted({n for lib in libraries for n in lib.index.captured_on})
    model = gpu_name(gpu) if captured else ""
    if not model or model in captured:
        return ""
    return (
        f"; the served libraries were captured on {' and '.join(captured)}, and this GPU is an {model}: "
        "a workload that chooses its kernels by GPU model asks for other kernels on it"
    )


def _capture_more(libraries: Iterable[Library], *, tuning: bool = False) -> str:
    """What a user runs to add what the served libraries lack: an incremental capture on this GPU, then a build.

    ``tuning``: for a run-time tuning, which only a GPU can time (a ``--device`` capture stops at it).
    """
    from ..gpu.device import profile_reported_as

    paths = {lib.path for lib in libraries}
    folders = {p.parent for p in paths}
    served = str(next(iter(paths))) if len(paths) == 1 else str(next(iter(folders))) if len(folders) == 1 else "LIB"
    profile = "" if tuning else profile_reported_as([gpu_name()], None)
    cpu = f"; on a machine without this GPU, add --device {profile}" if profile else ""
    return (
        f"Capture {'a run that tunes it' if tuning else 'what they lack'} on this GPU: "
        f"python -m tl_aot capture --serve {served} -o NEW.json -- COMMAND "
        f"(what the libraries hold is served and recorded, only the rest compiled{cpu}), "
        "then python -m tl_aot build --capture NEW.json"
    )
