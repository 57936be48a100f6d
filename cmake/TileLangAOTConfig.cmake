# find_package(TileLangAOT CONFIG) — tl_aot's CMake front end: add_tilelang_kernel() and
# install_tilelang_kernels() (documented in TileLangAOT.cmake beside this file).
#
# TileLangAOT_DIR is `python -m tl_aot --cmake-dir`. Finding the package checks that the Python
# interpreter (TL_AOT_PYTHON, else Python_EXECUTABLE, else find_package(Python)) has tl_aot and
# TileLang, and loads apache-tvm-ffi's CMake package (tvm_ffi::shared). When something is
# missing, TileLangAOT_FOUND is false and the message says what to install.
#
# Sets TileLangAOT_PYTHON_EXECUTABLE, the interpreter that builds the kernels.

if(CMAKE_VERSION VERSION_LESS 3.20)
  set(TileLangAOT_FOUND FALSE)
  set(TileLangAOT_NOT_FOUND_MESSAGE
      "TileLangAOT needs CMake 3.20 or newer (this is ${CMAKE_VERSION})")
  return()
endif()

include("${CMAKE_CURRENT_LIST_DIR}/TileLangAOT.cmake")
_tl_aot_init(_tl_aot_error)
if(_tl_aot_error)
  set(TileLangAOT_FOUND FALSE)
  set(TileLangAOT_NOT_FOUND_MESSAGE "${_tl_aot_error}")
  unset(_tl_aot_error)
  return()
endif()
unset(_tl_aot_error)
get_property(TileLangAOT_PYTHON_EXECUTABLE GLOBAL PROPERTY _TL_AOT_PYTHON)
