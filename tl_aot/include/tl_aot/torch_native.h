// Native torch operators for a tl_aot library, through PyTorch's LibTorch Stable ABI.
//
// A companion library (lib<name>_torch.so, generated from templates/torch_companion.cc.j2) includes
// this header and registers one boxed kernel per entry: the dispatcher's stack is read as stable
// tensors (AtenTensorHandle) and scalars, tensors become DLTensor views, the entry's C++ function is
// called on torch's current CUDA stream, and returned outputs come from torch's allocator. Only the
// C shim is used (no libtorch C++ symbols, no link against libtorch), and the stable ABI is targeted
// at torch 2.10, so one binary serves every torch release from 2.10 on.
#pragma once

#ifndef TORCH_TARGET_VERSION
#define TORCH_TARGET_VERSION (((0ULL + 2) << 56) | ((0ULL + 10) << 48))
#endif

#include <dlfcn.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/c/shim.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace tl_aot {
namespace torch_native {

/// A boxed kernel as the stable ABI calls it: the stack holds the inputs, then receives the outputs.
using Kernel = void (*)(StableIValue* stack, uint64_t num_inputs, uint64_t num_outputs);

[[noreturn]] inline void fail(const std::string& message) { throw std::runtime_error(message); }

inline void check(AOTITorchError err, const char* what) {
  if (err != AOTI_TORCH_SUCCESS) fail(std::string("tl_aot: torch's ") + what + " failed");
}

/// torch dtype code <-> DLPack dtype, for the dtypes an entry may take.
inline const std::vector<std::pair<int32_t, DLDataType>>& dtype_table() {
  static const std::vector<std::pair<int32_t, DLDataType>> table = {
      {aoti_torch_dtype_float32(), {kDLFloat, 32, 1}},      {aoti_torch_dtype_float16(), {kDLFloat, 16, 1}},
      {aoti_torch_dtype_bfloat16(), {kDLBfloat, 16, 1}},    {aoti_torch_dtype_float64(), {kDLFloat, 64, 1}},
      {aoti_torch_dtype_int32(), {kDLInt, 32, 1}},          {aoti_torch_dtype_int64(), {kDLInt, 64, 1}},
      {aoti_torch_dtype_int16(), {kDLInt, 16, 1}},          {aoti_torch_dtype_int8(), {kDLInt, 8, 1}},
      {aoti_torch_dtype_uint8(), {kDLUInt, 8, 1}},          {aoti_torch_dtype_uint16(), {kDLUInt, 16, 1}},
      {aoti_torch_dtype_uint32(), {kDLUInt, 32, 1}},        {aoti_torch_dtype_uint64(), {kDLUInt, 64, 1}},
      {aoti_torch_dtype_bool(), {kDLBool, 8, 1}},           {aoti_torch_dtype_float8_e4m3fn(), {kDLFloat8_e4m3fn, 8, 1}},
      {aoti_torch_dtype_float8_e5m2(), {kDLFloat8_e5m2, 8, 1}},  // float8_e8m0fnu: a 2.12 shim, past the 2.10 target
  };
  return table;
}

inline DLDataType dl_dtype(int32_t torch_dtype) {
  for (const auto& [t, d] : dtype_table())
    if (t == torch_dtype) return d;
  return DLDataType{kDLOpaqueHandle, 0, 0};  // not one an entry takes: the library's dtype check names it
}

inline int32_t torch_dtype(DLDataType d) {
  for (const auto& [t, dl] : dtype_table())
    if (dl.code == d.code && dl.bits == d.bits && dl.lanes == d.lanes) return t;
  fail("tl_aot: no torch dtype for DLPack dtype code " + std::to_string(d.code) + " bits " + std::to_string(d.bits));
}

/// torch's current CUDA stream of `device`. Looked up when first used: CPU-only torch lacks it.
inline void* current_stream(int32_t device) {
  using Fn = AOTITorchError (*)(int32_t, void**);
  static Fn fn = [] {
    void* lib = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
    void* sym = lib ? dlsym(lib, "aoti_torch_get_current_cuda_stream") : nullptr;
    return reinterpret_cast<Fn>(sym ? sym : dlsym(RTLD_DEFAULT, "aoti_torch_get_current_cuda_stream"));
  }();
  if (fn == nullptr) fail("tl_aot: this torch has no CUDA (aoti_torch_get_current_cuda_stream not found)");
  void* stream = nullptr;
  check(fn(device, &stream), "aoti_torch_get_current_cuda_stream");
  return stream;
}

/// A tensor torch allocated for the library during one call (an output, or a workspace).
struct Made {
  AtenTensorHandle handle;
  void* data;
};

inline std::vector<Made>& made() {
  thread_local std::vector<Made> list;
  return list;
}

/// What a DLPack tensor from torch's allocator keeps alive: a second handle and the shape.
struct Holder {
  AtenTensorHandle keep;
  std::vector<int64_t> shape, strides;
};

/// A DLPackManagedTensorAllocator over torch's allocator (its caching allocator on CUDA).
inline int allocate(DLTensor* proto, DLManagedTensorVersioned** out, void* error_ctx,
                    void (*set_error)(void*, const char*, const char*)) {
  try {
    std::vector<int64_t> shape(proto->shape, proto->shape + proto->ndim), strides(proto->ndim);
    int64_t step = 1;
    for (int i = proto->ndim - 1; i >= 0; --i) {
      strides[i] = step;
      step *= shape[i] > 0 ? shape[i] : 1;
    }
    int32_t type = proto->device.device_type == kDLCUDA ? aoti_torch_device_type_cuda() : aoti_torch_device_type_cpu();
    AtenTensorHandle h = nullptr, keep = nullptr;
    check(aoti_torch_empty_strided(proto->ndim, shape.data(), strides.data(), torch_dtype(proto->dtype), type,
                                   proto->device.device_id, &h),
          "aoti_torch_empty_strided");
    check(aoti_torch_new_tensor_handle(h, &keep), "aoti_torch_new_tensor_handle");
    void* data = nullptr;
    check(aoti_torch_get_data_ptr(h, &data), "aoti_torch_get_data_ptr");
    made().push_back({h, data});
    auto* holder = new Holder{keep, std::move(shape), std::move(strides)};
    auto* m = new DLManagedTensorVersioned{};
    m->version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    m->manager_ctx = holder;
    m->deleter = [](DLManagedTensorVersioned* self) {
      auto* hd = static_cast<Holder*>(self->manager_ctx);
      aoti_torch_delete_tensor_object(hd->keep);
      delete hd;
      delete self;
    };
    m->dl_tensor = *proto;
    m->dl_tensor.data = data;
    m->dl_tensor.byte_offset = 0;
    m->dl_tensor.shape = holder->shape.data();
    m->dl_tensor.strides = holder->strides.data();
    *out = m;
    return 0;
  } catch (const std::exception& e) {
    set_error(error_ctx, "RuntimeError", e.what());
    return -1;
  }
}

/// One call of a boxed kernel: owns the input tensors, views them as DLTensors, installs torch's
/// allocator for the library's allocations, and puts the outputs on the stack.
class Call {
 public:
  Call(StableIValue* stack, uint64_t num_inputs, const char* op) : stack_(stack), op_(op), views_(num_inputs), owned_(num_inputs) {
    for (uint64_t i = 0; i < num_inputs; ++i) owned_[i] = nullptr;
    made().clear();
    TVMFFIEnvSetDLPackManagedTensorAllocator(allocate, 0, &previous_);
  }
  ~Call() {
    TVMFFIEnvSetDLPackManagedTensorAllocator(previous_, 0, nullptr);
    for (AtenTensorHandle h : owned_)
      if (h != nullptr) aoti_torch_delete_tensor_object(h);
    for (const Made& m : made()) aoti_torch_delete_tensor_object(m.handle);  // workspaces, or outputs on error
    made().clear();
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  /// Input `i`, a tensor, as a DLTensor view (valid for the call).
  ::tvm::ffi::TensorView tensor(int i) {
    AtenTensorHandle h;
    std::memcpy(&h, &stack_[i], sizeof(h));
    owned_[i] = h;
    DLTensor& t = views_[i];
    int64_t ndim = 0;
    int32_t type = 0, index = 0, dtype = 0;
    check(aoti_torch_get_data_ptr(h, &t.data), "aoti_torch_get_data_ptr");
    check(aoti_torch_get_dim(h, &ndim), "aoti_torch_get_dim");
    check(aoti_torch_get_sizes(h, &t.shape), "aoti_torch_get_sizes");
    check(aoti_torch_get_strides(h, &t.strides), "aoti_torch_get_strides");
    check(aoti_torch_get_dtype(h, &dtype), "aoti_torch_get_dtype");
    check(aoti_torch_get_device_type(h, &type), "aoti_torch_get_device_type");
    check(aoti_torch_get_device_index(h, &index), "aoti_torch_get_device_index");
    t.ndim = static_cast<int32_t>(ndim);
    t.dtype = dl_dtype(dtype);
    t.device = DLDevice{type == aoti_torch_device_type_cuda() ? kDLCUDA : type == aoti_torch_device_type_cpu() ? kDLCPU : kDLExtDev,
                        index};
    t.byte_offset = 0;
    if (!placed_) {
      placed_ = true;
      device_ = index;
      on_cuda_ = t.device.device_type == kDLCUDA;
    }
    return ::tvm::ffi::TensorView(&t);
  }

  double real(int i) const { return read<double>(i); }
  bool boolean(int i) const { return read<bool>(i); }

  /// Input `i`, an integer, in the range of the entry's C++ type `T`.
  template <typename T>
  T integer(int i, const char* name) const {
    int64_t v = read<int64_t>(i);
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
      fail(std::string(op_) + ": argument '" + name + "' = " + std::to_string(v) + " is out of range of its type");
    return static_cast<T>(v);
  }

  /// The stream the entry runs on: torch's current stream of the inputs' device (of torch's current
  /// device when the entry takes no tensor); on a CPU tensor, none (the library reports the device).
  void* stream() {
    if (!placed_) {
      if (aoti_torch_get_current_device_index(&device_) != AOTI_TORCH_SUCCESS)
        fail(std::string(op_) + ": no CUDA device to put its outputs on (torch has no current device)");
      placed_ = on_cuda_ = true;
    }
    return on_cuda_ ? current_stream(device_) : nullptr;
  }

  /// Put the entry's returned outputs on the stack, as the tensors torch allocated for them.
  void returns(const ::tvm::ffi::Tensor& t) { stack_[0] = take(t); }
  template <typename... T>
  void returns(const std::tuple<T...>& ts) {
    std::apply([this](const auto&... t) {
      int i = 0;
      ((stack_[i++] = take(t)), ...);
    }, ts);
  }

 private:
  template <typename T>
  T read(int i) const {
    T v;
    std::memcpy(&v, &stack_[i], sizeof(T));
    return v;
  }

  StableIValue take(const ::tvm::ffi::Tensor& t) {
    auto& list = made();
    for (auto it = list.begin(); it != list.end(); ++it) {
      if (it->data == t.data_ptr()) {
        StableIValue v = 0;
        std::memcpy(&v, &it->handle, sizeof(it->handle));
        list.erase(it);
        return v;
      }
    }
    fail(std::string(op_) + ": an output was not allocated by torch");
  }

  StableIValue* stack_;
  const char* op_;
  std::vector<DLTensor> views_;
  std::vector<AtenTensorHandle> owned_;
  DLPackManagedTensorAllocator previous_ = nullptr;
  int32_t device_ = 0;
  bool placed_ = false;  // device_ is known (from the first input tensor, else torch's current device)
  bool on_cuda_ = false;
};

/// Run `body` (the entry's call) with the library's errors as C++ exceptions torch reports.
template <typename F>
void guarded(F&& body) {
  try {
    body();
  } catch (const ::tvm::ffi::Error& e) {
    throw std::runtime_error(e.kind() + ": " + e.message());
  }
}

/// One op: its name, schema (as torch_ops.schema_of writes it) and kernel; `tensorless` ops serve
/// every dispatch key (no input tensor gives the dispatcher a CUDA key to pick).
struct Op {
  const char* name;
  const char* schema;
  Kernel kernel;
  bool tensorless;
};

/// Define and implement `ops` in namespace `ns` (CUDA and CPU; CompositeExplicitAutograd for
/// tensorless ops); the torch::Library objects live for the process, as torch requires.
inline int register_ops(const char* ns, const Op* ops, int n, char* error, size_t error_size) {
  auto say = [&](const std::string& m) {
    std::snprintf(error, error_size, "%s", m.c_str());
    return 1;
  };
  TorchLibraryHandle def = nullptr, cuda = nullptr, cpu = nullptr, any = nullptr;
  if (aoti_torch_library_init_fragment(ns, __FILE__, __LINE__, &def) != AOTI_TORCH_SUCCESS ||
      aoti_torch_library_init_impl(ns, "CUDA", __FILE__, __LINE__, &cuda) != AOTI_TORCH_SUCCESS ||
      aoti_torch_library_init_impl(ns, "CPU", __FILE__, __LINE__, &cpu) != AOTI_TORCH_SUCCESS ||
      aoti_torch_library_init_impl(ns, "CompositeExplicitAutograd", __FILE__, __LINE__, &any) != AOTI_TORCH_SUCCESS)
    return say(std::string("cannot open torch library fragment ") + ns);
  for (int i = 0; i < n; ++i) {
    std::string schema = std::string(ops[i].name) + ops[i].schema;
    if (aoti_torch_library_def(def, schema.c_str()) != AOTI_TORCH_SUCCESS) return say("cannot define " + schema);
    for (TorchLibraryHandle lib : ops[i].tensorless ? std::vector<TorchLibraryHandle>{any} : std::vector<TorchLibraryHandle>{cuda, cpu})
      if (torch_library_impl(lib, ops[i].name, ops[i].kernel, TORCH_TARGET_VERSION) != AOTI_TORCH_SUCCESS)
        return say(std::string("cannot implement ") + ns + "::" + ops[i].name);
  }
  return 0;
}

}  // namespace torch_native
}  // namespace tl_aot
