// tl_aot launcher runtime, errors: every message names the entry and, for a bad argument, the
// argument, what was expected and what came (see launcher_runtime.h).
#include "tl_aot/launcher_runtime.h"

#include <tvm/ffi/dtype.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <sstream>
#include <string>

namespace tl_aot {
namespace rt {
inline namespace v4 {  // v4: TensorSpec holds packed sub-byte tensors (v3: Entry and EntrySlot, table-driven checks)

// ------------------------------------------------------------------------------------------------
// Errors
// ------------------------------------------------------------------------------------------------
void fail(const char* kind, const std::string& msg) {
  throw ::tvm::ffi::Error(kind, msg, TVMFFIBacktrace(__FILE__, __LINE__, "", 0));
}

void bad_arg(const char* kind, const char* entry, const char* arg, const std::string& expected,
             const std::string& got) {
  fail(kind, std::string(entry) + ": argument '" + arg + "' expected " + expected + ", got " + got);
}

void bad_alignment(const char* entry, const char* arg, const void* p, int align) {
  bad_arg("ValueError", entry, arg,
          "a data pointer aligned to " + std::to_string(align) + " bytes (TileLang compiles kernels assuming it)",
          "an address " + std::to_string(reinterpret_cast<uintptr_t>(p) % align) + " bytes past a " +
              std::to_string(align) + "-byte boundary (an offset view? call .clone())");
}

std::string shape_str(const DLTensor* t, int pack) {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < t->ndim; ++i) os << (i ? ", " : "") << t->shape[i] * (pack > 0 && i == t->ndim - 1 ? pack : 1);
  os << "]";
  if (pack > 0) os << " (packed in " << ::tvm::ffi::DLDataTypeToString(t->dtype) << shape_str(t) << ")";
  return os.str();
}

static std::string strides_str(const DLTensor* t) {
  if (t->strides == nullptr) return "compact";
  std::ostringstream os;
  os << "(";
  for (int i = 0; i < t->ndim; ++i) os << (i ? ", " : "") << t->strides[i];
  os << ")";
  return os.str();
}

void bad_dim(const char* entry, const char* arg, const char* expected, const DLTensor* t, int pack) {
  bad_arg("ValueError", entry, arg, std::string("shape ") + expected, shape_str(t, pack));
}

void bad_dim_from(const char* entry, const char* arg, const char* expected, int64_t value, const char* source,
                  const DLTensor* t, int pack) {
  bad_arg("ValueError", entry, arg, std::string("shape ") + expected + std::to_string(value) + source,
          shape_str(t, pack));
}

void bad_ndim(const char* entry, const char* arg, int ndim, const char* shape, const DLTensor* t) {
  bad_arg("ValueError", entry, arg, std::to_string(ndim) + " dimension(s) " + shape,
          std::to_string(t->ndim) + " dimension(s) " + shape_str(t));
}

void bad_dtype(const char* entry, const char* arg, const char* dtype, const DLTensor* t) {
  bad_arg("TypeError", entry, arg, std::string("dtype ") + dtype, std::string(::tvm::ffi::DLDataTypeToString(t->dtype)));
}

void bad_device(const char* entry, const char* arg, const char* first, int device, const DLTensor* t) {
  bad_arg("ValueError", entry, arg, "a tensor on cuda:" + std::to_string(device) + " like '" + first + "'",
          "a tensor on cuda:" + std::to_string(t->device.device_id));
}

void bad_symbol(const char* entry, const char* arg, int dim, const char* symbol, int64_t max, const DLTensor* t,
                int pack) {
  const std::string want = "dim " + std::to_string(dim) + " ('" + symbol + "') in [1, " + std::to_string(max) + "]";
  bad_arg("ValueError", entry, arg, want, shape_str(t, pack));
}

void bad_strides(const char* entry, const char* arg, const char* strides, const DLTensor* t) {
  bad_arg("ValueError", entry, arg, std::string("a contiguous tensor with strides ") + strides,
          "strides " + strides_str(t) + " (a transposed or sliced view? call .contiguous())");
}

void bad_arg_count(const char* entry, int expected, const char* names, int got) {
  fail("TypeError", std::string(entry) + "() takes " + std::to_string(expected) + " argument" +
                        (expected == 1 ? "" : "s") + " (" + names + ") and an optional stream, got " +
                        std::to_string(got));
}

void no_specialisation(const char* entry, const DLTensor* const* t, const char* const* names, int n,
                       const char* built) {
  std::string got;
  for (int i = 0; i < n; ++i)
    got += std::string(i ? ", " : "") + names[i] + ": " +
           std::string(::tvm::ffi::DLDataTypeToString(t[i]->dtype)) + shape_str(t[i]);
  fail("ValueError", std::string(entry) + ": no specialisation takes " + got + "; built: " + built);
}

void bad_arg_count_outputs(const char* entry, const char* inputs, const char* all, int got) {
  fail("TypeError", std::string(entry) + "() takes its inputs (" + inputs + ") and returns its outputs, or takes every " +
                        "parameter (" + all + ") and writes the outputs in place; either form then an optional " +
                        "stream; got " + std::to_string(got) + " argument" + (got == 1 ? "" : "s"));
}

static const char* device_type_str(int type) {
  switch (type) {
    case kDLCPU:
      return "cpu";
    case kDLCUDA:
      return "cuda";
    case kDLCUDAHost:
      return "cuda_host (pinned CPU memory)";
    case kDLCUDAManaged:
      return "cuda_managed";
    case kDLROCM:
      return "rocm";
    case kDLMetal:
      return "metal";
    default:
      return "another device type";
  }
}

void bad_tensor_device(const DLTensor* t, const char* entry, const char* arg) {
  if (t->device.device_type != kDLCUDA)
    bad_arg("ValueError", entry, arg, "a CUDA tensor", std::string("a tensor on ") + device_type_str(t->device.device_type));
  bad_arg("ValueError", entry, arg, "a device id below " + std::to_string(kMaxDevices),
          "cuda:" + std::to_string(t->device.device_id));
}

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot
