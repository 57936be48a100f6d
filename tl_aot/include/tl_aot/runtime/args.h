// Part of tl_aot's launcher runtime (tl_aot/launcher_runtime.h includes every part in order):
// argument access and checks (the hot path), scalars, streams, grid and smem checks, launches.
#ifndef TL_AOT_RUNTIME_ARGS_H_
#define TL_AOT_RUNTIME_ARGS_H_

#include <cuda.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/function.h>

#include <cstdint>
#include <string>

#include "tl_aot/runtime/base.h"
#include "tl_aot/runtime/errors.h"

namespace tl_aot {
namespace rt {
inline namespace v4 {

// ----------------------------------------------------------------------------------------------
// Argument access and checks (the hot path: inline, no allocation, no string work unless failing).
// ----------------------------------------------------------------------------------------------
inline bool is_tensor(const ::tvm::ffi::AnyView& v) {
  return v.type_index() == ::tvm::ffi::TypeIndex::kTVMFFIDLTensorPtr || v.type_index() == ::tvm::ffi::TypeIndex::kTVMFFITensor;
}

inline const DLTensor* tensor_arg(const ::tvm::ffi::AnyView& v, const char* entry, const char* arg) {
  if (TL_AOT_LIKELY(is_tensor(v))) return *v.try_cast<DLTensor*>();
  bad_arg("TypeError", entry, arg, "a tensor", std::string(v.GetTypeKey()));
}

inline void set_none(TVMFFIAny* result) {
  result->type_index = kTVMFFINone;
  result->zero_padding = 0;
  result->v_int64 = 0;
}

// A tensor's data: not null, and aligned as TileLang compiled the kernel to assume (align 0: no need).
inline void check_data(const char* entry, const char* arg, const void* p, int align) {
  if (TL_AOT_UNLIKELY(p == nullptr)) bad_arg("ValueError", entry, arg, "a tensor with data", "a null data pointer");
  if (align > 1 && TL_AOT_UNLIKELY(reinterpret_cast<uintptr_t>(p) % align != 0)) bad_alignment(entry, arg, p, align);
}

// Argument i as a tensor for picking a specialisation, or null (missing, not a tensor): the chosen
// specialisation's own checks then name the problem.
inline const DLTensor* peek_tensor(const ::tvm::ffi::AnyView* a, int num_args, int i) {
  return i < num_args && is_tensor(a[i]) ? *a[i].try_cast<DLTensor*>() : nullptr;
}

// Which form a call to an entry with outputs takes: the inputs alone, then an optional stream
// (true: allocate and return the outputs), or every parameter, then an optional stream (false).
// With n_in + 1 == n_all arguments both forms fit; position `decide_at` tells them apart: a tensor
// there means every parameter when `tensor_means_all`. Any other count throws, naming both forms.
inline bool returns_outputs(const ::tvm::ffi::AnyView* a, int num_args, int n_in, int n_all, int decide_at,
                            bool tensor_means_all, const char* entry, const char* inputs, const char* all) {
  if (TL_AOT_LIKELY(num_args == n_in)) return true;
  if (num_args == n_in + 1) return num_args != n_all || is_tensor(a[decide_at]) != tensor_means_all;
  if (num_args == n_all || num_args == n_all + 1) return false;
  bad_arg_count_outputs(entry, inputs, all, num_args);
}

void bad_tensor_device(const DLTensor* t, const char* entry, const char* arg);

inline void check_cuda_tensor(const DLTensor* t, const char* entry, const char* arg) {
  if (TL_AOT_UNLIKELY(t->device.device_type != kDLCUDA || t->device.device_id < 0 ||
                      t->device.device_id >= kMaxDevices))
    bad_tensor_device(t, entry, arg);
}

int64_t int_arg(const ::tvm::ffi::AnyView& v, const char* entry, const char* arg, int64_t lo, int64_t hi,
                const char* dtype);
double float_arg(const ::tvm::ffi::AnyView& v, const char* entry, const char* arg, const char* dtype);
bool bool_arg(const ::tvm::ffi::AnyView& v, const char* entry, const char* arg);

// The call's stream: explicit (an int handle or pointer) or the TVM FFI environment stream of
// `device` (torch.cuda.current_stream() when torch calls).
CUstream stream_arg(const ::tvm::ffi::AnyView* v, int device, const char* entry);

// The device of a call that takes no input tensor (its outputs are allocated there): the device of
// the CUDA context current on this thread (the one torch or the CUDA runtime made current), else 0,
// as when there is no driver at all (loading the entry then says why).
int current_device();

// Every kernel's grid is checked before the entry launches its first kernel.
void bad_grid(const char* entry, const char* kernel, int dim, int64_t value);
inline void check_grid(const char* entry, const char* kernel, const int64_t grid[3]) {
  for (int i = 0; i < 3; ++i)
    if (TL_AOT_UNLIKELY(grid[i] <= 0 || grid[i] > (i == 0 ? 2147483647LL : 65535LL))) bad_grid(entry, kernel, i, grid[i]);
}

// Dynamic shared memory known only per call is checked against what the device allows.
void bad_smem(const char* entry, const char* kernel, int64_t bytes, int64_t allowed);
inline void check_smem(const char* entry, const char* kernel, int64_t bytes, int64_t allowed) {
  if (TL_AOT_UNLIKELY(bytes < 0 || bytes > allowed)) bad_smem(entry, kernel, bytes, allowed);
}

void launch(const char* entry, const char* kernel, CUfunction fn, const int64_t grid[3], const int64_t block[3],
            int64_t smem, CUstream stream, void** args, const int* cluster, bool cooperative, bool pdl);

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot

#endif  // TL_AOT_RUNTIME_ARGS_H_
