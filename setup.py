"""Packaging of tl_aot itself: ships the top-level cmake/ folder inside the package as tl_aot/cmake."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPy(build_py):
    """Copy ``cmake/*.cmake`` (and the ``*.cmake.in`` templates) into the built package so ``python -m tl_aot --cmake-dir`` finds it."""

    def run(self):
        super().run()
        dest = Path(self.build_lib) / "tl_aot" / "cmake"
        dest.mkdir(parents=True, exist_ok=True)
        for f in sorted([*(ROOT / "cmake").glob("*.cmake"), *(ROOT / "cmake").glob("*.cmake.in")]):
            shutil.copyfile(f, dest / f.name)


setup(cmdclass={"build_py": BuildPy})
