# Locate apache-tvm-ffi's own CMake package (tvm_ffi::shared) through its Python package.
#
# Shared by TileLangAOTConfig.cmake and by the package configs install_tilelang_kernels() writes
# (which ship a copy of this file), so a downstream project finds tvm-ffi the same way whether it
# builds kernels or only links installed ones.

include_guard(GLOBAL)

#[=======================================================================[.rst:
.. command:: _tl_aot_find_tvm_ffi

  Private. Make ``tvm_ffi::shared`` available::

    _tl_aot_find_tvm_ffi(<out-error> [PYTHON <python>] [GLOBAL])

  Does nothing when ``tvm_ffi::shared`` is already a target. Otherwise ``tvm_ffi_DIR`` (if
  set) or ``<python> -m tvm_ffi.config --cmakedir`` names tvm-ffi's package folder, and
  ``find_package(tvm_ffi CONFIG)`` loads it with the same interpreter. ``<python>`` defaults
  to ``Python_EXECUTABLE`` or ``find_package(Python COMPONENTS Interpreter)``. ``GLOBAL``
  promotes tvm-ffi's imported targets so targets in every directory can link them.

  ``<out-error>`` is set to an empty string on success, else to a message naming the fix.
#]=======================================================================]
function(_tl_aot_find_tvm_ffi out_error)
  # cmake-format: off
  cmake_parse_arguments(PARSE_ARGV 1 ARG
    # options
    "GLOBAL"
    # one-value keywords
    "PYTHON"
    # multi-value keywords
    "")
  # cmake-format: on
  set(${out_error} "" PARENT_SCOPE)
  if(TARGET tvm_ffi::shared)
    return()
  endif()

  set(python "${ARG_PYTHON}")
  if(NOT python AND Python_EXECUTABLE)
    set(python "${Python_EXECUTABLE}")
  endif()
  if(NOT python)
    find_package(Python COMPONENTS Interpreter QUIET)
    set(python "${Python_EXECUTABLE}")
  endif()

  if(NOT tvm_ffi_DIR AND python)
    execute_process(
      COMMAND "${python}" -m tvm_ffi.config --cmakedir
      OUTPUT_VARIABLE dir
      ERROR_QUIET
      RESULT_VARIABLE rc
      OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0 AND IS_DIRECTORY "${dir}")
      set(tvm_ffi_DIR "${dir}"
          CACHE PATH "Folder of tvm_ffi-config.cmake (from the apache-tvm-ffi Python package)")
    endif()
  endif()

  # tvm_ffi-config.cmake asks Python again: make it ask the same interpreter.
  if(python)
    set(Python_EXECUTABLE "${python}")
  endif()
  find_package(tvm_ffi CONFIG QUIET)
  if(NOT TARGET tvm_ffi::shared)
    if(NOT python)
      set(python "no Python interpreter found")
    endif()
    # cmake-format: off
    string(CONCAT msg
      "apache-tvm-ffi's CMake package was not found (Python: ${python}). "
      "Install it with `pip install apache-tvm-ffi`, or set tvm_ffi_DIR to the folder "
      "`tvm-ffi-config --cmakedir` prints.")
    # cmake-format: on
    set(${out_error} "${msg}" PARENT_SCOPE)
    return()
  endif()
  if(ARG_GLOBAL)
    foreach(t IN ITEMS tvm_ffi::shared tvm_ffi::header)
      if(TARGET ${t})
        get_target_property(is_global ${t} IMPORTED_GLOBAL)
        if(NOT is_global)
          set_target_properties(${t} PROPERTIES IMPORTED_GLOBAL TRUE)
        endif()
      endif()
    endforeach()
  endif()
endfunction()
