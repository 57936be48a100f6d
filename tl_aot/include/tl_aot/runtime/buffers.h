// Part of tl_aot's launcher runtime (tl_aot/launcher_runtime.h includes every part in order):
// buffers allocated per call: workspaces and returned outputs.
#ifndef TL_AOT_RUNTIME_BUFFERS_H_
#define TL_AOT_RUNTIME_BUFFERS_H_

#include <cuda.h>
#include <tvm/ffi/container/tensor.h>

#include <cstdint>
#include <initializer_list>

namespace tl_aot {
namespace rt {
inline namespace v4 {

// ----------------------------------------------------------------------------------------------
// Buffers the library allocates per call (T.alloc_global workspaces, returned outputs): from the
// TVM FFI environment allocator (torch's caching allocator when torch calls), on the call's device.
// ----------------------------------------------------------------------------------------------
// Bytes of `factors` elements of `elem_bytes` each; overflow or a negative factor is an error.
int64_t checked_bytes(const char* entry, const char* buffer, std::initializer_list<int64_t> factors, int64_t elem_bytes);
::tvm::ffi::Tensor alloc_tensor(const char* entry, const char* buffer, const int64_t* shape, int ndim, DLDataType dtype,
                                int device);

// A returned output: allocated as above with `shape` (a negative dim, from a scalar argument, is an
// error naming the output), kept in *keep, described by *t; its data.
void* alloc_output(const char* entry, const char* name, const int64_t* shape, int ndim, DLDataType dtype, int device,
                   ::tvm::ffi::Tensor* keep, const DLTensor** t);

// Workspaces of one call: released when the call returns. A call on an explicit stream other than
// the environment's waits for its kernels first, since the allocator orders frees on its own stream.
class Workspaces {
 public:
  Workspaces(const char* entry, int device, CUstream stream, bool explicit_stream)
      : entry_(entry), device_(device), stream_(stream), explicit_(explicit_stream) {}
  ~Workspaces();
  Workspaces(const Workspaces&) = delete;
  Workspaces& operator=(const Workspaces&) = delete;
  void* add(const char* name, int64_t bytes);

 private:
  static constexpr int kMax = 16;
  const char* entry_;
  int device_;
  CUstream stream_;
  bool explicit_;
  int n_ = 0;
  ::tvm::ffi::Tensor held_[kMax];
};

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot

#endif  // TL_AOT_RUNTIME_BUFFERS_H_
