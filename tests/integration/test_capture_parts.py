"""Many processes capturing into one record at once (real processes): every kernel once, nothing lost, nothing half-written."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tl_aot.capture.record import CaptureRecord
from tl_aot.capture.record_parts import ProcessReport, merge_parts, parts_dir, write_report

#: A writer process: sends its share of 40 kernels (overlapping the others'), one part per kernel,
#: the IR only with the first part of a kernel (as a capturing process does), then origins again.
WRITER = textwrap.dedent(
    """
    import random, sys
    from tl_aot.capture.record_parts import write_part
    me, folder = int(sys.argv[1]), sys.argv[2]
    keys = random.Random(me).sample(range(40), 25)
    seq = 0
    for k in keys:
        seq += 1
        item = {"ir": f"ir-{k}", "name": f"k{k}", "devices": [], "origins": [{"by": me}]}
        write_part(folder, {f"key{k:02d}": item}, {}, seq)
    for k in keys:
        seq += 1
        write_part(folder, {f"key{k:02d}": {"devices": [], "origins": [{"by": me, "again": True}]}}, {}, seq)
    """
)


def test_concurrent_writers_and_merges_lose_and_duplicate_nothing(tmp_path):
    record = tmp_path / "rec.json"
    folder = parts_dir(record)
    folder.mkdir()
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(i), str(folder)]) for i in range(6)]
    merges = 0
    while any(w.poll() is None for w in writers):  # merge while they write, as a second capture of the record would
        merge_parts(record)
        folder.mkdir(exist_ok=True)
        merges += 1
    assert all(w.wait() == 0 for w in writers)
    merge_parts(record)
    kernels = CaptureRecord.load(record).kernels
    import random

    wanted = {f"key{k:02d}": {i for i in range(6) if k in random.Random(i).sample(range(40), 25)} for k in range(40)}
    wanted = {k: v for k, v in wanted.items() if v}
    assert sorted(kernels) == sorted(wanted)
    for key, by in wanted.items():
        origins = kernels[key]["origins"]
        assert kernels[key]["ir"] == f"ir-{int(key[3:])}"
        assert sorted(json.dumps(o, sort_keys=True) for o in origins) == sorted(
            {json.dumps(o, sort_keys=True) for i in by for o in ({"by": i}, {"by": i, "again": True})}
        )  # each once
    assert not folder.exists() and merges >= 1


def test_a_merge_twice_adds_nothing_and_keeps_each_process_report(tmp_path):
    record = tmp_path / "rec.json"
    folder = parts_dir(record)
    from tl_aot.capture.record_parts import write_part

    write_part(folder, {"k": {"ir": "x", "devices": [], "origins": [{"a": 1}]}}, {}, 1)
    write_report(folder, ProcessReport(pid=7, requests=3, unrecorded=(("mod.fn(n=1)", "no header"),)), 2)
    first = merge_parts(record)
    assert (first.kernels, first.new, first.parts) == (1, 1, 1)
    assert first.reports[0].unrecorded == (("mod.fn(n=1)", "no header"),)
    write_part(folder, {"k": {"ir": "x", "devices": [], "origins": [{"a": 1}]}}, {}, 1)  # the same part again
    again = merge_parts(record)
    assert (again.kernels, again.new) == (1, 0)
    assert CaptureRecord.load(record).kernels["k"]["origins"] == [{"a": 1}]


#: A process that records in children of a fork pool (which end with os._exit, skipping atexit). The
#: children hold what they recorded unwritten (as a capture holds a known kernel's further origins) until they end.
FORKED = textwrap.dedent(
    """
    import multiprocessing as mp, os, sys
    from tl_aot.capture.process_hooks import watch_forks
    from tl_aot.capture.recorder import Capturer
    cap = Capturer(sys.argv[1], parts=sys.argv[2])
    watch_forks(cap)

    def work(i):
        cap.kernels[f"child{i}"] = {"ir": str(i), "devices": [], "origins": [{"pid": os.getpid()}]}
        return i

    if __name__ == "__main__":
        cap.kernels["parent"] = {"ir": "p", "devices": [], "origins": []}
        pool = mp.get_context("fork").Pool(2)
        assert pool.map(work, range(6)) == list(range(6))
        pool.close()
        pool.join()
        cap.at_exit()
    """
)


def test_kernels_recorded_in_forked_workers_reach_the_record(tmp_path):
    record = tmp_path / "rec.json"
    script = tmp_path / "forked.py"
    script.write_text(FORKED)
    folder = parts_dir(record)
    folder.mkdir()
    subprocess.run([sys.executable, str(script), str(record), str(folder)], check=True, timeout=120)
    result = merge_parts(record)
    assert sorted(CaptureRecord.load(record).kernels) == ["child0", "child1", "child2", "child3", "child4", "child5", "parent"]
    assert len(result.reports) == 3  # the parent and both pool workers reported
