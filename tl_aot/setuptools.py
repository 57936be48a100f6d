"""``tl_aot.setuptools``: the setuptools front end at the path setup.py files import (it lives in ``frontends/``)."""

from .frontends.setuptools import *  # noqa: F403
from .frontends.setuptools import __all__  # noqa: F401
