// CPU checks of the sample kernel libraries, for machines with no GPU and no NVIDIA driver:
// the libraries load (they do not link libcuda), their manifests describe the entries, and bad
// arguments (a CPU tensor, a wrong dtype or shape) are refused with a tvm::ffi::Error naming the
// entry and the argument before anything is launched.
//
//   tl_aot_cpu_checks manifest | refuse-cpu-tensor | refuse-bad-arguments
//
// Exit status: 0 when every check passes, 1 otherwise (each failure is printed).

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/json.h>
#include <tvm/ffi/string.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "sample_add_one.h"
#include "sample_axpy.h"
#include "sample_gemm.h"

namespace {

namespace json = tvm::ffi::json;
using tvm::ffi::String;

int g_failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  if (!ok) ++g_failures;
}

std::string str(const tvm::ffi::Any& v) { return std::string(v.cast<String>()); }

// ---------------------------------------------------------------------------------------------
// manifest(): JSON describing the library; checked here against what CMakeLists.txt asked for.
// ---------------------------------------------------------------------------------------------
struct Expected {
  const char* library;
  const char* (*manifest)();
  std::vector<std::string> params;  // "name:dtype"
};

void check_manifest(const Expected& want) {
  String error;
  json::Value parsed = json::Parse(want.manifest(), &error);
  if (!error.empty()) {
    check(false, std::string(want.library) + ": manifest is not JSON: " + std::string(error));
    return;
  }
  auto root = parsed.cast<json::Object>();
  check(str(root["library"]) == want.library, std::string(want.library) + ": manifest names the library");
  check(root["abi_version"].cast<int64_t>() >= 1, std::string(want.library) + ": manifest has an ABI version");
  auto entries = root["entries"].cast<json::Array>();
  check(entries.size() == 1, std::string(want.library) + ": one entry");
  if (entries.size() != 1) return;
  auto entry = entries[0].cast<json::Object>();
  check(str(entry["name"]) == want.library, std::string(want.library) + ": the entry is named after the target");
  std::vector<std::string> params;
  for (const auto& p : entry["params"].cast<json::Array>()) {
    auto param = p.cast<json::Object>();
    params.push_back(str(param["name"]) + ":" + str(param["dtype"]));
  }
  std::string got;
  for (const auto& p : params) got += p + " ";
  check(params == want.params, std::string(want.library) + ": parameters " + got);
  std::string archs;
  for (const auto& v : entry["variants"].cast<json::Array>()) {
    archs += str(v.cast<json::Object>()["arch"]) + " ";
  }
  check(archs.rfind("sm_", 0) == 0, std::string(want.library) + ": built for " + archs);
}

// ---------------------------------------------------------------------------------------------
// Refused calls: the error kind and message, and that the library stays usable afterwards.
// ---------------------------------------------------------------------------------------------
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // tvm::ffi::TensorView needs explicit strides
  std::vector<float> storage;
  DLTensor dl{};

  Tensor(std::vector<int64_t> s, DLDataType dtype, DLDeviceType device) : shape(std::move(s)) {
    strides.assign(shape.size(), 1);
    for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    storage.assign(static_cast<size_t>(n), 0.0f);
    dl.data = device == kDLCPU ? static_cast<void*>(storage.data())
                               : reinterpret_cast<void*>(uintptr_t{0x7f0000000000});  // never dereferenced
    dl.device = DLDevice{device, 0};
    dl.ndim = static_cast<int32_t>(shape.size());
    dl.dtype = dtype;
    dl.shape = shape.data();
    dl.strides = strides.data();
    dl.byte_offset = 0;
  }
  tvm::ffi::TensorView view() const { return tvm::ffi::TensorView(&dl); }
};

const DLDataType kF32{kDLFloat, 32, 1};
const DLDataType kF16{kDLFloat, 16, 1};

void expect_error(const std::string& what, const char* kind, const std::string& needle, const std::function<void()>& call) {
  try {
    call();
    check(false, what + ": no error was raised");
  } catch (const tvm::ffi::Error& e) {
    bool ok = e.kind() == kind && e.message().find(needle) != std::string::npos;
    check(ok, what + " -> " + e.kind() + ": " + e.message());
  }
}

void refuse_cpu_tensors() {
  Tensor x({1000}, kF32, kDLCPU), y({1000}, kF32, kDLCPU);
  expect_error("sample_add_one on CPU tensors", "ValueError",
               "sample_add_one: argument 'X' expected a CUDA tensor, got a tensor on cpu",
               [&] { tl_aot::sample_add_one::sample_add_one(x.view(), y.view()); });
  Tensor x4k({4096}, kF32, kDLCPU), y4k({4096}, kF32, kDLCPU);
  expect_error("sample_axpy on CPU tensors", "ValueError", "sample_axpy: argument 'X' expected a CUDA tensor",
               [&] { tl_aot::sample_axpy::sample_axpy(x4k.view(), y4k.view(), 2.0f, 1); });
  Tensor a({256, 256}, kF16, kDLCPU), b({256, 256}, kF16, kDLCPU), c({256, 256}, kF16, kDLCPU);
  expect_error("sample_gemm on CPU tensors", "ValueError", "sample_gemm: argument 'A' expected a CUDA tensor",
               [&] { tl_aot::sample_gemm::sample_gemm(a.view(), b.view(), c.view()); });
  // Still usable: the same call is diagnosed the same way, and cleanup has nothing to release.
  expect_error("sample_add_one again", "ValueError", "expected a CUDA tensor",
               [&] { tl_aot::sample_add_one::sample_add_one(x.view(), y.view()); });
  check(tl_aot::sample_add_one::cleanup_module() == 0, "sample_add_one: cleanup_module() returns 0");
}

void refuse_bad_arguments() {
  // CUDA-device tensors whose data is never touched: every check runs before the driver is needed.
  Tensor a({256, 256}, kF16, kDLCUDA), b32({256, 256}, kF32, kDLCUDA), c({256, 256}, kF16, kDLCUDA);
  expect_error("sample_gemm with a float32 B", "TypeError", "sample_gemm: argument 'B' expected dtype float16, got float32",
               [&] { tl_aot::sample_gemm::sample_gemm(a.view(), b32.view(), c.view()); });
  Tensor c_small({256, 128}, kF16, kDLCUDA), b({256, 256}, kF16, kDLCUDA);
  expect_error("sample_gemm with C of shape [256, 128]", "ValueError", "sample_gemm: argument 'C' expected shape [256, 256]",
               [&] { tl_aot::sample_gemm::sample_gemm(a.view(), b.view(), c_small.view()); });
  Tensor x({4096}, kF32, kDLCUDA), y({100}, kF32, kDLCUDA);
  expect_error("sample_axpy with Y of length 100", "ValueError", "sample_axpy: argument 'Y' expected shape [4096]",
               [&] { tl_aot::sample_axpy::sample_axpy(x.view(), y.view(), 2.0f, 1); });
  Tensor p({64}, kF32, kDLCUDA), q({65}, kF32, kDLCUDA);
  expect_error("sample_add_one with lengths 64 and 65", "ValueError", "sample_add_one: argument 'Y'",
               [&] { tl_aot::sample_add_one::sample_add_one(p.view(), q.view()); });
}

void returned_output() {
  // The returning form (OUT_IDX -1): inputs are checked first, then C needs the TVM FFI environment
  // allocator, which a plain C++ program has not set: a clear error, nothing launched.
  Tensor a({256, 256}, kF16, kDLCUDA), b({256, 256}, kF16, kDLCUDA), b32({256, 256}, kF32, kDLCUDA);
  expect_error("sample_gemm returning C, no allocator", "RuntimeError",
               "sample_gemm: allocating 'C' needs a tensor allocator and none is set", [&] {
                 tvm::ffi::Tensor c = tl_aot::sample_gemm::sample_gemm(a.view(), b.view());
                 (void)c;
               });
  expect_error("sample_gemm returning C, float32 B", "TypeError", "sample_gemm: argument 'B' expected dtype float16", [&] {
    tvm::ffi::Tensor c = tl_aot::sample_gemm::sample_gemm(a.view(), b32.view(), nullptr);
    (void)c;
  });
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "manifest") {
    check_manifest({"sample_add_one", &tl_aot::sample_add_one::manifest, {"X:float32", "Y:float32"}});
    check_manifest({"sample_axpy", &tl_aot::sample_axpy::manifest, {"X:float32", "Y:float32", "alpha:float32", "shift:int32"}});
    check_manifest({"sample_gemm", &tl_aot::sample_gemm::manifest, {"A:float16", "B:float16", "C:float16"}});
  } else if (what == "refuse-cpu-tensor") {
    refuse_cpu_tensors();
  } else if (what == "refuse-bad-arguments") {
    refuse_bad_arguments();
  } else if (what == "returned-output") {
    returned_output();
  } else {
    std::fprintf(stderr, "usage: %s manifest | refuse-cpu-tensor | refuse-bad-arguments | returned-output\n", argv[0]);
    return 2;
  }
  std::printf("%s: %d failure(s)\n", what.c_str(), g_failures);
  return g_failures == 0 ? 0 : 1;
}
