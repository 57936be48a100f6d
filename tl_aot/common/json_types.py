"""Names for JSON as tl_aot's files hold it: records, manifests, part files, tuning records.

A value read by :func:`json.loads` is typed only by what the file format promises, so these aliases
say which promise a signature relies on: a ``JsonObject`` is an object whose keys are strings and
whose values the reader checks as it goes (``Any``: each read names its own type).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["JsonObject", "JsonMapping"]

#: A JSON object as :func:`json.loads` returns it, or one being built to be dumped.
JsonObject = dict[str, Any]
#: A JSON object only read: a parameter that accepts any mapping of string keys.
JsonMapping = Mapping[str, Any]
