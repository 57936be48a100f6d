"""A capture record: the JSON file a capture writes and a build reads (kernels by request key, the autotuner's choices).

Several processes may capture into one record: each merges what it saw under a lock
(:meth:`tl_aot.capture.recorder.Capturer.flush`); a kernel's devices, origins and call keys accumulate, its
first device code digest per arch and its first tuning choice are kept, and its longest compile time
(``compile_s``, seconds, what a build orders its lowering by).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import SpecError
from ..common.fileutil import StrPath, atomic_write
from ..common.json_types import JsonMapping, JsonObject
from ..common.metadata import Tuning
from ..config.capture_ref import CapturedKernel, RecordChoices

__all__ = ["RECORD_SCHEMA", "CaptureRecord"]

RECORD_SCHEMA = 1


@dataclass
class CaptureRecord:
    """A capture record: kernels by key, each with its IR, options, devices and origins; and the autotuner's choices.

    ``tunings`` maps a tuning key (:func:`tl_aot.tune.runtime_choice.tuning_key`) to the choice TileLang's
    autotuner made in the captured run: the config, its index among the candidates, the request
    key of the chosen kernel (one of ``kernels``), the GPU and the latency measured.
    """

    path: Path
    kernels: dict[str, JsonObject]  # request key -> its item
    tunings: dict[str, JsonObject] = dataclasses.field(default_factory=dict)  # tuning key -> the choice

    @classmethod
    def load(cls, path: StrPath, *, missing_ok: bool = False) -> CaptureRecord:
        """Read a record; a missing file is empty with ``missing_ok``, else an error naming it."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            if missing_ok:
                return cls(path, {})
            msg = f"capture record {path} does not exist"
            raise SpecError(msg) from None
        except (OSError, ValueError) as e:
            msg = f"capture record {path} cannot be read: {e}"
            raise SpecError(msg) from None
        if not isinstance(data, dict) or data.get("schema") != RECORD_SCHEMA or not isinstance(data.get("kernels"), dict):
            msg = f"{path} is not a tl_aot capture record (schema {RECORD_SCHEMA})"
            raise SpecError(msg)
        tunings = data.get("tunings", {})
        return cls(path, data["kernels"], tunings if isinstance(tunings, dict) else {})

    def kernel(self, key: str) -> CapturedKernel | None:
        """The kernel recorded under ``key``, typed (None when the record does not hold it)."""
        item = self.kernels.get(key)
        return CapturedKernel.from_item(key, item) if isinstance(item, dict) else None

    def choices(self) -> RecordChoices:
        """The autotuner's choices and the call keys this record ships with the kernels a library holds."""
        tunings = tuple(_tuning(key, t) for key, t in sorted(self.tunings.items()) if isinstance(t, dict) and t.get("request_key"))
        calls = sorted({(str(c), key) for key, item in self.kernels.items() if isinstance(item, dict) for c in item.get("calls", ())})
        return RecordChoices(str(self.path), tunings, tuple(calls))

    def merge(self, other: Mapping[str, JsonObject], tunings: Mapping[str, JsonObject] | None = None) -> int:
        """Add ``other``'s kernels (key -> item); devices and origins of known keys are merged. Returns how many are new.

        ``tunings`` (tuning key -> choice) are added too; a tuning already recorded keeps its first choice
        (a record is reproducible: tuning again, with its timing noise, does not change what is served).
        """
        for key, item in (tunings or {}).items():
            self.tunings.setdefault(key, item)
        new = 0
        for key, item in other.items():
            have = self.kernels.get(key)
            if have is None:
                if "ir" not in item:
                    continue  # device code of a request this record does not hold
                self.kernels[key] = item
                new += 1
                continue
            for field in ("devices", "origins", "calls"):
                seen = {json.dumps(x, sort_keys=True) for x in have.get(field, [])}
                for x in item.get(field, []):
                    if json.dumps(x, sort_keys=True) not in seen and len(have.setdefault(field, [])) < 32:
                        have[field].append(x)
            for arch, code in (item.get("device_code") or {}).items():  # the first digest of an arch is kept
                have.setdefault("device_code", {}).setdefault(arch, code)
            if item.get("unfaithful") and not have.get("unfaithful"):
                have["unfaithful"] = item["unfaithful"]
            if "compile_s" in item:  # the longest compile seen: whichever order the parts merge in, the same record
                have["compile_s"] = max(have.get("compile_s", 0.0), item["compile_s"])
        return new

    def save(self) -> None:
        """Write the record atomically, kernels sorted by key (stable diffs)."""
        data: JsonObject = {"schema": RECORD_SCHEMA, "kernels": dict(sorted(self.kernels.items()))}
        if self.tunings:
            data["tunings"] = dict(sorted(self.tunings.items()))
        atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def _tuning(key: str, t: JsonMapping) -> Tuning:
    """A recorded tuning (the autotuner's choice) as the manifest ships it."""
    return Tuning(
        key=key,
        function=str(t.get("function", "")),
        args=str(t.get("args", "")),
        config=str(t.get("config", "")),
        index=int(t.get("index", -1)),
        candidates=int(t.get("candidates", 0)),
        request_key=str(t["request_key"]),
        cc=str(t.get("cc", "")),
        device=str(t.get("device", "")),
        latency_ms=float(t.get("latency_ms", 0.0)),
    )
