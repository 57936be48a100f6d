from setuptools import Extension, setup

from tl_aot.frontends.setuptools import TileLangExtension, bdist_wheel, build_ext

setup(
    ext_modules=[
        TileLangExtension(
            "tl_demo._kernels",
            entries=[
                {"name": "add_one", "source": "kernels/add_one.py", "function": "add_one"},
                {"name": "scale", "source": "kernels/scale.py", "function": "scale", "args": {"N": 1024}},
            ],
            archs=["80"],
        ),
        Extension("tl_demo._native", ["src/native.c"]),
    ],
    cmdclass={"build_ext": build_ext, "bdist_wheel": bdist_wheel},
)
