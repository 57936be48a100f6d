"""Split a wheel whose tl_aot libraries keep their images in packs into a base wheel and one wheel per arch.

``python -m tl_aot split-wheel dist/tl_demo-0.1.0-py3-none-manylinux_2_17_x86_64.whl`` writes:

* the base wheel (same name): everything but the packs (``*.tlpack``), its metadata offering each
  arch as an extra (``pip install 'tl-demo[sm90a]'``; ``[all]`` for every arch);
* ``tl_demo_sm90a-0.1.0-py3-none-manylinux_2_17_x86_64.whl`` per arch: that arch's packs, installed
  beside the library in the same package folder, requiring the base of the same version.

The names are those the library's missing-pack message gives (the setuptools front end with
``image_packs=True`` bakes ``pip install '<dist>-<tag>==<version>'`` into it). Like
``auditwheel repair``, it runs on a built wheel, whatever built it. A pack is put in the wheel of
the arch its own header names, so wheel and message cannot disagree.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

from ..common.errors import TlAotError
from ..common.fileutil import atomic_write
from ..pipeline.image_packs import PACK_SUFFIX, read_pack, wheel_tag

__all__ = ["SplitWheels", "WheelSplitError", "split_wheel"]

#: Zip entries get this fixed time, so the same inputs give byte-identical wheels.
_EPOCH = (1980, 1, 1, 0, 0, 0)


class WheelSplitError(TlAotError):
    """A wheel that cannot be split (no packs, not a wheel, a malformed name)."""


@dataclass(frozen=True)
class SplitWheels:
    """What :func:`split_wheel` wrote: the base wheel and each arch's wheel (tag -> path)."""

    base: Path
    archs: dict[str, Path]  # tag -> its wheel


_WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?-(?P<tags>[^-]+-[^-]+-[^-]+)\.whl$")


def split_wheel(wheel: str | Path, out_dir: str | Path | None = None) -> SplitWheels:
    """Split ``wheel`` into its base and per-arch wheels in ``out_dir`` (default: beside it, the base replaced)."""
    wheel = Path(wheel)
    m = _WHEEL_NAME.match(wheel.name)
    if not m:
        msg = f"{wheel.name} is not a wheel file name (name-version-python-abi-platform.whl)"
        raise WheelSplitError(msg)
    out = Path(out_dir) if out_dir else wheel.parent
    try:
        with zipfile.ZipFile(wheel) as z:
            members = {i.filename: z.read(i) for i in z.infolist() if not i.is_dir()}
    except (OSError, zipfile.BadZipFile) as e:
        msg = f"cannot read {wheel}: {e}"
        raise WheelSplitError(msg) from e
    info = f"{m['name']}-{m['version']}.dist-info"
    if f"{info}/METADATA" not in members:
        msg = f"{wheel.name} has no {info}/METADATA"
        raise WheelSplitError(msg)
    meta = Parser().parsestr(members[f"{info}/METADATA"].decode())
    dist, version = meta["Name"], meta["Version"]
    project = re.sub(r"[-_.]+", "-", dist).lower()
    by_tag: dict[str, dict[str, bytes]] = {}
    for path, data in members.items():
        if path.endswith(PACK_SUFFIX):
            by_tag.setdefault(wheel_tag(read_pack(data).label), {})[path] = data
    if not by_tag:
        msg = f"{wheel.name} holds no image packs (*{PACK_SUFFIX}); build its TileLang extensions with image_packs=True"
        raise WheelSplitError(msg)
    tags = sorted(by_tag)
    extras = "".join(f"Provides-Extra: {t}\n" for t in [*tags, "all"])
    requires = "".join(f'Requires-Dist: {project}-{t}=={version}; extra == "{t}" or extra == "all"\n' for t in tags)
    base = {p: d for p, d in members.items() if not p.endswith(PACK_SUFFIX) and p != f"{info}/RECORD"}
    base[f"{info}/METADATA"] = _with_headers(members[f"{info}/METADATA"].decode(), extras + requires).encode()
    out.mkdir(parents=True, exist_ok=True)
    base_path = out / wheel.name
    _write_wheel(base_path, base, info)
    written = {}
    for t in tags:
        name = f"{project}-{t}"
        stem = re.sub(r"[-_.]+", "_", name)
        arch_info = f"{stem}-{version}.dist-info"
        files = dict(by_tag[t])
        files[f"{arch_info}/METADATA"] = (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            f"Summary: The {t} kernel images of {dist} (tl_aot image packs)\nRequires-Dist: {project}=={version}\n"
        ).encode()
        files[f"{arch_info}/WHEEL"] = members.get(f"{info}/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
        wheel_path = out / f"{stem}-{version}-{m['tags']}.whl"
        _write_wheel(wheel_path, files, arch_info)
        written[t] = wheel_path
    return SplitWheels(base_path, written)


def _with_headers(metadata: str, headers: str) -> str:
    """``metadata`` with ``headers`` added after its header block (before a description body, if any)."""
    head, sep, body = metadata.partition("\n\n")
    return head.rstrip("\n") + "\n" + headers + (sep + body if sep else "\n")


def _write_wheel(path: Path, files: dict[str, bytes], info: str) -> None:
    """A wheel at ``path`` holding ``files`` (path -> bytes) and their RECORD, written atomically, entries in order."""
    record = [f"{p},sha256={_b64(hashlib.sha256(d).digest())},{len(d)}" for p, d in sorted(files.items())]
    record.append(f"{info}/RECORD,,")
    files = {**files, f"{info}/RECORD": ("\n".join(record) + "\n").encode()}
    tmp = path.with_name(f".{path.name}.part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for p in sorted(files, key=lambda p: (p.startswith(info), p)):  # dist-info last, as wheels have it
            zi = zipfile.ZipInfo(p, _EPOCH)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = (0o755 if p.endswith(".so") else 0o644) << 16
            z.writestr(zi, files[p])
    atomic_write(path, tmp.read_bytes())
    tmp.unlink()


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
