// tl_aot launcher runtime, buffers allocated per call: sizes, outputs and workspaces from the
// environment's tensor allocator.
#include "tl_aot/launcher_runtime.h"

#include <tvm/ffi/extra/c_env_api.h>

#include <string>

namespace tl_aot {
namespace rt {
inline namespace v4 {  // v4: TensorSpec holds packed sub-byte tensors (v3: Entry and EntrySlot, table-driven checks)

// ------------------------------------------------------------------------------------------------
// Buffers allocated per call
// ------------------------------------------------------------------------------------------------
int64_t checked_bytes(const char* entry, const char* buffer, std::initializer_list<int64_t> factors, int64_t elem_bytes) {
  int64_t n = elem_bytes;
  for (int64_t f : factors) {
    if (f < 0 || __builtin_mul_overflow(n, f, &n))
      fail("ValueError", std::string(entry) + ": buffer '" + buffer +
                             "' would need more than 2^63 bytes for these inputs (its size overflows)");
  }
  return n;
}

::tvm::ffi::Tensor alloc_tensor(const char* entry, const char* buffer, const int64_t* shape, int ndim, DLDataType dtype,
                                int device) {
  if (TVMFFIEnvGetDLPackManagedTensorAllocator() == nullptr)
    fail("RuntimeError", std::string(entry) + ": allocating '" + buffer +
                             "' needs a tensor allocator and none is set: call from torch (pass torch tensors), or "
                             "from C++ set one with TVMFFIEnvSetDLPackManagedTensorAllocator, or pass the "
                             "buffers yourself where the entry takes them");
  DLTensor proto{};
  proto.device = DLDevice{kDLCUDA, device};
  proto.dtype = dtype;
  proto.ndim = ndim;
  proto.shape = const_cast<int64_t*>(shape);
  TVMFFIObjectHandle out = nullptr;
  if (TVMFFIEnvTensorAlloc(&proto, &out) != 0) {
    // The allocator's own error (out of memory, ...) is the most useful message: keep it, add where.
    ::tvm::ffi::Error err = ::tvm::ffi::details::MoveFromSafeCallRaised();
    fail(err.kind().c_str(), std::string(entry) + ": allocating '" + buffer + "' on cuda:" + std::to_string(device) +
                                 " failed: " + err.message());
  }
  return ::tvm::ffi::Tensor(
      ::tvm::ffi::details::ObjectUnsafe::ObjectPtrFromOwned<::tvm::ffi::TensorObj>(static_cast<TVMFFIObject*>(out)));
}

void* alloc_output(const char* entry, const char* name, const int64_t* shape, int ndim, DLDataType dtype, int device,
                   ::tvm::ffi::Tensor* keep, const DLTensor** t) {
  for (int i = 0; i < ndim; ++i) {
    if (TL_AOT_UNLIKELY(shape[i] < 0)) {
      std::string dims;
      for (int j = 0; j < ndim; ++j) dims += (dims.empty() ? "" : ", ") + std::to_string(shape[j]);
      fail("ValueError", std::string(entry) + ": output '" + name + "' would have shape [" + dims +
                             "] for these arguments; a dim cannot be negative");
    }
  }
  *keep = alloc_tensor(entry, name, shape, ndim, dtype, device);
  *t = keep->GetDLTensorPtr();
  return (*t)->data;
}

void* Workspaces::add(const char* name, int64_t bytes) {
  if (n_ >= kMax) fail("RuntimeError", std::string(entry_) + ": more than 16 workspaces in one call");
  int64_t shape[1] = {bytes > 0 ? bytes : 1};
  held_[n_] = alloc_tensor(entry_, name, shape, 1, DLDataType{kDLUInt, 8, 1}, device_);
  return held_[n_++].data_ptr();
}

Workspaces::~Workspaces() {
  if (n_ == 0 || !explicit_) return;
  if (stream_ == static_cast<CUstream>(TVMFFIEnvGetStream(kDLCUDA, device_))) return;
  // The allocator may hand the memory to work on its own stream once released: wait for ours.
  driver().StreamSynchronize(stream_);
}

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot
