"""A kernel's tied shared-memory aliases in either order are one kernel: the build proves it against the JIT's digest."""

import pytest

from tl_aot.capture.alias_order import TiedAliases, alias_orders, tied_aliases
from tl_aot.capture.device_code import check_against_record, digest
from tl_aot.common.errors import LoweringError

# TileLang 0.1.15's CUDA for two block-wide sums (trimmed): both workspaces at one offset, one name.
SOURCE = """extern "C" __global__ void __launch_bounds__(128, 1) main_kernel(float* __restrict__ Y) {
  extern __shared__ __align__(1024) uchar buf_dyn_shmem[];
  void* xs = ((void*)((char*)buf_dyn_shmem + 0));
  void* workspace = ((void*)((char*)buf_dyn_shmem + 2048));
  void* workspace_1 = ((void*)((char*)buf_dyn_shmem + 2048));
  float s[1];
  s[0] = tl::AllReduce<tl::SumOp, 128, 1, 0, tl::NamedBarrier<128>>::run(s[0], (&(((float*)workspace_1)[0])));
  s[0] = tl::AllReduce<tl::SumOp, 128, 1, 0, tl::NamedBarrier<128>>::run(s[0], (&(((float*)workspace)[0])));
  Y[0] = s[0] + ((float*)xs)[0];
}

extern "C" __global__ void __launch_bounds__(32, 1) other_kernel(float* __restrict__ workspace_1) {
  workspace_1[0] = 0.0f;
}
"""


def _uses(text: str) -> list[str]:
    return [line.split("(float*)")[1].split(")")[0] for line in text.splitlines() if "AllReduce" in line]


def test_the_tie_is_the_two_workspaces_at_one_offset_not_the_other_alias():
    assert tied_aliases(SOURCE) == (TiedAliases(("workspace", "workspace_1"), 3),)


def test_the_other_order_swaps_which_workspace_each_reduction_reads_and_nothing_else():
    mine, other = alias_orders(SOURCE)
    assert mine == SOURCE
    assert _uses(mine) == ["workspace_1", "workspace"]
    assert _uses(other) == ["workspace", "workspace_1"]
    changed = [(a, b) for a, b in zip(SOURCE.splitlines(), other.splitlines()) if a != b]
    assert len(changed) == 2 and all("AllReduce" in a for a, _ in changed)  # declarations and the next kernel as they were


def test_a_source_without_ties_has_one_order():
    plain = SOURCE.replace("+ 2048));\n  void* workspace_1", "+ 2048));\n  void* red_buf")
    assert tied_aliases(plain) == ()
    assert list(alias_orders(plain)) == [plain]


def test_orders_are_capped():
    many = SOURCE.replace(
        "  void* workspace_1 = ((void*)((char*)buf_dyn_shmem + 2048));\n",
        "".join(f"  void* workspace_{i} = ((void*)((char*)buf_dyn_shmem + 2048));\n" for i in range(1, 8)),
    )
    assert len(tied_aliases(many)[0].names) == 8
    assert len(list(alias_orders(many, limit=50))) == 50


def _item(sha: str) -> dict:
    return {"device_code": {"sm_90a": {"sha256": sha, "tilelang": "0.1.15", "from": "JIT"}}}


def test_the_build_ships_the_jits_spelling_when_it_recorded_the_other_order():
    jit = list(alias_orders(SOURCE))[1]
    proven = check_against_record(_item(digest(jit)), "sm_90a", SOURCE, "entry 'k'", tilelang_version="0.1.15")
    assert (proven.source, proven.sha256, proven.reordered) == (jit, digest(jit), True)
    same = check_against_record(_item(digest(SOURCE)), "sm_90a", SOURCE, "entry 'k'", tilelang_version="0.1.15")
    assert (same.source, same.reordered) == (SOURCE, False)


def test_another_kernel_is_still_refused_naming_the_orders_tried():
    other = SOURCE.replace("SumOp", "MaxOp")
    with pytest.raises(LoweringError, match=r"digest \w+ built, in each of the 2 orders of its tied shared-memory aliases, \w+ captured"):
        check_against_record(_item(digest(other)), "sm_90a", SOURCE, "entry 'k'", tilelang_version="0.1.15")
