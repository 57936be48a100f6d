"""One process per bad-input case against a library: what it raised, whether it launched, whether the process survived."""
import importlib.util, json, os, subprocess, sys
ROOT = os.getcwd()
LIB = sys.argv[1]
if len(sys.argv) > 2:
    case = sys.argv[2]
    sys.path.insert(0, ROOT)
    spec = importlib.util.spec_from_file_location("rel", os.path.join(ROOT, "tests/gpu/test_reliability_gpu.py"))
    rel = importlib.util.module_from_spec(spec); spec.loader.exec_module(rel)
    import re, torch, tl_aot
    lib = tl_aot.load(LIB)
    entry, build, exc, match = rel.CASES[case]
    if entry in rel.SM90_ONLY and not rel.is_sm90():
        print(json.dumps({"case": case, "skipped": True})); sys.exit(0)
    args = build()
    watched = [(a, a.clone()) for a in rel._outputs(args)]
    torch.cuda.synchronize()
    res = {"case": case}
    try:
        getattr(lib, entry)(*args)
        res["raised"] = None
    except Exception as e:
        res["raised"] = type(e).__name__; res["message"] = str(e).splitlines()[0][:160]
        res["expected_type"] = isinstance(e, exc); res["message_matches"] = bool(re.search(match, str(e)))
    try:
        torch.cuda.synchronize()
        res["untouched"] = all(torch.equal(a, b) for a, b in watched)
        rel.good_call(lib, entry); res["good_after"] = True
    except Exception as e:
        res["after_error"] = f"{type(e).__name__}: {str(e)[:160]}"
    print(json.dumps(res), flush=True)
    sys.exit(0)
sys.path.insert(0, ROOT)
spec = importlib.util.spec_from_file_location("rel", os.path.join(ROOT, "tests/gpu/test_reliability_gpu.py"))
rel = importlib.util.module_from_spec(spec); spec.loader.exec_module(rel)
only = [c for c in os.environ.get("ONLY", "").split(",") if c]
for case in (only or sorted(rel.CASES)):
    p = subprocess.run([sys.executable, __file__, LIB, case], capture_output=True, text=True, timeout=120)
    out = [l for l in p.stdout.splitlines() if l.startswith("{")]
    print(out[-1] if out else json.dumps({"case": case, "process_exit": p.returncode, "stderr": p.stderr[-300:]}), flush=True)
