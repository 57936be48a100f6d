"""The cyclic collector held off while a library's index is made, and given back as it was."""

from __future__ import annotations

import gc

import pytest

from tl_aot.common.gc_pause import gc_paused


@pytest.fixture
def collector():
    """Whatever a test does to the collector, the next test finds it enabled with its thresholds."""
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    (gc.enable if enabled else gc.disable)()


def test_held_off_inside_and_running_again_after(collector):
    gc.enable()
    passes: list[int] = []
    gc.set_threshold(1)  # any allocation starts a pass while it runs
    gc.callbacks.append(record := lambda phase, info: passes.append(info["generation"]) if phase == "start" else None)
    try:
        with gc_paused():
            passes.clear()  # those started before (making the callback, entering): not the pause's
            assert not gc.isenabled()
            made = [{"k": [i, str(i)]} for i in range(2000)]
            during = list(passes)
        assert during == [], during
        assert gc.isenabled()
        [{"k": [i]} for i in range(100)]
        assert passes, "the collector runs again after"
    finally:
        gc.callbacks.remove(record)
    assert len(made) == 2000


def test_enabled_again_when_the_body_raises(collector):
    gc.enable()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("a damaged index")
    assert gc.isenabled()


def test_a_collector_the_user_turned_off_stays_off(collector):
    gc.disable()
    with gc_paused():
        with gc_paused():  # nested: the inner one gives back what it found, off
            pass
        assert not gc.isenabled()
    assert not gc.isenabled()
