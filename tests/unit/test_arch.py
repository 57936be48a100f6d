import pytest

from tl_aot.common.arch import Arch, parse_arch, parse_arch_list
from tl_aot.common.errors import SpecError


@pytest.mark.parametrize("text", ["sm_90a", "90a", "9.0a", "SM_90A", "compute_90a"])
def test_spellings_of_one_arch(text):
    assert parse_arch(text) == Arch(9, 0, "a")
    assert parse_arch(text).sm == "sm_90a"


def test_ptx_fallback():
    a = parse_arch("80+PTX")
    assert (a.sm, a.ptx, str(a)) == ("sm_80", True, "sm_80+PTX")


def test_ptx_with_arch_specific_suffix_is_refused():
    with pytest.raises(SpecError, match="not forward compatible"):
        parse_arch("90a+PTX")


@pytest.mark.parametrize("bad", ["sm90x", "hopper", "", "sm_52", "7"])
def test_unsupported_names_say_what_is_accepted(bad):
    with pytest.raises(SpecError, match="sm_90a|sm_75"):
        parse_arch(bad)


def test_lists_from_env_style_strings_drop_duplicates():
    assert [a.sm for a in parse_arch_list("80;90a, 9.0a 89")] == ["sm_80", "sm_90a", "sm_89"]
    with pytest.raises(SpecError, match="no architecture"):
        parse_arch_list(";")
