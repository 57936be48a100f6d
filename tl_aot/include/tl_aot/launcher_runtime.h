// tl_aot launcher runtime: the fixed part of every generated kernel library.
//
// Driver loading (dlopen + cuGetProcAddress, never linked), per-device state (a retained primary
// context, a module and kernel table per entry), image selection, find_kernel_by_pattern,
// cleanup, argument checks, TMA encoding, workspaces from the environment allocator, L2 windows
// and launches. Generated code holds only the per-entry part and calls this API. Every symbol is
// hidden (compiled with -fvisibility=hidden, in a versioned inline namespace), so two tl_aot
// libraries in one process never share state or symbols.
#ifndef TL_AOT_LAUNCHER_RUNTIME_H_
#define TL_AOT_LAUNCHER_RUNTIME_H_

#include <cuda.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

// The parts (tl_aot/runtime/, one per job) in the order of the single header they were split from.
// clang-format off: the order is the definitions' order
#include "tl_aot/runtime/base.h"
#include "tl_aot/runtime/errors.h"
#include "tl_aot/runtime/driver.h"
#include "tl_aot/runtime/modules.h"
#include "tl_aot/runtime/packs.h"
#include "tl_aot/runtime/args.h"
#include "tl_aot/runtime/tma.h"
#include "tl_aot/runtime/buffers.h"
#include "tl_aot/runtime/l2_window.h"
#include "tl_aot/runtime/expr.h"
#include "tl_aot/runtime/half.h"
#include "tl_aot/runtime/checks.h"
#include "tl_aot/runtime/exports.h"
// clang-format on

#endif  // TL_AOT_LAUNCHER_RUNTIME_H_
