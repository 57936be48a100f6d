"""Put on ``PYTHONPATH`` by ``python -m tl_aot capture`` / ``run --serve``: installs the hook, then the real sitecustomize."""

import importlib.util
import os
import sys


def _chain() -> None:
    """Run the sitecustomize this one shadows (the next on sys.path), if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if os.path.abspath(entry or ".") == here:
            continue
        candidate = os.path.join(entry or ".", "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_tl_aot_chained_sitecustomize", candidate)
            if spec is None or spec.loader is None:  # a .py file always has both
                continue
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


try:
    from tl_aot.serving.startup import install

    install()
finally:
    _chain()
