"""Build-time reliability and safety, with real builds (CPU only: TileLang + nvcc, no GPU).

- Broken inputs (a Python syntax error, a kernel TileLang refuses, CUDA nvcc refuses, a bad nvcc
  flag, nvcc missing, an unknown arch): one clear error naming entry, arch and the user's file:line.
- A build killed with SIGKILL in the middle of nvcc, then run again: it completes with the right
  library, and no partial library or cache entry is ever visible, not even while it runs.
- Concurrent builds of one target end with one valid library.
- Reproducible: clean builds from different output and working folders are byte-identical, and
  no build-machine path (output folder, checkout, virtualenv) is inside the library.
- Safety: no subprocess through a shell; names reaching generated C++ are identifiers; the
  library opens no file at run time.

The reliability builds use small kernels (an elementwise add and a 256^3 GEMM) for sm_90a only.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.builds import with_runtime
from support.helpers import child_env, fails, ok, tl_aot_argv, tl_aot_cli
from support.tree import files, read

pytest.importorskip("tilelang")

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "tests" / "kernels"
BROKEN = KERNELS / "broken"
PKG = ROOT / "tl_aot"

SPEC = f"""
[library]
name = "rel"
archs = ["90a"]

[[entry]]
name = "add_one"
source = "{KERNELS / "elementwise.py"}"
function = "add_one"

[[entry]]
name = "gemm"
source = "{KERNELS / "gemm.py"}"
function = "matmul"
args = {{ M = 256, N = 256, K = 256 }}
"""

SPEC_SMALL = f"""
[library]
name = "small"
archs = ["90a"]

[[entry]]
name = "add_one"
source = "{KERNELS / "elementwise.py"}"
function = "add_one"
"""


def _env(**extra) -> dict:
    return child_env(checkout_first=True, **extra)


def tl_aot(*args, cwd: Path | None = None, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """``python -m tl_aot ARGS`` in a subprocess (an argument list, never a shell)."""
    return tl_aot_cli(*args, cwd=cwd, env=env or _env(), timeout=timeout)


def _write_spec(folder: Path, text: str, name: str = "lib.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cache_entries_complete(cache: Path) -> int:
    """Every visible cache entry is whole (its image matches its recorded digest); returns how many."""
    if not cache.is_dir():
        return 0
    n = 0
    for d in cache.iterdir():
        if d.name.startswith("."):
            continue  # a temporary folder: never read as an entry
        files = {p.name for p in d.iterdir()}
        assert files == {"image.bin", "image.sha256", "variant.json", "variant.sha256"}, f"partial cache entry {d}: {files}"
        assert hashlib.sha256((d / "image.bin").read_bytes()).hexdigest() == (d / "image.sha256").read_text().strip()
        json.loads((d / "variant.json").read_text())
        n += 1
    return n


def _out_is_clean(out: Path, lib: str) -> None:
    """The output folder holds the library, its header and the work folder: nothing half written."""
    names = {p.name for p in out.iterdir()}
    assert names <= {f"lib{lib}.so", f"{lib}.h", ".tl_aot"}, names


# ---------------------------------------------------------------------------------------------
# Broken inputs: each a clear error naming entry, arch and the user's file:line.
# ---------------------------------------------------------------------------------------------


SYNTAX_ERROR = """\
import tilelang.language as T


def add_one(N=1024):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] + 1.0

    return main
"""


def test_python_syntax_error(tmp_path, cache_dir):
    src = tmp_path / "syntax_error.py"  # written here: a checked-in file with a syntax error breaks linters
    src.write_text(SYNTAX_ERROR)
    err = fails(
        tl_aot("build", f"{src}:add_one", "--arch", "90a", "-o", tmp_path / "out", "--cache-dir", cache_dir),
        "entry 'add_one' (sm_90a)",
        "syntax_error.py:7",
        "SyntaxError",
    )
    assert "with T.Kernel" in err  # the offending line is quoted
    assert not (tmp_path / "out" / "libadd_one.so").exists()


def test_kernel_tilelang_refuses(tmp_path, cache_dir):
    err = fails(
        tl_aot("build", BROKEN / "tilelang_error.py:bad_gemm", "--arch", "90a", "-o", tmp_path, "--cache-dir", cache_dir),
        "entry 'bad_gemm' (sm_90a): TileLang failed to lower bad_gemm",
        "tilelang_error.py:14: T.gemm(A_shared, B_shared, C_local)",
        "K shape check failed",
    )
    assert "__tb" not in err, "TileLang's internal closure dump should not reach the user"


def test_cuda_nvcc_refuses(tmp_path, cache_dir):
    err = fails(
        tl_aot("build", BROKEN / "nvcc_error.py:broken", "--arch", "90a", "-o", tmp_path, "--cache-dir", cache_dir),
        "entry 'broken' (sm_90a): nvcc failed on the CUDA code TileLang generated from",
        "nvcc_error.py:13 (broken)",
        'error: expected a ";"',
        "generated source: ",
    )
    kept = Path(err.split("generated source: ")[1].split()[0])
    assert kept.is_file() and "broken_kernel" in kept.read_text()  # the source nvcc refused is kept to look at


def test_invalid_nvcc_flag_from_compile_flags(tmp_path, cache_dir):
    spec = _write_spec(tmp_path, SPEC_SMALL.replace('function = "add_one"', 'function = "add_one"\ncompile_flags = ["--no-such-flag"]'))
    fails(
        tl_aot("build", "--spec", spec, "-o", tmp_path / "out", "--cache-dir", cache_dir),
        "entry 'add_one' (sm_90a)",
        "elementwise.py:6 (add_one)",
        "Unknown option '--no-such-flag'",
        "compile_flags",
    )


def test_no_cuda_compiler_anywhere(tmp_path):
    """No nvcc on PATH, no CUDA_HOME and no pip-installed compiler (hidden here): one error naming the way out."""
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "nvcc").exists())
    env = {k: v for k, v in _env(PATH=path).items() if k not in ("CUDA_HOME", "CUDA_PATH", "TL_AOT_NVCC")}
    hide_pip = (
        "import sys, tl_aot.cuda.cuda_toolkit as c; c.pip_toolkits = list; "
        "from tl_aot.frontends.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    cmd = [sys.executable, "-c", hide_pip, "build", str(KERNELS / "elementwise.py:add_one"), "--arch", "90a", "-o", str(tmp_path)]
    fails(
        subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False),
        "library 'add_one' (entry add_one for sm_90a)",
        "no CUDA compiler was found",
        "TL_AOT_NVCC, CUDA_HOME/CUDA_PATH, nvcc on PATH",
        "pip install 'tl_aot[build]'",
    )


@pytest.mark.parametrize(
    "arch,needles",
    [
        ("sm_91x", ["entry 'add_one' (", "elementwise.py): --arch: unsupported arch name 'sm_91x'"]),
        ("60", ["entry 'add_one' (", "unsupported arch '60'", "sm_75 and newer"]),
        ("99", ["entry 'add_one' (sm_99) in tests/kernels/elementwise.py: nvcc", "cannot build sm_99", "sm_90"]),
    ],
)
def test_unsupported_arch(tmp_path, arch, needles):
    fails(tl_aot("build", KERNELS / "elementwise.py:add_one", "--arch", arch, "-o", tmp_path), *needles)


def test_unsupported_arch_from_the_environment(tmp_path):
    """A wrong TL_AOT_ARCHS is refused naming the entry, the variable and the arch."""
    proc = tl_aot("build", KERNELS / "elementwise.py:add_one", "-o", tmp_path, env=_env(TL_AOT_ARCHS="9z"))
    fails(proc, "entry 'add_one' (", "elementwise.py): TL_AOT_ARCHS: unsupported arch name '9z'")


def test_unsupported_arch_in_a_spec_file(tmp_path):
    spec = _write_spec(tmp_path, SPEC_SMALL.replace('archs = ["90a"]', 'archs = ["sm_9000"]'))
    fails(tl_aot("build", "--spec", spec, "-o", tmp_path / "out"), "lib.toml: [library]", "unsupported arch name 'sm_9000'", "'90a'")


# ---------------------------------------------------------------------------------------------
# Killed and concurrent builds, reproducibility.
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The library built cleanly once (its own cache, its own working folder)."""
    base = tmp_path_factory.mktemp("reference")
    spec = _write_spec(base, SPEC)
    cwd = base / "cwd_a"
    cwd.mkdir()
    ok(tl_aot("build", "--spec", spec, "-o", base / "out", "--cache-dir", base / "cache", "-j", "2", cwd=cwd))
    return base / "out"


def _strings(data: bytes, n: int = 6) -> set[str]:
    out, cur = set(), bytearray()
    for b in data:
        if 32 <= b < 127:
            cur.append(b)
        else:
            if len(cur) >= n:
                out.add(cur.decode())
            cur.clear()
    return out


def test_reproducible_from_other_folders(reference, tmp_path):
    """A second clean build elsewhere (other output folder, working folder and cache) is byte-identical."""
    spec = _write_spec(tmp_path / "spec", SPEC)
    cwd = tmp_path / "somewhere" / "else"
    cwd.mkdir(parents=True)
    out = tmp_path / "deeper" / "out"
    ok(tl_aot("build", "--spec", spec, "-o", out, "--cache-dir", tmp_path / "cache", "-j", "2", cwd=cwd))
    assert (out / "librel.so").read_bytes() == (reference / "librel.so").read_bytes()
    assert (out / "rel.h").read_text() == (reference / "rel.h").read_text()
    # ... because no build-machine path reaches the library: not the output, working or temp folder,
    # not the checkout, not the virtualenv (nvcc's line tables are mapped to tilelang/, cuda/include).
    data = (out / "librel.so").read_bytes()
    for path in {str(out), str(cwd), str(tmp_path), str(ROOT), sys.prefix, os.path.realpath(sys.prefix), "/tmp/"}:
        assert path.encode() not in data, f"{path} is embedded in the library"
    text = _strings(data)
    assert any(s.startswith("tilelang/") for s in text)  # the mapped line-table paths are there
    assert not [s for s in text if "site-packages" in s]


def test_library_reads_no_code_from_disk_at_run_time(reference):
    """Kernels are embedded: the library maps no file, loads no module by path and nothing but the driver (and what it links).

    ``fopen`` is the one file call linked: the runtime reads image packs beside a library built with
    ``--image-packs`` (``src/packs.cc``; tests/integration/test_arch_wheels.py), never for embedded images.
    """
    lib = reference / "librel.so"
    nm = subprocess.run(["nm", "-D", "--undefined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    syms = {line.split()[-1].split("@")[0] for line in nm.splitlines() if line.strip()}
    opened = {"fopen64", "open", "open64", "openat", "__open_2", "__open64_2", "mmap", "mmap64", "read", "cuModuleLoad"}
    assert not opened & syms, opened & syms
    dyn = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True).stdout
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn))
    for line in dyn.splitlines():
        if "RUNPATH" in line or "RPATH" in line:
            paths = line.split("[", 1)[1].rstrip("]").split(":")
            assert all(p.startswith("$ORIGIN") for p in paths), line  # never a build-machine folder
    libs = {s for s in _strings(lib.read_bytes(), 4) if re.fullmatch(r"lib[\w+.-]*\.so[\d.]*", s)}
    assert libs <= needed | {"libcuda.so.1", "libcuda.so", "librel.so"}, libs - needed  # dlopen: the driver only


def _descendants(root: int) -> list[tuple[int, str]]:
    """(pid, command name) of every process below ``root`` (tools run under tl_aot's reaper, in groups of their own)."""
    table = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
            except OSError:
                continue
            table[int(p.name)] = (int(stat[stat.rindex(")") + 2 :].split()[1]), stat[stat.index("(") + 1 : stat.rindex(")")])
    out, todo = [], [root]
    while todo:
        parent = todo.pop()
        for pid, (ppid, name) in table.items():
            if ppid == parent:
                out.append((pid, name))
                todo.append(pid)
    return out


def _compilers(root: int) -> list[int]:
    return [pid for pid, name in _descendants(root) if name in ("nvcc", "cicc", "ptxas", "cudafe++")]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] != "Z"


def test_sigkill_mid_nvcc_then_rebuild(reference, tmp_path, session_runtime):
    spec = _write_spec(tmp_path, SPEC)
    # The cache holds the launcher runtime's object (it depends on the toolchain alone): what is killed and made again
    # is the variants', not a runtime compile beside them that each build would pay for (~2.5 s of CPU, twice); a
    # build killed while it compiles the runtime is test_build_faults' test_a_killed_build_leaves_no_compiler_and_no_debris
    out, cache = tmp_path / "out", with_runtime(tmp_path / "cache", session_runtime)
    # -j 4: a lowering worker per variant and slots to spare, so each variant compiles on its own (a batch of
    # one) and the GEMM is still in nvcc once add_one is cached; at -j 2 both would share one nvcc batch.
    cmd = tl_aot_argv("build", "--spec", spec, "-o", out, "--cache-dir", cache, "-j", "4")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        killed_mid_nvcc = False
        while proc.poll() is None and time.monotonic() < deadline:
            # Invariants while it runs: no library yet, and only whole cache entries.
            assert not (out / "librel.so").exists()
            stored = _cache_entries_complete(cache)
            compilers = _compilers(proc.pid) if stored >= 1 else []
            if compilers:  # one variant cached, the GEMM in nvcc
                os.kill(proc.pid, signal.SIGKILL)
                killed_mid_nvcc = True
                break
            time.sleep(0.05)
        proc.wait(timeout=60)
        assert killed_mid_nvcc, f"the build ended before nvcc could be interrupted (exit {proc.returncode})"
        assert proc.returncode == -signal.SIGKILL
        end = time.monotonic() + 5
        while any(_alive(pid) for pid in compilers) and time.monotonic() < end:
            time.sleep(0.05)
        assert not [pid for pid in compilers if _alive(pid)], "the compilers outlived the killed build"
        # After the kill: still no library, only whole cache entries.
        assert not (out / "librel.so").exists()
        assert _cache_entries_complete(cache) >= 1
        _out_is_clean(out, "rel")

        # Run again while watching: the library appears once, whole; cache entries are always whole.
        rebuild = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = set()
        while rebuild.poll() is None:
            lib = out / "librel.so"
            if lib.exists():
                try:
                    seen.add(_sha(lib))
                except FileNotFoundError:
                    pass
            _cache_entries_complete(cache)
            time.sleep(0.02)
        stdout, stderr = rebuild.communicate()
        assert rebuild.returncode == 0, stderr
        assert "lower add_one" not in stdout  # the variant finished before the kill came from the cache
        final = _sha(out / "librel.so")
        assert seen <= {final}, "a partial library was visible during the rebuild"
        assert (out / "librel.so").read_bytes() == (reference / "librel.so").read_bytes()
        assert (out / "rel.h").read_text() == (reference / "rel.h").read_text()
        assert _cache_entries_complete(cache) == 2
        _out_is_clean(out, "rel")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the build, if an assertion stopped the test before the kill
        except ProcessLookupError:
            pass


def test_concurrent_builds_of_one_target(tmp_path):
    """Two builds of one library into one folder, and a third into another, sharing one fresh cache."""
    spec = _write_spec(tmp_path, SPEC_SMALL)
    cache = tmp_path / "cache"
    outs = [tmp_path / "a", tmp_path / "a", tmp_path / "b"]
    procs = [
        subprocess.Popen(
            tl_aot_argv("build", "--spec", spec, "-o", o, "--cache-dir", cache),
            cwd=ROOT,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for o in outs
    ]
    results = [p.communicate(timeout=600) + (p.returncode,) for p in procs]
    for _, stderr, rc in results:
        assert rc == 0, stderr
    # One of the two builds into "a" built it, the other found it up to date (or rebuilt it whole).
    assert any("up to date" in r[0] for r in results[:2]) or all("built " in r[0] for r in results[:2])
    assert (tmp_path / "a" / "libsmall.so").read_bytes() == (tmp_path / "b" / "libsmall.so").read_bytes()
    for o in ("a", "b"):
        _out_is_clean(tmp_path / o, "small")
    assert _cache_entries_complete(cache) == 1

    import tl_aot

    lib = tl_aot.load(tmp_path / "a" / "libsmall.so")
    assert [e.name for e in lib.manifest.entries] == ["add_one"]


def test_damaged_cache_entry_is_rebuilt_not_used(tmp_path):
    from support.elf_images import cubin

    from tl_aot.common.arch import parse_arch
    from tl_aot.common.metadata import LoweredVariant
    from tl_aot.pipeline.cache import VariantCache

    image = cubin("main_kernel")
    cache = VariantCache(tmp_path)
    cache.store("k1", LoweredVariant(entry="e", arch=parse_arch("sm_90a")), image)
    assert cache.load("k1") is not None
    (tmp_path / "k1" / "image.bin").write_bytes(image[:-8])  # torn by a crash before it reached the disk
    assert cache.load("k1") is None
    cache.store("k1", LoweredVariant(entry="e", arch=parse_arch("sm_90a")), image)  # the next build repairs it
    assert cache.load("k1")[1] == image
    assert [p.name for p in tmp_path.iterdir()] == ["k1"]
    (tmp_path / ".k1.stale").mkdir()
    os.utime(tmp_path / ".k1.stale", (0, 0))
    cache.store("k1", LoweredVariant(entry="e", arch=parse_arch("sm_90a")), image)
    assert not (tmp_path / ".k1.stale").exists()  # temporary folders of builds killed long ago are swept


# ---------------------------------------------------------------------------------------------
# Safety.
# ---------------------------------------------------------------------------------------------


def test_no_subprocess_runs_through_a_shell():
    offenders = []
    modules = files(PKG, "*.py", recursive=True, at_least=100)
    for path in modules:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            for kw in node.keywords:
                if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: shell={ast.unparse(kw.value)}")
            func = ast.unparse(node.func)
            if func in ("os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput", "commands.getoutput"):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {func}()")
    assert not offenders, f"{read(modules, 'modules')}:\n" + "\n".join(offenders)


@pytest.mark.parametrize("name", ["a-b", "x;system()", "class", "__x", "1abc", "", "a b", 'x"y', "x" * 121, "é"])
def test_names_reaching_cpp_must_be_identifiers(name):
    from tl_aot.common.errors import SpecError
    from tl_aot.spec import KernelSpec, LibrarySpec, check_identifier

    with pytest.raises(SpecError, match="not a valid identifier|reserved|more than the 120 a name may have"):
        check_identifier(name, "entry name")
    with pytest.raises(SpecError):
        KernelSpec.create(name=name, source="k.py", function="f", archs=["90a"])
    with pytest.raises(SpecError):
        LibrarySpec(name, (KernelSpec.create(name="ok", source="k.py", function="f", archs=["90a"]),))


def test_function_names_and_reserved_exports_are_refused():
    from tl_aot.common.errors import SpecError
    from tl_aot.spec import KernelSpec, LibrarySpec

    with pytest.raises(SpecError, match="function 'f;g' is not a Python function name"):
        KernelSpec.create(name="ok", source="k.py", function="f;g", archs=["90a"])
    with pytest.raises(SpecError, match="reserved by tl_aot"):
        LibrarySpec("lib", (KernelSpec.create(name="cleanup_module", source="k.py", function="f", archs=["90a"]),))


def test_bad_names_on_the_command_line_and_in_spec_files(tmp_path):
    fails(
        tl_aot("build", KERNELS / "elementwise.py:add_one", "--name", "x;system()", "--arch", "90a", "-o", tmp_path),
        "'x;system()' is not a valid identifier",
    )
    spec = _write_spec(tmp_path, SPEC_SMALL.replace('name = "add_one"', 'name = "class"'))
    fails(tl_aot("build", "--spec", spec, "-o", tmp_path / "out"), "entry #1", "'class' is reserved in Python")
    spec = _write_spec(tmp_path, SPEC_SMALL.replace('function = "add_one"', 'function = "add_one(); evil"'), "fn.toml")
    fails(tl_aot("build", "--spec", spec, "-o", tmp_path / "out"), "is not a Python function name")


def test_kernel_parameters_named_like_cpp_keywords_build(tmp_path, cache_dir):
    """TileLang accepts a tensor named ``delete``; so does tl_aot (TileLang's own CUDA spells it raw, which nvcc refuses)."""
    proc = tl_aot("build", KERNELS / "conformance" / "keyword_param.py:copy", "--arch", "90a", "-o", tmp_path, "--cache-dir", cache_dir)
    assert proc.returncode == 0, proc.stderr
    header = (tmp_path / "copy.h").read_text()
    assert "void copy(::tvm::ffi::TensorView X, ::tvm::ffi::TensorView delete_);" in header


def test_text_reaching_generated_cpp_is_escaped():
    """Paths and shape text land in comments and string literals: they can never end them."""
    import dataclasses

    from tl_aot.codegen.render import c_comment, c_string_body, render_header, render_launcher
    from tl_aot.common.metadata import Manifest
    from tl_aot.common.metadata_json import from_json

    golden = from_json(Manifest, (ROOT / "tests" / "unit" / "golden" / "manifest.json").read_text())
    evil = 'k.py\n#error injected\n"\\'
    e0 = dataclasses.replace(golden.entries[0], source=evil, args=(("s", "'a\\nb'"),))
    m = dataclasses.replace(golden, entries=(e0, *golden.entries[1:]))
    for text in (render_launcher(m, header_name="x.h"), render_header(m)):
        assert "\n#error injected" not in text
        assert 'k.py?#error injected?"/' in text
    assert c_string_body('T.Cast("int64", m)\\') == 'T.Cast(\\"int64\\", m)\\\\'
    assert c_string_body("a\n?") == "a\\012\\077"
    assert c_comment("x\\") == "x/"


# ---------------------------------------------------------------------------------------------
# Reproducible wheels (the setuptools front end, tests/packages/setuptools_wheel).
# ---------------------------------------------------------------------------------------------


def test_wheel_reproducible_with_source_date_epoch(tmp_path, cache_dir):
    """Two wheel builds of one package from different folders, with SOURCE_DATE_EPOCH: identical bytes.

    The package's plain C extension is compiled by setuptools, not tl_aot: CFLAGS maps its folder the
    usual way (-ffile-prefix-map). The tl_aot library needs nothing: it is reproducible by itself.
    """
    pkg = ROOT / "tests" / "packages" / "setuptools_wheel"
    if not (pkg / "setup.py").is_file() or not (PKG / "setuptools.py").is_file():
        pytest.skip("the setuptools scenario is not there")
    wheels = []
    for where in ("one", "two/deeper"):
        src = shutil.copytree(pkg, tmp_path / where / "pkg", ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "*.so"))
        env = _env(SOURCE_DATE_EPOCH="1700000000", TL_AOT_CACHE_DIR=str(cache_dir), CFLAGS=f"-ffile-prefix-map={src}=.")
        cmd = [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / where / "dist")]
        ok(subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, timeout=900, check=False))
        (wheel,) = (tmp_path / where / "dist").glob("*.whl")
        wheels.append(wheel)
    assert wheels[0].name == wheels[1].name
    assert wheels[0].read_bytes() == wheels[1].read_bytes()
