"""A kernel's same-named shared-memory aliases spelled another way are one kernel: the build proves it against the JIT's digest."""

import pytest

from tl_aot.capture.alias_order import MAX_ORDERS, alias_families, alias_orders, order_count
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

# Two reductions in one loop (tests/kernels/loop_reductions.py, trimmed): alive at once, so at two
# offsets, and which is where is the process's; a third workspace of a later reduction shares the first's offset.
PLACED = """extern "C" __global__ void __launch_bounds__(128, 1) main_kernel(float* __restrict__ Y) {
  extern __shared__ __align__(1024) uchar buf_dyn_shmem[];
  void* workspace = ((void*)((char*)buf_dyn_shmem + 0));
  void* workspace_1 = ((void*)((char*)buf_dyn_shmem + 0));
  void* red_buf = ((void*)((char*)buf_dyn_shmem + 256));
  void* workspace_2 = ((void*)((char*)buf_dyn_shmem + 512));
  void* xs = ((void*)((char*)buf_dyn_shmem + 1024));
  float total[1];
  float top[1];
  for (int t = 0; t < 4; ++t) {
    total[0] = tl::AllReduce<tl::SumOp, 128, 1, 0, tl::NamedBarrier<128>>::run(total[0], (&(((float*)workspace_2)[0])));
    top[0] = tl::AllReduce<tl::MaxOp, 128, 1, 0, tl::NamedBarrier<128>>::run(top[0], (&(((float*)workspace)[0])));
  }
  total[0] = tl::AllReduce<tl::SumOp, 128, 1, 0, tl::NamedBarrier<128>>::run(total[0], (&(((float*)workspace_1)[0])));
  Y[0] = total[0] / top[0] + ((float*)red_buf)[0] + ((float*)xs)[0];
}
"""


def _uses(text: str) -> list[str]:
    return [line.split("(float*)")[1].split(")")[0] for line in text.splitlines() if "AllReduce" in line]


def test_a_family_is_the_same_named_aliases_of_one_kernel_not_its_other_aliases():
    [family] = alias_families(SOURCE)
    assert (family.names, family.first_line, family.end_line) == (("workspace", "workspace_1"), 2, 5)
    assert all("+ 2048" in offset for offset in family.offsets)
    assert [f.names for f in alias_families(PLACED)] == [("workspace", "workspace_1", "workspace_2")]


def test_the_other_order_swaps_which_workspace_each_reduction_reads_and_nothing_else():
    mine, other = alias_orders(SOURCE)
    assert mine == SOURCE
    assert _uses(mine) == ["workspace_1", "workspace"]
    assert _uses(other) == ["workspace", "workspace_1"]
    changed = [(a, b) for a, b in zip(SOURCE.splitlines(), other.splitlines()) if a != b]
    assert len(changed) == 2 and all("AllReduce" in a for a, _ in changed)  # declarations and the next kernel as they were


def test_a_workspace_moved_to_another_offset_is_one_of_the_spellings():
    """TileOPs' gated DeltaNet bwd: the JIT placed the loop's two workspaces the other way round (offset 512 <-> 0)."""
    jit = PLACED.replace("workspace_2)[0]", "@").replace("workspace)[0]", "workspace_2)[0]").replace("@", "workspace)[0]")
    assert _uses(jit) == ["workspace", "workspace_2", "workspace_1"]
    spellings = list(alias_orders(PLACED))
    assert order_count(PLACED) == len(spellings) == len(set(spellings)) == 6
    assert spellings[0] == PLACED and jit in spellings
    for text in spellings:  # declarations, other aliases and code untouched; only the uses permuted
        assert text.replace("workspace_2", "w").replace("workspace_1", "w").replace("workspace", "w") == (
            PLACED.replace("workspace_2", "w").replace("workspace_1", "w").replace("workspace", "w")
        )
        assert sorted(_uses(text)) == sorted(_uses(PLACED))


def test_a_source_without_same_named_aliases_has_one_spelling():
    plain = SOURCE.replace("+ 2048));\n  void* workspace_1", "+ 2048));\n  void* red_buf")
    assert alias_families(plain) == ()
    assert list(alias_orders(plain)) == [plain] and order_count(plain) == 1


def test_spellings_are_capped():
    many = SOURCE.replace(
        "  void* workspace_1 = ((void*)((char*)buf_dyn_shmem + 2048));\n",
        "".join(f"  void* workspace_{i} = ((void*)((char*)buf_dyn_shmem + {2048 * i}));\n" for i in range(1, 8)),
    )
    assert [len(f.names) for f in alias_families(many)] == [8] and order_count(many) == MAX_ORDERS
    assert len(list(alias_orders(many, limit=50))) == 50


def _item(sha: str) -> dict:
    return {"device_code": {"sm_90a": {"sha256": sha, "tilelang": "0.1.15", "from": "JIT"}}}


def test_the_build_ships_the_jits_spelling_when_it_recorded_another():
    jit = list(alias_orders(SOURCE))[1]
    proven = check_against_record(_item(digest(jit)), "sm_90a", SOURCE, "entry 'k'", tilelang_version="0.1.15")
    assert (proven.source, proven.sha256, proven.reordered) == (jit, digest(jit), True)
    same = check_against_record(_item(digest(SOURCE)), "sm_90a", SOURCE, "entry 'k'", tilelang_version="0.1.15")
    assert (same.source, same.reordered) == (SOURCE, False)


def test_another_kernel_is_still_refused_naming_the_spellings_tried():
    other = SOURCE.replace("SumOp", "MaxOp")
    with pytest.raises(
        LoweringError, match=r"digest \w+ built, in each of the 2 spellings of its same-named shared-memory aliases, \w+ captured"
    ):
        check_against_record(_item(digest(other)), "sm_90a", SOURCE, "entry 'k'", tilelang_version="0.1.15")


def test_a_refusal_past_the_cap_says_how_many_spellings_were_left_untried(monkeypatch):
    monkeypatch.setattr("tl_aot.capture.alias_order.MAX_ORDERS", 50)
    many = PLACED.replace(
        "  void* xs =",
        "".join(f"  void* workspace_{i} = ((void*)((char*)buf_dyn_shmem + {512 * i}));\n" for i in range(3, 9)) + "  void* xs =",
    )
    assert order_count(many) == 362880  # 9 workspaces
    with pytest.raises(LoweringError, match=r"in the first 50 of the 362880 spellings of its same-named shared-memory aliases \(no more"):
        check_against_record(_item(digest("another kernel")), "sm_90a", many, "entry 'k'", tilelang_version="0.1.15")
