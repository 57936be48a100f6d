from setuptools import setup

from tl_aot.frontends.setuptools import TileLangExtension, bdist_wheel, build_ext

setup(
    ext_modules=[
        TileLangExtension(
            "tl_packs._kernels",
            entries=[
                {"name": "add_one", "source": "kernels/add_one.py", "function": "add_one"},
                # the same kernel under a second name: its images are stored once
                {"name": "add_one_again", "source": "kernels/add_one.py", "function": "add_one"},
                {"name": "scale", "source": "kernels/scale.py", "function": "scale", "args": {"N": 1024}},
            ],
            archs=["80", "90a"],
            image_packs=True,
        ),
    ],
    cmdclass={"build_ext": build_ext, "bdist_wheel": bdist_wheel},
)
