// Part of tl_aot's launcher runtime (tl_aot/launcher_runtime.h includes every part in order):
// errors, each one message naming the entry and, for a bad argument, the argument.
#ifndef TL_AOT_RUNTIME_ERRORS_H_
#define TL_AOT_RUNTIME_ERRORS_H_

#include <tvm/ffi/c_api.h>

#include <cstdint>
#include <string>

namespace tl_aot {
namespace rt {
inline namespace v4 {

// ----------------------------------------------------------------------------------------------
// Errors: every message names the entry and, for bad arguments, the argument, expected and got.
// ----------------------------------------------------------------------------------------------
[[noreturn]] void fail(const char* kind, const std::string& msg);
[[noreturn]] void bad_arg(const char* kind, const char* entry, const char* arg, const std::string& expected,
                          const std::string& got);
[[noreturn]] void bad_alignment(const char* entry, const char* arg, const void* p, int align);
// `pack`: 0, or a packed sub-byte tensor's elements per storage element (the got shape shows both).
[[noreturn]] void bad_dim(const char* entry, const char* arg, const char* expected, const DLTensor* t, int pack = 0);
[[noreturn]] void bad_dim_from(const char* entry, const char* arg, const char* expected, int64_t value,
                               const char* source, const DLTensor* t, int pack = 0);
[[noreturn]] void bad_ndim(const char* entry, const char* arg, int ndim, const char* shape, const DLTensor* t);
[[noreturn]] void bad_dtype(const char* entry, const char* arg, const char* dtype, const DLTensor* t);
[[noreturn]] void bad_device(const char* entry, const char* arg, const char* first, int device, const DLTensor* t);
[[noreturn]] void bad_symbol(const char* entry, const char* arg, int dim, const char* symbol, int64_t max,
                             const DLTensor* t, int pack = 0);
[[noreturn]] void bad_strides(const char* entry, const char* arg, const char* strides, const DLTensor* t);
[[noreturn]] void bad_arg_count(const char* entry, int expected, const char* names, int got);
[[noreturn]] void bad_arg_count_outputs(const char* entry, const char* inputs, const char* all, int got);
// No specialisation of `entry` matches the input tensors t[0..n) (named `names`); `built` lists them.
[[noreturn]] void no_specialisation(const char* entry, const DLTensor* const* t, const char* const* names, int n,
                                    const char* built);
// [64, 128]; with `pack` (a packed sub-byte tensor) the logical shape, then the storage:
// [64, 256] (packed in int8[64, 128]).
std::string shape_str(const DLTensor* t, int pack = 0);

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot

#endif  // TL_AOT_RUNTIME_ERRORS_H_
