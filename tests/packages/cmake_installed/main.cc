// Links two installed kernels: prints their manifests and checks that a CPU tensor is refused.
#include <tvm/ffi/error.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "sample_add_one.h"
#include "sample_gemm.h"

int main() {
  std::printf("%s\n%s\n", tl_aot::sample_add_one::manifest(), tl_aot::sample_gemm::manifest());
  float data[4] = {0, 1, 2, 3};
  int64_t shape[1] = {4}, strides[1] = {1};
  DLTensor x{data, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, strides, 0};
  try {
    tl_aot::sample_add_one::sample_add_one(tvm::ffi::TensorView(&x), tvm::ffi::TensorView(&x));
  } catch (const tvm::ffi::Error& e) {
    std::printf("%s: %s\n", e.kind().c_str(), e.message().c_str());
    return e.message().find("sample_add_one: argument 'X' expected a CUDA tensor") != std::string::npos ? 0 : 1;
  }
  return 1;
}
