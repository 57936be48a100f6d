// Prints the kernel's manifest (the test reads the ARGS it was built with) and checks that a CPU
// tensor is refused with a ValueError naming the entry and the argument.
#include <tvm/ffi/error.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "subdir_add_one.h"

int main() {
  std::printf("%s\n", tl_aot::subdir_add_one::manifest());
  float data[4] = {0, 1, 2, 3};
  int64_t shape[1] = {4}, strides[1] = {1};
  DLTensor x{data, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, strides, 0};
  try {
    tl_aot::subdir_add_one::subdir_add_one(tvm::ffi::TensorView(&x), tvm::ffi::TensorView(&x));
  } catch (const tvm::ffi::Error& e) {
    std::printf("%s: %s\n", e.kind().c_str(), e.message().c_str());
    return e.kind() == "ValueError" && e.message().find("argument 'X' expected a CUDA tensor") != std::string::npos ? 0 : 1;
  }
  std::printf("a CPU tensor was accepted\n");
  return 1;
}
