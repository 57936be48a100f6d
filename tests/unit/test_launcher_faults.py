"""Finding the entries whose generated launcher code fails (tl_aot/pipeline/launcher_faults.py), with a fake compiler: milliseconds."""

from __future__ import annotations

from tl_aot.common.errors import FailedProcessError
from tl_aot.pipeline.launcher_faults import ISSUES, LauncherCodeError, code_fault, compiler_errors, find_bad_code

N = 66  # a unit's worth of entries (tl_aot/codegen/launcher_units.py)
NAMES = [f"k{i}" for i in range(N)]


class FakeCompiler:
    """Fails a part holding any entry of ``bad`` alone, or all of one of ``pairs``; counts compiles and rounds."""

    def __init__(self, bad=(), pairs=(), broken=False):
        self.bad, self.pairs, self.broken = set(bad), [set(p) for p in pairs], broken
        self.compiles: list[tuple[int, ...]] = []
        self.rounds = 0

    def probe(self, members):
        self.compiles.append(members)
        if self.broken:
            return "lib.h:1:10: fatal error: cuda.h: No such file or directory"
        held = set(members)
        culprit = sorted(held & self.bad) or next((sorted(p) for p in self.pairs if p <= held), None)
        return f"lib.cc:{culprit[0] + 10}:5: error: 'x{culprit[0]}' was not declared in this scope" if culprit else None

    def each(self, jobs):
        self.rounds += 1
        return [job() for job in jobs]


def _find(compiler, *, exports=None, failing=None, ways=8):
    export_of = exports or list(range(N))
    groups = failing or [(tuple(range(N)), "lib.unit3.cc:1: error: unit")]
    return find_bad_code(export_of, groups, compiler.probe, compiler.each, names=NAMES, ways=ways)


def test_one_bad_entry_of_a_unit_is_found_in_two_rounds_of_few_compiles():
    c = FakeCompiler(bad={37})
    (bad,) = _find(c)
    assert bad.entries == ("k37",)
    assert bad.errors == ("lib.cc:47:5: error: 'x37' was not declared in this scope",)
    assert c.rounds == 2 and len(c.compiles) <= 2 * 8 + 1  # 8 parts of ~8 and no entry, then the bad part's ~8 entries one by one
    assert () in c.compiles[:9]  # the launcher of no entry compiles: the toolchain is not at fault
    assert max(len(m) for m in c.compiles) <= 9  # the unit itself is never compiled again


def test_several_bad_entries_are_each_named_in_library_order():
    c = FakeCompiler(bad={60, 3, 4})
    assert [b.entries for b in _find(c)] == [("k3",), ("k4",), ("k60",)]


def test_specialisations_of_one_export_stay_together_until_their_export_is_found_then_are_tried_alone():
    exports = [i // 3 for i in range(N)]  # 22 exports of three specialisations each
    c = FakeCompiler(bad={31})
    assert [b.entries for b in _find(c, exports=exports)] == [("k31",)]
    first_round = c.compiles[:8]
    assert all(len({exports[i] for i in m}) * 3 == len(m) for m in first_round)  # whole exports only


def test_entries_that_fail_only_together_are_blamed_together():
    c = FakeCompiler(pairs=[{10, 11}])
    (bad,) = _find(c, ways=2)
    assert {"k10", "k11"} <= set(bad.entries) and len(bad.entries) < N  # the smallest failing part found, not the unit
    assert bad.errors == ("lib.cc:20:5: error: 'x10' was not declared in this scope",)


def test_a_unit_whose_failure_no_part_reproduces_blames_nothing():
    """What failed is how the unit was cut (or the unit itself), not its entries: the build stops with the compiler's own error."""
    c = FakeCompiler()
    assert _find(c) == ()
    assert c.compiles[-1] == tuple(range(N))  # compiled whole, apart, before giving up


def test_a_toolchain_that_fails_even_without_entries_blames_no_entry():
    """A missing cuda.h fails every unit and every part: that is not the generated code's doing, and no entry is named."""
    c = FakeCompiler(broken=True)
    assert _find(c) == ()
    assert c.rounds == 1


def test_only_the_failing_units_entries_are_searched():
    c = FakeCompiler(bad={5, 50})
    found = _find(c, failing=[(tuple(range(40, 66)), "lib.unit2.cc:9: error: x")])
    assert [b.entries for b in found] == [("k50",)]
    assert all(min(m) >= 40 for m in c.compiles if m)  # besides the launcher of no entry


def test_compiler_errors_and_what_counts_as_the_codes_fault():
    out = "In file included from lib.cc:3:\nlib.h:7:1: error: expected ';'\n  7 | int x\n    | ^\nlib.cc:9:2: fatal error: stop\n"
    assert compiler_errors(out) == ("lib.h:7:1: error: expected ';'", "lib.cc:9:2: fatal error: stop")
    refused = FailedProcessError("compiling the launcher of lib", ["c++", "lib.cc"], 1, "", out)
    assert code_fault(refused) == out.strip()
    assert code_fault(FailedProcessError("compiling", ["c++"], -9, "", out)) is None  # killed: not the code
    assert code_fault(FailedProcessError("compiling (with the disk full at /tmp (3 KiB free))", ["c++"], 1, "", out)) is None
    assert code_fault(FailedProcessError("compiling", ["c++"], 1, "", "c++: internal compiler crash\n")) is None


def test_the_error_of_a_build_that_stops_names_each_entry_and_says_it_is_a_bug_to_report():
    c = FakeCompiler(bad={8})
    e = LauncherCodeError("ops", _find(c), ["ops.unit2.cc"])
    text = str(e)
    assert "the launcher of libops.so did not compile (ops.unit2.cc)" in text and ISSUES in text
    assert "entry 'k8':\n    lib.cc:18:5: error: 'x8' was not declared in this scope" in text
    assert e.entry == "k8" and e.entries == ("k8",)
