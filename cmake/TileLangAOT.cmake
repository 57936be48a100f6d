#[=======================================================================[.rst:
TileLangAOT
-----------

Build TileLang kernels ahead of time into self-contained shared libraries (``lib<name>.so``
plus a C++ header ``<name>.h``) from CMake, and install them so other projects can
``find_package`` them.

Load it with ``find_package(TileLangAOT CONFIG REQUIRED)``; ``python -m tl_aot --cmake-dir``
prints the folder to put in ``TileLangAOT_DIR`` (scikit-build-core finds it on its own through
tl_aot's ``cmake.root`` entry point). CMake does not re-implement the build: every kernel is
one call of ``python -m tl_aot build``, the same pipeline as the command line and setuptools.
At run time the libraries need only libtvm_ffi and an NVIDIA driver.

Variables read
^^^^^^^^^^^^^^

``TL_AOT_PYTHON``
  The Python interpreter that runs ``python -m tl_aot build``; it must have tl_aot and
  TileLang (``pip install "tl_aot[build]"``). Default: ``Python_EXECUTABLE`` if the project
  found Python already, else ``find_package(Python COMPONENTS Interpreter)``.

``TL_AOT_ARCHS``
  Default archs of kernels that name no ``ARCHS`` (e.g. ``"80;90a"``). Also read from the
  environment at configure time, then ``CMAKE_CUDA_ARCHITECTURES``; with none of them tl_aot
  builds every default arch its nvcc supports (sm_80 and newer).

``TL_AOT_CACHE_DIR``
  Variant cache shared by all kernels (default: the ``TL_AOT_CACHE_DIR`` environment
  variable at build time, else ``<OUTPUT_DIRECTORY>/.tl_aot/cache``).

Arch spellings: ``80``, ``sm_80``, ``8.0``, ``90a``, ``80+PTX`` (adds a PTX fallback), and the
``CMAKE_CUDA_ARCHITECTURES`` forms ``80-real`` (= ``80``) and ``80-virtual`` (= ``80+PTX``).

Commands
^^^^^^^^

.. command:: add_tilelang_kernel

  Build a TileLang kernel into a shared library target::

    add_tilelang_kernel(<name>
                        SOURCE <file.py> FUNCTION <function> | SPEC <file.toml> | CAPTURE <record.json>...
                        [ENTRY <entry>]
                        [ARGS <NAME=VALUE>...]
                        [FACTORY_ARGS <NAME=VALUE>...]
                        [JIT_ARGS <NAME=VALUE>...]
                        [SELECT <key>]
                        [IMPORTS <module>...]
                        [ARCHS <arch>...]
                        [PASS_CONFIGS <KEY=VALUE>...]
                        [NVCC_FLAGS <flag>...]
                        [DEVICE <gpu>]
                        [OUT_IDX <index-or-name>...]
                        [BACKEND cuda|cutedsl]
                        [TUNE_FILE <record.json>]
                        [DEPENDS <file-or-target>...]
                        [OUTPUT_DIRECTORY <dir>]
                        [HEADER_DIRECTORY <dir>]
                        [CACHE_DIR <dir>]
                        [CACHE_URL <url>]
                        [CLUSTER <address>]
                        [JOBS <n>]
                        [JOB_POOL <pool>]
                        [EXCLUDE_FROM_ALL]
                        [TORCH_OPS]
                        [IMAGE_PACKS [PACK_HINT <text>]]
                        [KEEP_GOING]
                        [QUIET])

  ``<name>``
    The target, the library (``lib<name>.so``), the header (``<name>.h``) and the C++
    namespace ``tl_aot::<name>``. A C identifier.

    ``<name>`` is an ``IMPORTED SHARED GLOBAL`` library: link it with
    ``target_link_libraries(app PRIVATE <name>)``; it carries the header's include folder and
    links ``tvm_ffi::shared`` (tvm-ffi's own CMake package). The build step itself is the
    custom target ``<name>_tl_aot`` (``cmake --build . --target <name>_tl_aot``), which every
    target linking ``<name>`` depends on. Target properties ``TL_AOT_LIBRARY``,
    ``TL_AOT_HEADER`` and ``TL_AOT_BUILD_TARGET`` name the library, the header and that
    target.

  ``SOURCE``, ``FUNCTION``
    The kernel file (relative to ``CMAKE_CURRENT_SOURCE_DIR``) and the function in it: a
    factory returning a ``T.prim_func``, a ``@tilelang.jit`` function or a ``T.prim_func``.
    Both are required unless ``SPEC`` is given.

  ``SPEC``
    Instead of ``SOURCE``/``FUNCTION``: a TOML or JSON spec file listing several entries of
    one library (see ``python -m tl_aot build --spec``). ``ARCHS`` overrides its archs.

  ``CAPTURE``
    Instead of ``SOURCE``/``FUNCTION``: capture records (``python -m tl_aot capture``); every kernel
    they hold becomes an entry (variants that fail are left out and listed), for ``tl_aot.serve``.

  ``ENTRY``
    Name of the exported function when it should differ from ``<name>``.

  ``ARGS``
    Arguments of the call, each given to whichever level takes that name: ``FUNCTION`` itself,
    else the ``@tilelang.jit`` function it returns (a two-level factory's tile config). Values
    are Python literals (``M=4096``, ``dtype='bfloat16'``; a bare word such as
    ``dtype=bfloat16`` is a string) or expressions evaluated in the kernel module
    (``"dtype=torch.float16"``, ``"cfg=GemmConfig(block_m=128, stages=3)"``,
    ``"eps=float('inf')"``; quote items with spaces).

  ``FACTORY_ARGS``, ``JIT_ARGS``
    Arguments pinned to one level, for a name both ``FUNCTION`` and the ``@tilelang.jit``
    function it returns take: ``FACTORY_ARGS`` go to ``FUNCTION`` only, ``JIT_ARGS`` to the
    returned jit function only.

  ``SELECT``
    When ``FUNCTION`` gives several kernels (a tuple or dict of jit functions), the one to
    build: its index or key. One target per kernel.

  ``IMPORTS``
    Python modules imported before the kernel file (modules of the same package that fill a
    registry the factory reads), e.g. ``IMPORTS mypkg.ops``.

  ``ARCHS``
    Target archs (see the spellings above). Default: ``TL_AOT_ARCHS``, then
    ``CMAKE_CUDA_ARCHITECTURES``, then tl_aot's defaults.

  ``PASS_CONFIGS``, ``NVCC_FLAGS``
    Extra TileLang pass configs (``KEY=VALUE``) and extra nvcc flags for the kernel images.

  ``DEVICE``
    The GPU that device queries made while lowering describe (``driver.get_num_sms()`` of a
    persistent kernel, shared memory or L2 sizes), e.g. ``H100-PCIe``. Default per arch:
    ``A100-SXM`` (80), ``A10`` (86), ``L40S`` (89), ``H100-SXM`` (90a), ``B200`` (100a).

  ``TUNE_FILE``
    A tuning record (``python -m tl_aot tune`` on a GPU host) whose configs the build uses; with
    ``SPEC``, a ``<spec stem>.tune.json`` next to the spec file is used without it.

  ``OUT_IDX``
    The parameters (indices, negative from the end, or names) the entry allocates and returns,
    like ``@tilelang.jit(out_idx=...)``; ``none`` for none. Default: the kernel's own ``out_idx``
    or ``T.empty`` returns. The C++ function then returns ``tvm::ffi::Tensor`` (a ``std::tuple``
    of them for several); the overload taking every parameter writes the outputs in place.

  ``BACKEND``
    TileLang's code generator for the entry: ``cuda`` (CUDA C++ through nvcc) or ``cutedsl``
    (TileLang's CuTeDSL backend, compiled to a cubin by CuTeDSL at build time; needs
    ``pip install 'tl_aot[cutedsl]'``). Default: what the kernel file asks
    (``@tilelang.jit(target="cutedsl")``), else ``cuda``. With ``SPEC``, set ``backend`` per entry.

  Compiler launchers: with ``CMAKE_CUDA_COMPILER_LAUNCHER`` (else ``CMAKE_CXX_COMPILER_LAUNCHER``)
  set, e.g. ``-DCMAKE_CUDA_COMPILER_LAUNCHER=sccache``, tl_aot runs its nvcc and host compiles
  through it (``TL_AOT_COMPILER_LAUNCHER``). Many kernels in one project: give them one
  ``JOB_POOL`` (a Ninja pool) and ``JOBS``, so that pool × jobs stays within the machine.

  ``DEPENDS``
    More files or targets the build depends on. Not needed for the Python modules the kernel
    imports from its own folder or package: tl_aot lists those in a depfile.

  ``OUTPUT_DIRECTORY``
    Where ``lib<name>.so`` goes. Default: ``CMAKE_LIBRARY_OUTPUT_DIRECTORY`` if set, else
    ``CMAKE_CURRENT_BINARY_DIR``.

  ``HEADER_DIRECTORY``
    Where ``<name>.h`` goes (the target's include folder). Default:
    ``${CMAKE_CURRENT_BINARY_DIR}/tl_aot/include``.

  ``CACHE_DIR``
    Variant cache (default: ``TL_AOT_CACHE_DIR``).

  ``CACHE_URL``
    A variant cache shared between machines, an fsspec URL behind the local cache
    (``file:///shared/tl_aot``, ``s3://bucket/tl_aot``; needs ``tl_aot[cluster]``). Default: the
    ``TL_AOT_CACHE_URL`` environment variable at build time.

  ``CLUSTER``
    A Dask scheduler (``tcp://host:8786``, or a scheduler file) whose workers lower and compile
    the kernel's variants; the library is linked here, bit-identical to a local build (needs
    ``tl_aot[cluster]``). Default: the ``TL_AOT_CLUSTER`` environment variable at build time.

  ``JOBS``, ``JOB_POOL``
    Jobs at once inside this one build, lowering and nvcc sharing them (default: ``MAX_JOBS`` or the CPU count),
    and a Ninja job pool for the build step (lowering takes memory; a pool of depth 1 or 2
    bounds how many kernels lower at once).

  ``EXCLUDE_FROM_ALL``
    Build the kernel only when something that links it, or ``<name>_tl_aot``, is built.

  ``TORCH_OPS``
    Also build ``lib<name>_torch.so`` beside the library: the entries as native torch operators
    over the LibTorch Stable ABI (torch's headers are needed at build time, any torch >= 2.10 at
    run time; see ``register_torch_ops``). Default: the spec's ``[library] torch_ops``, else
    off, or the variable ``TL_AOT_TORCH_OPS``. The target property ``TL_AOT_TORCH_COMPANION``
    names it, and ``install_tilelang_kernels`` installs it beside the library.

  ``IMAGE_PACKS``
    Keep the kernel images beside the library instead of inside it: compressed, stored once by
    content, one ``lib<name>.<arch>.tlpack`` per arch (``python -m tl_aot build --image-packs``),
    each image read on its entry's first call. A wheel holding them splits into one wheel per
    arch (``python -m tl_aot split-wheel``), so a library too large for one wheel ships within
    PyPI's limits. The packs are byproducts of the build step, named in the target property
    ``TL_AOT_IMAGE_PACKS``, and ``install_tilelang_kernels`` installs them beside the library,
    where the runtime looks for them. The archs must be known at configure time (``ARCHS``,
    ``TL_AOT_ARCHS`` or ``CMAKE_CUDA_ARCHITECTURES``): each names a pack file.

  ``PACK_HINT``
    With ``IMAGE_PACKS``: what a user whose GPU needs an arch whose pack is not installed is
    told to run, ``{tag}`` standing for the arch (``"pip install 'mylib-{tag}==1.0'"``).
    Default: copy the pack beside the library.

  ``KEEP_GOING``
    Leave out the variants that fail to lower or compile (``python -m tl_aot build
    --keep-going``: e.g. a kernel over one arch's shared memory limit) instead of failing the
    build; what was left out is printed and recorded in the library (``inspect`` shows it).
    With ``IMAGE_PACKS``, an arch whose every variant was left out has no pack: it is not made
    nor installed (``install_tilelang_kernels`` installs the packs that exist), and a call on a
    GPU of that arch fails naming the arch and why its variant was left out. The packs are then not outputs Ninja knows, so a
    deleted one is made again by the next build that runs, not by a no-op ``ninja``.

  ``QUIET``
    Print errors only.

  The kernel is rebuilt when its file, a local module it imports, ``ARGS``, ``ARCHS`` or
  another option, or tl_aot's templates change, and when a configure sees another TileLang or
  tl_aot version; not otherwise. Several kernels build in parallel (``cmake --build . -j``), with the Ninja and
  Makefile generators.

  Example:

  .. code-block:: cmake

    find_package(TileLangAOT CONFIG REQUIRED)
    add_tilelang_kernel(gemm_fp16
      SOURCE kernels/gemm.py FUNCTION matmul
      ARGS M=4096 N=4096 K=4096
      ARCHS 80 90a)
    add_executable(app main.cc)
    target_link_libraries(app PRIVATE gemm_fp16)  # #include "gemm_fp16.h"

.. command:: install_tilelang_kernels

  Install kernel libraries and headers, optionally with a package config so another project
  can ``find_package`` them::

    install_tilelang_kernels(TARGETS <name>...
                             [EXPORT <package>]
                             [NAMESPACE <namespace>::]
                             [VERSION <version>]
                             [LIBRARY_DESTINATION <dir>]
                             [INCLUDE_DESTINATION <dir>]
                             [CMAKE_DESTINATION <dir>]
                             [COMPONENT <component>])

  ``TARGETS``
    Targets made by ``add_tilelang_kernel``: their libraries, headers, torch companions
    (``TORCH_OPS``) and image packs (``IMAGE_PACKS``, beside the library).

  ``EXPORT``
    Also install ``<package>Config.cmake``: ``find_package(<package> CONFIG)`` then defines
    ``<namespace><name>`` for each kernel (an imported shared library with its include folder,
    linking ``tvm_ffi::shared``). The downstream project needs apache-tvm-ffi (its Python
    package, or ``tvm_ffi_DIR``), not tl_aot or TileLang.

  ``NAMESPACE``
    Prefix of the exported target names (default ``<package>::``).

  ``VERSION``
    Also install ``<package>ConfigVersion.cmake`` (same-major-version compatibility).

  ``LIBRARY_DESTINATION``, ``INCLUDE_DESTINATION``, ``CMAKE_DESTINATION``
    Relative install folders; defaults ``CMAKE_INSTALL_LIBDIR``, ``CMAKE_INSTALL_INCLUDEDIR``
    and ``${CMAKE_INSTALL_LIBDIR}/cmake/<package>``. In a scikit-build-core wheel use the
    package folder (``LIBRARY_DESTINATION ${SKBUILD_PROJECT_NAME}``): the libraries find
    libtvm_ffi in the installed ``tvm_ffi`` package beside them.

  ``COMPONENT``
    Install component of every file.

  Example:

  .. code-block:: cmake

    install_tilelang_kernels(TARGETS gemm_fp16 EXPORT MyKernels NAMESPACE my::)
    # downstream: find_package(MyKernels CONFIG REQUIRED)
    #             target_link_libraries(app PRIVATE my::gemm_fp16)
#]=======================================================================]

include_guard(GLOBAL)
cmake_policy(PUSH)
# Functions record the policies of their definition: DEPFILE paths transformed for Ninja
# (CMP0116), whatever the including project's cmake_minimum_required says.
cmake_policy(VERSION 3.20...4.1)

include("${CMAKE_CURRENT_LIST_DIR}/TileLangAOTTvmFfi.cmake")
set(_TL_AOT_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")

# Asked of the interpreter once per configure: Python version, tl_aot version and folder,
# TileLang version (found without importing TileLang: an import takes seconds).
# cmake-format: off
set(_TL_AOT_PROBE [=[
import importlib.metadata as md, importlib.util as iu, sys
def version(dist):
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "unknown"
tl = iu.find_spec("tl_aot")
print(sys.version.split()[0])
print(version("tl_aot") if tl else "")
print(list(tl.submodule_search_locations)[0] if tl else "")
print(version("tilelang") if iu.find_spec("tilelang") else "")
print("end")
]=])
# cmake-format: on

#[=======================================================================[.rst:
.. command:: _tl_aot_init

  Private. Find the interpreter and check it has tl_aot and TileLang, then find tvm-ffi::

    _tl_aot_init(<out-error>)

  Runs once per configure; results are global properties (``_TL_AOT_PYTHON``,
  ``_TL_AOT_TEMPLATES``, ``_TL_AOT_VERSIONS``). ``<out-error>`` is empty on success, else a
  message saying what to install.
#]=======================================================================]
function(_tl_aot_init out_error)
  get_property(done GLOBAL PROPERTY _TL_AOT_INIT_ERROR SET)
  if(done)
    get_property(err GLOBAL PROPERTY _TL_AOT_INIT_ERROR)
    set(${out_error} "${err}" PARENT_SCOPE)
    return()
  endif()

  set(err "")
  if(TL_AOT_PYTHON)
    set(python "${TL_AOT_PYTHON}")
  elseif(Python_EXECUTABLE)
    set(python "${Python_EXECUTABLE}")
  else()
    find_package(Python COMPONENTS Interpreter QUIET)
    set(python "${Python_EXECUTABLE}")
  endif()

  if(NOT python)
    # cmake-format: off
    string(CONCAT err "no Python interpreter found: install Python 3.9+ with "
                      "`pip install \"tl_aot[build]\"`, or set TL_AOT_PYTHON to an interpreter "
                      "that has tl_aot and TileLang")
    # cmake-format: on
  else()
    execute_process(
      COMMAND "${python}" -c "${_TL_AOT_PROBE}"
      OUTPUT_VARIABLE out
      ERROR_VARIABLE stderr
      RESULT_VARIABLE rc
      OUTPUT_STRIP_TRAILING_WHITESPACE)
    string(REPLACE "\n" ";" out "${out}")
    list(LENGTH out n)
    if(NOT rc EQUAL 0 OR NOT n EQUAL 5)
      set(err "cannot run the Python interpreter ${python} (exit ${rc}): ${stderr}")
    else()
      list(GET out 0 py_version)
      list(GET out 1 tl_aot_version)
      list(GET out 2 tl_aot_dir)
      list(GET out 3 tilelang_version)
      if(NOT tl_aot_dir)
        # cmake-format: off
        string(CONCAT err "tl_aot is not installed in ${python} (Python ${py_version}): run "
                          "`${python} -m pip install \"tl_aot[build]\"`, or set TL_AOT_PYTHON to "
                          "an interpreter that has it")
        # cmake-format: on
      elseif(NOT tilelang_version)
        # cmake-format: off
        string(CONCAT err "TileLang is not installed in ${python} (Python ${py_version}); tl_aot "
                          "needs it to build kernels: run `${python} -m pip install "
                          "\"tl_aot[build]\"` (or `pip install \"tilelang>=0.1.12,<=0.1.15\"`), or set "
                          "TL_AOT_PYTHON")
        # cmake-format: on
      endif()
    endif()
  endif()

  if(NOT err)
    _tl_aot_find_tvm_ffi(err PYTHON "${python}" GLOBAL)
  endif()
  if(err)
    set_property(GLOBAL PROPERTY _TL_AOT_INIT_ERROR "${err}")
    set(${out_error} "${err}" PARENT_SCOPE)
    return()
  endif()

  file(GLOB templates "${tl_aot_dir}/codegen/templates/*.j2" "${tl_aot_dir}/include/tl_aot/*.h"
       "${tl_aot_dir}/include/tl_aot/runtime/*.h" "${tl_aot_dir}/src/*.cc")
  set_property(GLOBAL PROPERTY _TL_AOT_PYTHON "${python}")
  set_property(GLOBAL PROPERTY _TL_AOT_TEMPLATES "${templates}")
  set_property(
    GLOBAL PROPERTY _TL_AOT_VERSIONS
                    "Python ${py_version}, tl_aot ${tl_aot_version}, TileLang ${tilelang_version}")
  set_property(GLOBAL PROPERTY _TL_AOT_INIT_ERROR "")
  message(STATUS "TileLangAOT: ${python} (tl_aot ${tl_aot_version}, TileLang ${tilelang_version})")
  set(${out_error} "" PARENT_SCOPE)
endfunction()

# Write <file> only when its content changes, so a configure that changes nothing keeps its
# timestamp (it is a dependency of the build step: the Makefile generators do not notice a
# changed command line on their own).
function(_tl_aot_write_if_different file content)
  if(EXISTS "${file}")
    file(READ "${file}" old)
    if(old STREQUAL content)
      return()
    endif()
  endif()
  file(WRITE "${file}" "${content}")
endfunction()

# A library finds libtvm_ffi through its RUNPATH ($ORIGIN, or a tvm_ffi package beside it, the
# wheel layout), not through the RUNPATH of the program that loads it. In the build tree a
# symlink beside the libraries stands in for that: one rule per output folder, owned by one
# target, so parallel kernel builds never race on it. Installed libraries are left as built.
function(_tl_aot_link_tvm_ffi_beside out_dir build_target)
  get_target_property(tvm_ffi_lib tvm_ffi::shared IMPORTED_LOCATION)
  get_filename_component(tvm_ffi_name "${tvm_ffi_lib}" NAME)
  get_filename_component(tvm_ffi_dir "${tvm_ffi_lib}" DIRECTORY)
  if(NOT tvm_ffi_lib OR tvm_ffi_dir STREQUAL out_dir)
    return()
  endif()
  string(MD5 key "${out_dir}")
  string(SUBSTRING "${key}" 0 12 key)
  set(link_target _tl_aot_tvm_ffi_${key})
  if(NOT TARGET ${link_target})
    add_custom_command(
      OUTPUT "${out_dir}/${tvm_ffi_name}"
      COMMAND "${CMAKE_COMMAND}" -E create_symlink "${tvm_ffi_lib}" "${out_dir}/${tvm_ffi_name}"
      DEPENDS "${tvm_ffi_lib}"
      COMMENT "Linking ${tvm_ffi_name} beside the TileLang kernels in ${out_dir}"
      VERBATIM)
    add_custom_target(${link_target} DEPENDS "${out_dir}/${tvm_ffi_name}")
  endif()
  add_dependencies(${build_target} ${link_target})
endfunction()

#[=======================================================================[.rst:
.. command:: _tl_aot_configure

  Private. Ask tl_aot (``python -m tl_aot.frontends.cmake_configure``) to check the target name and the
  entry the build arguments declare, and to choose the archs from ``ARCHS``, ``TL_AOT_ARCHS``
  (the variable, then the environment) and ``CMAKE_CUDA_ARCHITECTURES``: CMake passes its raw
  values and decides nothing itself. Sets ``<out-archs>`` (``80;90a``; empty: tl_aot's default
  archs), ``<out-display>`` (``sm_80, sm_90a``) and ``<out-packs>`` (with ``--image-packs`` among the
  build arguments, the pack files: ``libgemm.sm_80.tlpack;libgemm.sm_90a.tlpack``); stops the
  configure with tl_aot's message::

    _tl_aot_configure(<python> <name> <ARCHS> <out-archs> <out-display> <out-packs> <build-argument>...)
#]=======================================================================]
function(_tl_aot_configure python name archs_arg out_archs out_display out_packs)
  list(JOIN archs_arg " " archs_arg)
  list(JOIN TL_AOT_ARCHS " " archs_var)
  list(JOIN CMAKE_CUDA_ARCHITECTURES " " cuda_archs)
  set(explicit "")
  if(archs_arg)
    set(explicit "--archs=${archs_arg}")
  endif()
  execute_process(
    COMMAND "${python}" -m tl_aot.frontends.cmake_configure --target "${name}" ${explicit}
            "--archs-variable=${archs_var}" "--cuda-architectures=${cuda_archs}" -- ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(STRIP "${err}" err)
    message(FATAL_ERROR "add_tilelang_kernel(): ${err}")
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  list(POP_FRONT lines archs display packs)
  string(REPLACE " " ";" archs "${archs}")
  string(REPLACE " " ";" packs "${packs}")
  foreach(note IN LISTS lines)
    if(note)
      message(STATUS "${note}")
    endif()
  endforeach()
  set(${out_archs} "${archs}" PARENT_SCOPE)
  set(${out_display} "${display}" PARENT_SCOPE)
  set(${out_packs} "${packs}" PARENT_SCOPE)
endfunction()

function(add_tilelang_kernel)
  if(ARGC EQUAL 0 OR ARGV0 MATCHES "^(SOURCE|FUNCTION|SPEC|ARGS|ARCHS)$")
    message(FATAL_ERROR "add_tilelang_kernel(): the first argument must be the target name, "
                        "e.g. add_tilelang_kernel(gemm SOURCE gemm.py FUNCTION matmul)")
  endif()
  set(name "${ARGV0}")
  # cmake-format: off
  cmake_parse_arguments(PARSE_ARGV 1 ARG
    # options
    "EXCLUDE_FROM_ALL;QUIET;TORCH_OPS;IMAGE_PACKS;KEEP_GOING"
    # one-value keywords
    "SOURCE;FUNCTION;SPEC;ENTRY;DEVICE;TUNE_FILE;OUTPUT_DIRECTORY;HEADER_DIRECTORY;CACHE_DIR;CACHE_URL;CLUSTER;JOBS;JOB_POOL;SELECT;BACKEND;PACK_HINT"
    # multi-value keywords
    "ARGS;FACTORY_ARGS;JIT_ARGS;IMPORTS;CAPTURE;ARCHS;PASS_CONFIGS;NVCC_FLAGS;OUT_IDX;DEPENDS")
  # cmake-format: on

  # --- Check the call ------------------------------------------------------------------------
  if(ARG_UNPARSED_ARGUMENTS)
    list(JOIN ARG_UNPARSED_ARGUMENTS " " unknown)
    message(FATAL_ERROR "add_tilelang_kernel(): unknown argument(s) '${unknown}' (target ${name})")
  endif()
  # A misspelt keyword after a list keyword (ARCHS 90a ARG M=1) is read as one of its values: name it.
  set(keywords
      EXCLUDE_FROM_ALL
      QUIET
      TORCH_OPS
      IMAGE_PACKS
      PACK_HINT
      KEEP_GOING
      SOURCE
      FUNCTION
      SPEC
      ENTRY
      DEVICE
      TUNE_FILE
      OUTPUT_DIRECTORY
      HEADER_DIRECTORY
      CACHE_DIR
      CACHE_URL
      CLUSTER
      JOBS
      JOB_POOL
      SELECT
      BACKEND
      ARGS
      FACTORY_ARGS
      JIT_ARGS
      IMPORTS
      CAPTURE
      ARCHS
      PASS_CONFIGS
      NVCC_FLAGS
      OUT_IDX
      DEPENDS)
  foreach(list_kw IN ITEMS ARCHS ARGS FACTORY_ARGS JIT_ARGS PASS_CONFIGS)
    foreach(value IN LISTS ARG_${list_kw})
      if(value MATCHES "^[A-Z][A-Z_]+$" AND NOT value MATCHES "=")
        set(hint "")
        foreach(candidate IN ITEMS "${value}S" "${value}_ARGS")
          if(candidate IN_LIST keywords)
            set(hint "; did you mean ${candidate}?")
            break()
          endif()
        endforeach()
        message(
          FATAL_ERROR "add_tilelang_kernel(): unknown keyword '${value}' (target ${name}): it "
                      "follows ${list_kw}, so it was read as one of its values${hint}")
      endif()
    endforeach()
  endforeach()
  foreach(
    kw IN
    ITEMS SOURCE
          FUNCTION
          SPEC
          ENTRY
          OUTPUT_DIRECTORY
          HEADER_DIRECTORY
          CACHE_DIR
          CACHE_URL
          CLUSTER
          JOBS
          JOB_POOL
          SELECT
          BACKEND
          PACK_HINT)
    if(kw IN_LIST ARG_KEYWORDS_MISSING_VALUES)
      message(FATAL_ERROR "add_tilelang_kernel(): '${kw}' needs a value (target ${name})")
    endif()
  endforeach()
  if("ARCHS" IN_LIST ARGN AND NOT ARG_ARCHS)
    message(
      FATAL_ERROR
        "add_tilelang_kernel(): 'ARCHS' is empty (target ${name}): name the archs, "
        "e.g. ARCHS 80 90a, or leave ARCHS out to use TL_AOT_ARCHS or " "CMAKE_CUDA_ARCHITECTURES")
  endif()
  foreach(t IN ITEMS "${name}" "${name}_tl_aot")
    if(TARGET "${t}")
      message(FATAL_ERROR "add_tilelang_kernel(): a target named '${t}' already exists")
    endif()
  endforeach()
  if(DEFINED ARG_PACK_HINT AND NOT ARG_IMAGE_PACKS)
    message(FATAL_ERROR "add_tilelang_kernel(): 'PACK_HINT' needs 'IMAGE_PACKS' (target ${name})")
  endif()
  if(ARG_CAPTURE AND ARG_SPEC)
    message(FATAL_ERROR "add_tilelang_kernel(): 'CAPTURE' cannot be combined with 'SPEC': "
                        "list the records in the spec's [library] capture (target ${name})")
  endif()
  set(capture_files "")
  if(ARG_SPEC OR ARG_CAPTURE)
    set(what SPEC)
    if(ARG_CAPTURE)
      set(what CAPTURE)
    endif()
    foreach(kw IN ITEMS SOURCE FUNCTION ENTRY ARGS FACTORY_ARGS JIT_ARGS SELECT IMPORTS
                        PASS_CONFIGS NVCC_FLAGS OUT_IDX BACKEND)
      if(ARG_${kw})
        message(FATAL_ERROR "add_tilelang_kernel(): '${what}' cannot be combined with '${kw}': "
                            "the ${what} file lists each entry's settings (target ${name})")
      endif()
    endforeach()
    if(ARG_CAPTURE)
      foreach(f IN LISTS ARG_CAPTURE)
        get_filename_component(f "${f}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
        list(APPEND capture_files "${f}")
      endforeach()
      list(GET capture_files 0 main_file)
    else()
      set(main_file "${ARG_SPEC}")
    endif()
  else()
    if(NOT ARG_SOURCE)
      message(FATAL_ERROR "add_tilelang_kernel(): 'SOURCE' is required")
    endif()
    if(NOT ARG_FUNCTION)
      message(FATAL_ERROR "add_tilelang_kernel(): 'FUNCTION' is required")
    endif()
    set(main_file "${ARG_SOURCE}")
  endif()
  get_filename_component(main_file "${main_file}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${main_file}" OR IS_DIRECTORY "${main_file}")
    message(FATAL_ERROR "add_tilelang_kernel(): '${main_file}' does not exist (target ${name})")
  endif()
  if(DEFINED ARG_JOBS AND NOT ARG_JOBS MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "add_tilelang_kernel(): JOBS must be a positive integer, got '${ARG_JOBS}'")
  endif()

  _tl_aot_init(err)
  if(err)
    message(FATAL_ERROR "add_tilelang_kernel(): ${err}")
  endif()
  get_property(python GLOBAL PROPERTY _TL_AOT_PYTHON)
  get_property(templates GLOBAL PROPERTY _TL_AOT_TEMPLATES)
  get_property(versions GLOBAL PROPERTY _TL_AOT_VERSIONS)

  # --- Paths -------------------------------------------------------------------------------
  if(ARG_OUTPUT_DIRECTORY)
    set(out_dir "${ARG_OUTPUT_DIRECTORY}")
  elseif(CMAKE_LIBRARY_OUTPUT_DIRECTORY)
    set(out_dir "${CMAKE_LIBRARY_OUTPUT_DIRECTORY}")
  else()
    set(out_dir "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
  get_filename_component(out_dir "${out_dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  if(ARG_HEADER_DIRECTORY)
    get_filename_component(header_dir "${ARG_HEADER_DIRECTORY}" ABSOLUTE BASE_DIR
                           "${CMAKE_CURRENT_BINARY_DIR}")
  else()
    set(header_dir "${CMAKE_CURRENT_BINARY_DIR}/tl_aot/include")
  endif()
  set(work_dir "${CMAKE_CURRENT_BINARY_DIR}/tl_aot/${name}")
  set(library "${out_dir}/lib${name}.so")
  set(header "${header_dir}/${name}.h")
  set(depfile "${work_dir}/${name}.d")
  set(options_file "${work_dir}/${name}.options")
  set(cache_dir "${ARG_CACHE_DIR}")
  if(NOT cache_dir AND TL_AOT_CACHE_DIR)
    set(cache_dir "${TL_AOT_CACHE_DIR}")
  endif()
  # The imported target's include folder must exist when CMake generates.
  file(MAKE_DIRECTORY "${out_dir}" "${header_dir}" "${work_dir}")

  # --- The command: one call of the tl_aot CLI ---------------------------------------------
  # First what declares the entry; tl_aot checks it (and the target name) and chooses the archs.
  set(cmd "")
  if(ARG_CAPTURE)
    foreach(f IN LISTS capture_files)
      list(APPEND cmd --capture "${f}")
    endforeach()
  elseif(ARG_SPEC)
    list(APPEND cmd --spec "${main_file}")
  else()
    list(APPEND cmd "${main_file}:${ARG_FUNCTION}")
    if(ARG_ENTRY)
      list(APPEND cmd --entry "${ARG_ENTRY}")
    endif()
  endif()
  list(APPEND cmd --name "${name}")
  foreach(a IN LISTS ARG_ARGS)
    list(APPEND cmd --arg "${a}")
  endforeach()
  foreach(a IN LISTS ARG_FACTORY_ARGS)
    list(APPEND cmd --factory-arg "${a}")
  endforeach()
  foreach(a IN LISTS ARG_JIT_ARGS)
    list(APPEND cmd --jit-arg "${a}")
  endforeach()
  if(ARG_SELECT OR ARG_SELECT STREQUAL "0")
    list(APPEND cmd --select "${ARG_SELECT}")
  endif()
  foreach(a IN LISTS ARG_IMPORTS)
    list(APPEND cmd --import "${a}")
  endforeach()
  foreach(a IN LISTS ARG_PASS_CONFIGS)
    list(APPEND cmd --pass-config "${a}")
  endforeach()
  foreach(a IN LISTS ARG_NVCC_FLAGS)
    list(APPEND cmd "--nvcc-flag=${a}")
  endforeach()
  if(ARG_DEVICE)
    list(APPEND cmd --device "${ARG_DEVICE}")
  endif()
  foreach(a IN LISTS ARG_OUT_IDX)
    list(APPEND cmd "--out-idx=${a}")
  endforeach()
  if(ARG_BACKEND)
    list(APPEND cmd --backend "${ARG_BACKEND}")
  endif()
  if(ARG_IMAGE_PACKS)
    list(APPEND cmd --image-packs)
    if(ARG_PACK_HINT)
      list(APPEND cmd --pack-hint "${ARG_PACK_HINT}")
    endif()
  endif()
  _tl_aot_configure("${python}" ${name} "${ARG_ARCHS}" archs arch_display pack_files ${cmd})
  # TL_AOT_ARCHS in the build's environment would override --arch; the archs are decided here.
  foreach(a IN LISTS archs)
    list(APPEND cmd --arch "${a}")
  endforeach()
  set(tune_dep "")
  if(ARG_SPEC)
    get_filename_component(spec_stem "${main_file}" NAME_WE)
    get_filename_component(spec_dir "${main_file}" DIRECTORY)
    if(EXISTS "${spec_dir}/${spec_stem}.tune.json")
      set(tune_dep "${spec_dir}/${spec_stem}.tune.json")
    endif()
  endif()
  if(ARG_TUNE_FILE)
    get_filename_component(tune_file "${ARG_TUNE_FILE}" ABSOLUTE BASE_DIR
                           "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND cmd --tune-file "${tune_file}")
    set(tune_dep "${tune_file}")
  endif()
  list(APPEND cmd -o "${out_dir}" --header-dir "${header_dir}" --depfile "${depfile}")
  if(ARG_JOBS)
    list(APPEND cmd -j "${ARG_JOBS}")
  endif()
  if(cache_dir)
    get_filename_component(cache_dir "${cache_dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
    list(APPEND cmd --cache-dir "${cache_dir}")
  endif()
  if(ARG_CACHE_URL)
    list(APPEND cmd --cache-url "${ARG_CACHE_URL}")
  endif()
  if(ARG_CLUSTER)
    list(APPEND cmd --cluster "${ARG_CLUSTER}")
  endif()
  if(ARG_KEEP_GOING)
    list(APPEND cmd --keep-going)
  endif()
  if(ARG_QUIET)
    list(APPEND cmd --quiet)
  endif()
  # The packs tl_aot writes beside the library (named by tl_aot at configure time).
  set(packs "")
  foreach(f IN LISTS pack_files)
    list(APPEND packs "${out_dir}/${f}")
  endforeach()
  set(companion "")
  if(ARG_TORCH_OPS OR TL_AOT_TORCH_OPS)
    list(APPEND cmd --torch-ops)
    set(companion "${out_dir}/lib${name}_torch.so")
  endif()
  # The project's compiler launchers (sccache, ccache) run tl_aot's nvcc and host compiles too.
  set(launcher "")
  if(CMAKE_CUDA_COMPILER_LAUNCHER)
    list(JOIN CMAKE_CUDA_COMPILER_LAUNCHER " " launcher)
  elseif(CMAKE_CXX_COMPILER_LAUNCHER)
    list(JOIN CMAKE_CXX_COMPILER_LAUNCHER " " launcher)
  endif()
  if(launcher)
    set(env_launcher "TL_AOT_COMPILER_LAUNCHER=${launcher}")
  else()
    set(env_launcher "")
  endif()
  # Ninja runs the command in a process group of its own: a SIGKILLed ninja would leave the build
  # running, so the build stops when ninja is gone (tl_aot/common/build_tool_watch.py).
  list(PREPEND cmd "${CMAKE_COMMAND}" -E env --unset=TL_AOT_ARCHS TL_AOT_STOP_WITH_BUILD_TOOL=1
       ${env_launcher} "${python}" -m tl_aot build)

  # Everything that decides the output, as a file the build step depends on.
  list(JOIN cmd "\n" cmd_text)
  _tl_aot_write_if_different("${options_file}" "# ${versions}\n${cmd_text}\n")

  set(pool_args "")
  if(ARG_JOB_POOL)
    set(pool_args JOB_POOL "${ARG_JOB_POOL}")
  endif()
  # Under KEEP_GOING an arch whose every variant is left out gets no pack: declared, it would be an
  # output never made, so Ninja would run the step (and relink its dependents) on every build.
  # Those packs are then cleaned and installed (OPTIONAL) by name, but not declared.
  set(declared_packs "${packs}")
  if(ARG_KEEP_GOING)
    set(declared_packs "")
  endif()
  set(byproducts "")
  if(companion OR declared_packs)
    set(byproducts BYPRODUCTS ${companion} ${declared_packs})
  endif()
  add_custom_command(
    OUTPUT "${library}" "${header}" ${byproducts}
    # tl_aot leaves an up-to-date library untouched; the touch marks the step done for make.
    COMMAND ${cmd}
    COMMAND "${CMAKE_COMMAND}" -E touch_nocreate "${library}"
    MAIN_DEPENDENCY "${main_file}"
    DEPENDS ${templates} "${options_file}" ${tune_dep} ${capture_files} ${ARG_DEPENDS}
    DEPFILE "${depfile}"
    WORKING_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}"
    COMMENT "Building TileLang kernel ${name} (${arch_display})" ${pool_args}
    COMMAND_EXPAND_LISTS VERBATIM)

  set(all ALL)
  if(ARG_EXCLUDE_FROM_ALL)
    set(all "")
  endif()
  add_custom_target(${name}_tl_aot ${all} DEPENDS "${library}" "${header}")
  set_property(TARGET ${name}_tl_aot APPEND PROPERTY ADDITIONAL_CLEAN_FILES
                                                     "${out_dir}/.tl_aot/${name}")
  if(ARG_KEEP_GOING AND packs)
    set_property(TARGET ${name}_tl_aot APPEND PROPERTY ADDITIONAL_CLEAN_FILES ${packs})
  endif()

  _tl_aot_link_tvm_ffi_beside("${out_dir}" ${name}_tl_aot)

  add_library(${name} SHARED IMPORTED GLOBAL)
  set_target_properties(
    ${name}
    PROPERTIES IMPORTED_LOCATION "${library}"
               IMPORTED_SONAME "lib${name}.so"
               INTERFACE_INCLUDE_DIRECTORIES "${header_dir}"
               INTERFACE_LINK_LIBRARIES tvm_ffi::shared
               TL_AOT_LIBRARY "${library}"
               TL_AOT_HEADER "${header}"
               TL_AOT_BUILD_TARGET ${name}_tl_aot
               TL_AOT_TORCH_COMPANION "${companion}"
               TL_AOT_IMAGE_PACKS "${packs}"
               TL_AOT_KEEP_GOING "${ARG_KEEP_GOING}")
  # Followed transitively: whatever links ${name} waits for its build step.
  add_dependencies(${name} ${name}_tl_aot)
endfunction()

function(install_tilelang_kernels)
  # cmake-format: off
  cmake_parse_arguments(PARSE_ARGV 0 ARG
    # options
    ""
    # one-value keywords
    "EXPORT;NAMESPACE;VERSION;LIBRARY_DESTINATION;INCLUDE_DESTINATION;CMAKE_DESTINATION;COMPONENT"
    # multi-value keywords
    "TARGETS")
  # cmake-format: on
  if(ARG_UNPARSED_ARGUMENTS)
    list(JOIN ARG_UNPARSED_ARGUMENTS " " unknown)
    message(FATAL_ERROR "install_tilelang_kernels(): unknown argument(s) '${unknown}'")
  endif()
  foreach(kw IN LISTS ARG_KEYWORDS_MISSING_VALUES)
    message(FATAL_ERROR "install_tilelang_kernels(): '${kw}' needs a value")
  endforeach()
  if(NOT ARG_TARGETS)
    message(FATAL_ERROR "install_tilelang_kernels(): 'TARGETS' is required")
  endif()
  foreach(kw IN ITEMS NAMESPACE VERSION CMAKE_DESTINATION)
    if(DEFINED ARG_${kw} AND NOT ARG_EXPORT)
      message(FATAL_ERROR "install_tilelang_kernels(): '${kw}' needs 'EXPORT'")
    endif()
  endforeach()

  include(GNUInstallDirs)
  set(lib_dest "${CMAKE_INSTALL_LIBDIR}")
  set(inc_dest "${CMAKE_INSTALL_INCLUDEDIR}")
  if(DEFINED ARG_LIBRARY_DESTINATION)
    set(lib_dest "${ARG_LIBRARY_DESTINATION}")
  endif()
  if(DEFINED ARG_INCLUDE_DESTINATION)
    set(inc_dest "${ARG_INCLUDE_DESTINATION}")
  endif()
  set(component "")
  if(ARG_COMPONENT)
    set(component COMPONENT "${ARG_COMPONENT}")
  endif()

  set(libraries "")
  set(headers "")
  set(optional_packs "")
  foreach(t IN LISTS ARG_TARGETS)
    if(NOT TARGET "${t}")
      message(FATAL_ERROR "install_tilelang_kernels(): '${t}' is not a target")
    endif()
    get_target_property(lib "${t}" TL_AOT_LIBRARY)
    get_target_property(hdr "${t}" TL_AOT_HEADER)
    if(NOT lib OR NOT hdr)
      message(
        FATAL_ERROR "install_tilelang_kernels(): '${t}' was not made by add_tilelang_kernel()")
    endif()
    list(APPEND libraries "${lib}")
    list(APPEND headers "${hdr}")
    get_target_property(companion "${t}" TL_AOT_TORCH_COMPANION)
    if(companion)
      list(APPEND libraries "${companion}")
    endif()
    # Image packs go beside the library: the runtime looks for them there. Under KEEP_GOING an
    # arch whose every variant was left out has none (the library holds no image of it).
    get_target_property(packs "${t}" TL_AOT_IMAGE_PACKS)
    get_target_property(keep_going "${t}" TL_AOT_KEEP_GOING)
    if(packs AND keep_going)
      list(APPEND optional_packs ${packs})
    elseif(packs)
      list(APPEND libraries ${packs})
    endif()
  endforeach()
  install(FILES ${libraries} DESTINATION "${lib_dest}" ${component})
  if(optional_packs)
    install(FILES ${optional_packs} DESTINATION "${lib_dest}" ${component} OPTIONAL)
  endif()
  install(FILES ${headers} DESTINATION "${inc_dest}" ${component})
  if(NOT ARG_EXPORT)
    return()
  endif()

  # --- A package config: find_package(<EXPORT>) defines <NAMESPACE><kernel> ----------------
  set(export "${ARG_EXPORT}")
  foreach(dest IN ITEMS "${lib_dest}" "${inc_dest}")
    if(IS_ABSOLUTE "${dest}")
      message(FATAL_ERROR "install_tilelang_kernels(): with EXPORT, destinations must be relative "
                          "to the install prefix (got ${dest})")
    endif()
  endforeach()
  get_property(seen GLOBAL PROPERTY _TL_AOT_EXPORTS)
  if(export IN_LIST seen)
    message(FATAL_ERROR "install_tilelang_kernels(): EXPORT '${export}' was already installed; "
                        "list all its kernels in one call")
  endif()
  set_property(GLOBAL APPEND PROPERTY _TL_AOT_EXPORTS "${export}")
  set(namespace "${export}::")
  if(DEFINED ARG_NAMESPACE)
    set(namespace "${ARG_NAMESPACE}")
  endif()
  set(cmake_dest "${CMAKE_INSTALL_LIBDIR}/cmake/${export}")
  if(DEFINED ARG_CMAKE_DESTINATION)
    set(cmake_dest "${ARG_CMAKE_DESTINATION}")
  endif()

  include(CMakePackageConfigHelpers)
  set(gen_dir "${CMAKE_CURRENT_BINARY_DIR}/tl_aot/export/${export}")
  # Variables the template substitutes.
  set(TL_AOT_EXPORT "${export}")
  set(TL_AOT_NAMESPACE "${namespace}")
  set(TL_AOT_KERNELS "${ARG_TARGETS}")
  set(TL_AOT_LIBDIR "${lib_dest}")
  set(TL_AOT_INCLUDEDIR "${inc_dest}")
  configure_package_config_file(
    "${_TL_AOT_CMAKE_DIR}/TileLangAOTKernelsConfig.cmake.in" "${gen_dir}/${export}Config.cmake"
    INSTALL_DESTINATION "${cmake_dest}" PATH_VARS TL_AOT_LIBDIR TL_AOT_INCLUDEDIR)
  set(files "${gen_dir}/${export}Config.cmake" "${_TL_AOT_CMAKE_DIR}/TileLangAOTTvmFfi.cmake")
  if(ARG_VERSION)
    write_basic_package_version_file("${gen_dir}/${export}ConfigVersion.cmake"
                                     VERSION "${ARG_VERSION}" COMPATIBILITY SameMajorVersion)
    list(APPEND files "${gen_dir}/${export}ConfigVersion.cmake")
  endif()
  install(FILES ${files} DESTINATION "${cmake_dest}" ${component})
endfunction()

cmake_policy(POP)
