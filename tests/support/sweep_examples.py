"""Stand-in TileLang examples for ``bench/examples_sweep.py``: our own kernel, at two paths of the sweep's sample.

TileLang's examples are not part of this repository. A sweep test writes two short scripts where
a TileLang checkout keeps two of the sample's examples, each importing our ``add_one`` kernel
(``tests/kernels/elementwise.py``) as an example imports its own, and points the sweep at them.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from .helpers import KERNELS

__all__ = ["SAMPLE", "ONLY", "stand_in", "write_examples"]

#: The two example paths the stand-ins take, in the sample's order (under ``examples/``).
SAMPLE = ("elementwise/example_elementwise_add.py", "norm/rms_norm.py")

#: The sweep's arguments that select exactly those two.
ONLY = ("--only", "elementwise/", "--only", "norm/rms_norm")


def stand_in(body: str, *, imports: tuple[str, ...] = ()) -> str:
    """A script as TileLang's examples begin (``torch`` and ``tilelang`` imported, the kernel's module on the path), then ``body``.

    ``imports``: standard modules ``body`` needs besides ``sys``, imported first.
    """
    head = "".join(f"import {name}\n" for name in (*sorted(imports), "sys", "torch", "tilelang"))
    return f"{head}\nsys.path.insert(0, {str(KERNELS)!r})\nfrom elementwise import add_one\n\n{textwrap.dedent(body).lstrip()}"


def write_examples(checkout: Path, first: str, second: str) -> Path:
    """``first`` and ``second`` written at :data:`SAMPLE`'s paths under ``checkout/examples``.

    Returns ``checkout``: what the sweep's ``--examples`` takes.
    """
    for rel, text in zip(SAMPLE, (first, second)):
        path = checkout / "examples" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return checkout
