"""Build tl_aot's sdist and wheel and check them as a release needs them; the release workflow runs this too.

    python tools/release_check.py [--tag vX.Y.Z] [--dist DIR] [--no-isolation]

Checks, each a one-line failure naming what is wrong:

* the tag (when given) is ``v`` + the package version, and CHANGELOG.md has a ``## [X.Y.Z]`` section;
* ``python -m build`` makes one sdist and one wheel of that version;
* ``twine check --strict`` passes on both (the README renders on PyPI);
* the wheel's metadata is complete: ``License-Expression: Apache-2.0`` and the license file,
  ``Requires-Python``, classifiers, project URLs, every extra of pyproject.toml;
* the wheel carries what the package finds at run time (CMake module, templates, C++ runtime).
"""

from __future__ import annotations

import argparse
import email.parser
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]

#: Files a wheel must carry (globs inside it): what tl_aot opens from its package at run or build time.
PACKAGE_DATA = (
    "tl_aot/cmake/TileLangAOTConfig.cmake",
    "tl_aot/codegen/templates/launcher.cc.j2",
    "tl_aot/include/tl_aot/launcher_runtime.h",
    "tl_aot/src/launch.cc",
    "tl_aot/py.typed",
)


def version() -> str:
    """The package version, read as setuptools reads it: the literal in tl_aot/common/versions.py."""
    text = (ROOT / "tl_aot" / "common" / "versions.py").read_text()
    return re.search(r'^__version__ = "([^"]+)"', text, re.M).group(1)


def fail(msg: str) -> None:
    print(f"release check: {msg}", file=sys.stderr)
    raise SystemExit(1)


def check_tag(tag: str, ver: str) -> None:
    if tag != f"v{ver}":
        fail(f"tag {tag} is not v{ver}, the version in tl_aot/common/versions.py")
    if f"## [{ver}]" not in (ROOT / "CHANGELOG.md").read_text():
        fail(f"CHANGELOG.md has no '## [{ver}]' section")


def build(dist: Path, isolation: bool) -> tuple[Path, Path]:
    cmd = [
        sys.executable,
        "-m",
        "build",
        "--sdist",
        "--wheel",
        "--outdir",
        str(dist),
        *([] if isolation else ["--no-isolation"]),
        str(ROOT),
    ]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    sdists, wheels = sorted(dist.glob("tl_aot-*.tar.gz")), sorted(dist.glob("tl_aot-*.whl"))
    if len(sdists) != 1 or len(wheels) != 1:
        fail(f"expected one sdist and one wheel in {dist}, found {[p.name for p in (*sdists, *wheels)]}")
    return sdists[0], wheels[0]


def check_wheel_metadata(wheel: Path, ver: str) -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(z.read(meta_name).decode())
    problems = []
    if meta["Version"] != ver:
        problems.append(f"Version {meta['Version']}, not {ver}")
    if meta["License-Expression"] != "Apache-2.0":
        problems.append(f"License-Expression is {meta['License-Expression']!r}, not 'Apache-2.0'")
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
        problems.append("the LICENSE file is not in the wheel")
    if not meta["Requires-Python"]:
        problems.append("no Requires-Python")
    if len(meta.get_all("Classifier") or []) < 5:
        problems.append("fewer than 5 classifiers")
    if not meta.get_all("Project-URL"):
        problems.append("no project URLs")
    extras = set(meta.get_all("Provides-Extra") or [])
    missing = set(pyproject["optional-dependencies"]) - extras
    if missing:
        problems.append(f"extras missing from the metadata: {sorted(missing)}")
    problems += [f"{f} is not in the wheel" for f in PACKAGE_DATA if f not in names]
    packages = sorted(str(i.parent.relative_to(ROOT)) for i in (ROOT / "tl_aot").rglob("__init__.py"))
    problems += [
        f"package {d} is not in the wheel (add it to [tool.setuptools] packages)" for d in packages if f"{d}/__init__.py" not in names
    ]
    if problems:
        fail(f"{wheel.name}: " + "; ".join(problems))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tag", help="the git tag being released (vX.Y.Z)")
    p.add_argument("--dist", help="where to write the sdist and the wheel (default: a temporary folder)")
    p.add_argument("--no-isolation", action="store_true", help="build in this environment (it needs setuptools>=77)")
    args = p.parse_args(argv)
    ver = version()
    if args.tag:
        check_tag(args.tag, ver)
    dist = Path(args.dist) if args.dist else Path(tempfile.mkdtemp(prefix="tl_aot-dist-"))
    sdist, wheel = build(dist, isolation=not args.no_isolation)
    subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)], check=True)
    check_wheel_metadata(wheel, ver)
    print(f"release check: {sdist.name} and {wheel.name} are ready (in {dist})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
