"""Capture records merge by key; the import hook runs when a module is imported."""

import sys
import types

import pytest

from tl_aot.capture import Record
from tl_aot.errors import SpecError
from tl_aot.hooks import on_import


def test_records_merge_by_key_keeping_every_device_and_origin(tmp_path):
    rec = Record.load(tmp_path / "r.json", missing_ok=True)
    a = {"k1": {"ir": "{}", "devices": [{"arch": "sm_90a"}], "origins": [{"file": "x.py"}]}}
    assert rec.merge(a) == 1
    assert rec.merge({"k1": {"ir": "{}", "devices": [{"arch": "sm_80"}], "origins": [{"file": "x.py"}]}}) == 0
    assert rec.merge({"k2": {"ir": "{}", "devices": [], "origins": []}}) == 1
    rec.save()
    again = Record.load(tmp_path / "r.json")
    assert sorted(again.kernels) == ["k1", "k2"]
    assert again.kernels["k1"]["devices"] == [{"arch": "sm_90a"}, {"arch": "sm_80"}]
    assert again.kernels["k1"]["origins"] == [{"file": "x.py"}]


@pytest.mark.parametrize("text", ["not json", "[]", '{"schema": 99, "kernels": {}}'])
def test_a_file_that_is_not_a_record_is_refused_by_name(tmp_path, text):
    (tmp_path / "bad.json").write_text(text)
    with pytest.raises(SpecError, match="bad.json"):
        Record.load(tmp_path / "bad.json")


def test_on_import_runs_now_or_when_the_module_is_imported(tmp_path, monkeypatch):
    seen = []
    on_import("json", lambda m: seen.append(m.__name__))
    assert seen == ["json"]
    (tmp_path / "tl_aot_hook_probe.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    on_import("tl_aot_hook_probe", lambda m: seen.append(m.VALUE))
    assert seen == ["json"]
    __import__("tl_aot_hook_probe")
    assert seen == ["json", 7]
    sys.modules.pop("tl_aot_hook_probe", None)
    assert isinstance(sys.modules["json"], types.ModuleType)


def test_flags_name_headers_by_content_wherever_the_package_lives(tmp_path):
    from tl_aot.options import portable_flags

    for root in (tmp_path / "a", tmp_path / "b"):
        (root / "inc" / "sub").mkdir(parents=True)
        (root / "inc" / "h.h").write_text("#define X 1\n")
        (root / "inc" / "sub" / "g.cuh").write_text("#define Y 1\n")
    a, b = tmp_path / "a", tmp_path / "b"

    def spelled(root):
        return portable_flags(["-include", f"{root}/inc/h.h", f"-I{root}/inc", "--include-path=" + str(root / "inc"), "-O3"])

    assert spelled(a) == spelled(b)
    assert spelled(a)[0] == "-include" and spelled(a)[1].startswith("h.h#") and spelled(a)[-1] == "-O3"
    assert spelled(a)[2].startswith("-Iinc/#") and spelled(a)[3].startswith("--include-path=inc/#")
    (b / "inc" / "sub" / "g.cuh").write_text("#define Y 2\n")  # a header under the -I folder changed
    assert spelled(a)[2] != spelled(b)[2] and spelled(a)[1] == spelled(b)[1]
    assert portable_flags(["-include", f"{a}/missing.h"]) == ["-include", "missing.h#missing"]
