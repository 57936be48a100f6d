// Part of tl_aot's launcher runtime (tl_aot/launcher_runtime.h includes every part in order):
// the library-wide exports and the macros defining them (TL_AOT_EXPORT, TL_AOT_DEFINE_LIBRARY).
#ifndef TL_AOT_RUNTIME_EXPORTS_H_
#define TL_AOT_RUNTIME_EXPORTS_H_

#include <tvm/ffi/c_api.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>

#include <cstdint>

#include "tl_aot/runtime/modules.h"

namespace tl_aot {
namespace rt {
inline namespace v4 {

// A TVM FFI function's body: runs `fn` on `ctx`, an error becoming the call's (the safe-call
// convention). `fn` is call_entry for an entry (`ctx` the Entry), or a picker's invoke.
using FfiFn = void (*)(const void* ctx, const ::tvm::ffi::AnyView* a, int32_t num_args, TVMFFIAny* result);
int safe_call(FfiFn fn, const void* ctx, const TVMFFIAny* raw, int32_t num_args, TVMFFIAny* result);
// The exported call of an entry without specialisations (`entry`, an Entry): its form, then invoke.
void call_entry(const void* entry, const ::tvm::ffi::AnyView* a, int32_t num_args, TVMFFIAny* result);

// The C++ API's tensor `v`, viewed in `dl`.
const DLTensor* view(const ::tvm::ffi::TensorView& v, DLTensor* dl);

// The library-wide exports (TVM FFI cleanup_module, tl_aot_prepare, tl_aot_manifest).
int ffi_cleanup(const Library& lib, int32_t num_args, TVMFFIAny* result);
int ffi_prepare(const Library& lib, const TVMFFIAny* raw, int32_t num_args, TVMFFIAny* result);
int ffi_manifest(const char* json, TVMFFIAny* result);
// tl_aot_manifest_part(offset, length): `length` characters of the manifest's `bytes` from `offset`, the
// record of one entry that tl_aot.load() reads through the index (tl_aot_manifest_index), never the whole.
int ffi_manifest_part(const char* json, unsigned long long bytes, const TVMFFIAny* raw, int32_t num_args,
                      TVMFFIAny* result);
// "" when this machine's NVIDIA driver can load the library (or there is none), else why not: tl_aot.load asks.
int ffi_driver_check(const Library& lib, TVMFFIAny* result);
// "" when the images of one arch are at hand, else what is missing and what to install (check_images).
int ffi_check_images(const Library& lib, const TVMFFIAny* raw, int32_t num_args, TVMFFIAny* result);

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot

// TVM FFI export `name` of a library, calling `fn` (an FfiFn) on `ctx`. `name` is only pasted
// (##), never expanded, so an entry named like a macro keeps its name.
#define TL_AOT_EXPORT(name, fn, ctx)                                                                \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_##name(void*, const TVMFFIAny* raw, int32_t num_args, \
                                                     TVMFFIAny* result) {                           \
    return ::tl_aot::rt::safe_call(fn, ctx, raw, num_args, result);                                 \
  }

// What every library defines besides its entries: the TVM FFI exports cleanup_module,
// tl_aot_prepare, tl_aot_manifest, tl_aot_manifest_index and tl_aot_manifest_part, and the C++ API's
// cleanup_module(), prepare() and manifest() in namespace tl_aot::<lib>. `library` is the rt::Library,
// `json` the manifest's text, `json_bytes` its length, `index` the index's text.
// clang-format off: one short definition a line
#define TL_AOT_DEFINE_LIBRARY(lib, library, json, json_bytes, index)                                                 \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_cleanup_module(void*, const TVMFFIAny*, int32_t num_args,              \
                                                             TVMFFIAny* result) {                                    \
    return ::tl_aot::rt::ffi_cleanup(library, num_args, result);                                                     \
  }                                                                                                                  \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tl_aot_prepare(void*, const TVMFFIAny* raw, int32_t num_args,          \
                                                             TVMFFIAny* result) {                                    \
    return ::tl_aot::rt::ffi_prepare(library, raw, num_args, result);                                                \
  }                                                                                                                  \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tl_aot_manifest(void*, const TVMFFIAny*, int32_t, TVMFFIAny* result) { \
    return ::tl_aot::rt::ffi_manifest(json, result);                                                                 \
  }                                                                                                                  \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tl_aot_manifest_index(void*, const TVMFFIAny*, int32_t,                \
                                                                    TVMFFIAny* result) {                             \
    return ::tl_aot::rt::ffi_manifest(index, result);                                                                \
  }                                                                                                                  \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tl_aot_manifest_part(void*, const TVMFFIAny* raw, int32_t num_args,    \
                                                                   TVMFFIAny* result) {                              \
    return ::tl_aot::rt::ffi_manifest_part(json, json_bytes, raw, num_args, result);                                 \
  }                                                                                                                  \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tl_aot_driver_check(void*, const TVMFFIAny*, int32_t,                 \
                                                                  TVMFFIAny* result) {                               \
    return ::tl_aot::rt::ffi_driver_check(library, result);                                                          \
  }                                                                                                                  \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tl_aot_check_images(void*, const TVMFFIAny* raw, int32_t num_args,    \
                                                                  TVMFFIAny* result) {                               \
    return ::tl_aot::rt::ffi_check_images(library, raw, num_args, result);                                           \
  }                                                                                                                  \
  namespace tl_aot {                                                                                                 \
  namespace lib {                                                                                                    \
  int cleanup_module() { return ::tl_aot::rt::cleanup(library); }                                                    \
  void prepare(int device) { ::tl_aot::rt::prepare(library, device); }                                               \
  const char* manifest() { return json; }                                                                            \
  }                                                                                                                  \
  }
// clang-format on

#endif  // TL_AOT_RUNTIME_EXPORTS_H_
