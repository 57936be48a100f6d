// tl_aot launcher runtime: the fixed part of every generated kernel library.
//
// Driver loading (dlopen + cuGetProcAddress, never linked), per-device state (a retained primary
// context, a module and kernel table per entry), image selection, find_kernel_by_pattern,
// cleanup, argument checks, TMA encoding, workspaces from the environment allocator, L2 windows
// and launches. Generated code holds only the per-entry part and calls this API. Every symbol is
// hidden (compiled with -fvisibility=hidden, in a versioned inline namespace), so two tl_aot
// libraries in one process never share state or symbols.
#ifndef TL_AOT_LAUNCHER_RUNTIME_H_
#define TL_AOT_LAUNCHER_RUNTIME_H_

#include <cuda.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#define TL_AOT_LIKELY(x) __builtin_expect(!!(x), 1)
#define TL_AOT_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace tl_aot {
namespace rt {
inline namespace v2 {

constexpr int kMaxDevices = 64;
constexpr int kMaxKernels = 16;  // device kernels one entry may launch

// ----------------------------------------------------------------------------------------------
// Errors: every message names the entry and, for bad arguments, the argument, expected and got.
// ----------------------------------------------------------------------------------------------
[[noreturn]] void fail(const char* kind, const std::string& msg);
[[noreturn]] void bad_arg(const char* kind, const char* entry, const char* arg, const std::string& expected,
                          const std::string& got);
[[noreturn]] void bad_alignment(const char* entry, const char* arg, const void* p, int align);
[[noreturn]] void bad_dim(const char* entry, const char* arg, const char* expected, const DLTensor* t);
[[noreturn]] void bad_dim_from(const char* entry, const char* arg, const char* expected, int64_t value,
                               const char* source, const DLTensor* t);
[[noreturn]] void bad_ndim(const char* entry, const char* arg, int ndim, const char* shape, const DLTensor* t);
[[noreturn]] void bad_dtype(const char* entry, const char* arg, const char* dtype, const DLTensor* t);
[[noreturn]] void bad_device(const char* entry, const char* arg, const char* first, int device, const DLTensor* t);
[[noreturn]] void bad_symbol(const char* entry, const char* arg, int dim, const char* symbol, int64_t max,
                             const DLTensor* t);
[[noreturn]] void bad_strides(const char* entry, const char* arg, const char* strides, const DLTensor* t);
[[noreturn]] void bad_arg_count(const char* entry, int expected, const char* names, int got);
[[noreturn]] void bad_arg_count_outputs(const char* entry, const char* inputs, const char* all, int got);
// No specialisation of `entry` matches the input tensors t[0..n) (named `names`); `built` lists them.
[[noreturn]] void no_specialisation(const char* entry, const DLTensor* const* t, const char* const* names, int n,
                                    const char* built);
std::string shape_str(const DLTensor* t);

// ----------------------------------------------------------------------------------------------
// The CUDA driver API, resolved at run time.
// ----------------------------------------------------------------------------------------------
struct Driver {
  bool ok = false;
  std::string error;
  decltype(&::cuInit) Init = nullptr;
  decltype(&::cuDeviceGetCount) DeviceGetCount = nullptr;
  decltype(&::cuDeviceGet) DeviceGet = nullptr;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) PrimaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) PrimaryCtxRelease = nullptr;
  decltype(&::cuCtxGetCurrent) CtxGetCurrent = nullptr;
  decltype(&::cuCtxGetDevice) CtxGetDevice = nullptr;
  decltype(&::cuCtxPushCurrent) CtxPushCurrent = nullptr;
  decltype(&::cuCtxPopCurrent) CtxPopCurrent = nullptr;
  decltype(&::cuCtxSetLimit) CtxSetLimit = nullptr;
  decltype(&::cuCtxGetLimit) CtxGetLimit = nullptr;
  decltype(&::cuCtxResetPersistingL2Cache) CtxResetPersistingL2Cache = nullptr;
  decltype(&::cuModuleLoadData) ModuleLoadData = nullptr;
  decltype(&::cuModuleUnload) ModuleUnload = nullptr;
  decltype(&::cuModuleGetFunction) ModuleGetFunction = nullptr;
  decltype(&::cuModuleGetFunctionCount) ModuleGetFunctionCount = nullptr;
  decltype(&::cuModuleEnumerateFunctions) ModuleEnumerateFunctions = nullptr;
  decltype(&::cuFuncGetName) FuncGetName = nullptr;
  decltype(&::cuFuncGetAttribute) FuncGetAttribute = nullptr;
  decltype(&::cuFuncSetAttribute) FuncSetAttribute = nullptr;
  decltype(&::cuLaunchKernel) LaunchKernel = nullptr;
  decltype(&::cuLaunchKernelEx) LaunchKernelEx = nullptr;
  decltype(&::cuTensorMapEncodeTiled) TensorMapEncodeTiled = nullptr;
  decltype(&::cuTensorMapEncodeIm2col) TensorMapEncodeIm2col = nullptr;
  decltype(&::cuStreamIsCapturing) StreamIsCapturing = nullptr;
  decltype(&::cuStreamSetAttribute) StreamSetAttribute = nullptr;
  decltype(&::cuStreamSynchronize) StreamSynchronize = nullptr;
  decltype(&::cuGetErrorName) GetErrorName = nullptr;
  decltype(&::cuGetErrorString) GetErrorString = nullptr;
};

// The process's driver, loaded once (thread-safe). `ok` is false with `error` set when there is none.
Driver& driver();
// The CUDA version the installed driver supports (cuDriverGetVersion: 12040 for 12.4), read without
// cuInit; 0 without a driver. TL_AOT_TESTING_DRIVER_VERSION (e.g. "12040" or "12.4") replaces it: for
// tests of the check below only, never a way to run a library on a driver that cannot load it.
int driver_version();
// Tests: replace the driver (fake functions); call before any other runtime function.
void set_driver_for_testing(const Driver& d);
std::string cu_error(CUresult r);
[[noreturn]] void fail_cu(const char* entry, const std::string& what, CUresult r);

// ----------------------------------------------------------------------------------------------
// Per-device and per-entry state.
// ----------------------------------------------------------------------------------------------
struct DeviceSlot {
  CUcontext ctx = nullptr;
  int major = 0;
  int minor = 0;
  int smem_optin = 0;         // bytes of shared memory a block may opt in to
  int l2_max_persisting = 0;  // bytes of L2 that may be set aside for persisting accesses
  int l2_max_window = 0;      // largest access-policy window
};

// One embedded image of an entry and what its kernels need.
struct Image {
  const char* data;
  const char* arch;  // sm_90a
  int major;
  int minor;
  bool arch_specific;  // sm_90a / sm_100a: runs only on exactly this compute capability
  bool ptx;            // carries PTX the driver can JIT for newer devices
  int num_kernels;
  const char* const* kernel_names;
  const int64_t* dynamic_smem;  // bytes per kernel; -1 when known only per call
  const int* cluster_size;
};

struct EntrySlot {
  std::atomic<int> variant{-1};  // index into the entry's image table; -1 until loaded
  CUmodule module = nullptr;
  CUfunction kernels[kMaxKernels] = {};
  int64_t max_dynamic_smem[kMaxKernels] = {};  // what each kernel was allowed at load time
};

// An exported entry: its name, images and per-device slots.
struct Entry {
  const char* name;
  const Image* images;
  int num_images;
  EntrySlot* slots;  // kMaxDevices of them
};

// The library: every entry, for prepare and cleanup, and the oldest driver that loads it.
struct Library {
  const char* name;
  const Entry* const* entries;
  int num_entries;
  int min_driver = 0;              // as cuDriverGetVersion reports it: 13000 for CUDA 13.0 (0: no floor)
  const char* min_driver_version = "";  // the same as a Linux driver version, "580.65.06" ("" if unknown)
  const char* built_with = "";          // the compiler that made the images, "nvcc 13.0.88 from pip (...)"
};

// "" when this machine's driver loads `lib` (or there is no driver); else the one message saying
// which driver it needs and the two ways out (an older-CUDA build, a driver update).
std::string driver_too_old(const Library& lib);

extern DeviceSlot g_devices[kMaxDevices];

int select_image(const Image* images, int n, int major, int minor);
CUresult find_kernel_by_pattern(CUmodule module, const char* pattern, CUfunction* out, std::string* why);

// Load `entry`'s image on `device` (first call per device). `arg` names the tensor that chose the
// device; `stream` is the call's (a first call under CUDA graph capture fails cleanly).
void init_entry(const Library& lib, const Entry& entry, int device, const char* arg, CUstream stream,
                bool prepare = false);

// The entry's slot on `device`, loaded on first use: the steady path reads one atomic.
inline int loaded_variant(const Library& lib, const Entry& entry, int device, const char* arg, CUstream stream) {
  int v = entry.slots[device].variant.load(std::memory_order_acquire);
  if (TL_AOT_UNLIKELY(v < 0)) {
    init_entry(lib, entry, device, arg, stream);
    v = entry.slots[device].variant.load(std::memory_order_acquire);
  }
  return v;
}

void prepare(const Library& lib, int device);
int cleanup(const Library& lib);
[[noreturn]] void not_loaded(const char* entry, int device);

// Makes `ctx` current for the scope if it is not already.
class ContextGuard {
 public:
  ContextGuard(const char* entry, CUcontext ctx);
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;

 private:
  bool pushed_ = false;
};

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

// ----------------------------------------------------------------------------------------------
// TMA descriptors, encoded on the host per call and passed by value.
// ----------------------------------------------------------------------------------------------
void check_tma_operand(const char* entry, const char* arg, const void* ptr, const int64_t* strides, int n);
void encode_tiled(const char* entry, const char* arg, CUtensorMap* out, int dtype, int rank, void* addr,
                  const cuuint64_t* dims, const int64_t* byte_strides, const cuuint32_t* box, const cuuint32_t* estr,
                  int interleave, int swizzle, int l2, int oob);
void encode_im2col(const char* entry, const char* arg, CUtensorMap* out, int dtype, int rank, void* addr,
                   const cuuint64_t* dims, const int64_t* byte_strides, const int* lower, const int* upper,
                   unsigned channels, unsigned pixels, const cuuint32_t* estr, int interleave, int swizzle, int l2,
                   int oob);

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
void* alloc_output(const char* entry, const char* name, std::initializer_list<int64_t> shape, DLDataType dtype, int device,
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

// ----------------------------------------------------------------------------------------------
// L2 persisting window around one launch (T.annotate_l2_hit_ratio), clamped to the device.
// ----------------------------------------------------------------------------------------------
class L2Window {
 public:
  L2Window(const char* entry, CUstream s, void* base, int64_t bytes, float hit, const DeviceSlot& ds);
  ~L2Window();
  L2Window(const L2Window&) = delete;
  L2Window& operator=(const L2Window&) = delete;

 private:
  CUstream stream_;
  size_t old_limit_ = 0;
  bool active_ = false;
};

// ----------------------------------------------------------------------------------------------
// Integer helpers for expressions TileLang's lowering emits (floor division and modulo, bit operations).
// ----------------------------------------------------------------------------------------------
inline int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t floormod(int64_t a, int64_t b) { return a - floordiv(a, b) * b; }
template <typename T>
inline T min(T a, T b) {
  return a < b ? a : b;
}
template <typename T>
inline T max(T a, T b) {
  return a < b ? b : a;
}

// Bit operations of a TIR integer dtype T (int32_t, uint64_t, ...) on the launcher's int64_t values:
// computed in T's width, two's complement, as TileLang's host code computes them. A shift by an
// amount outside [0, bits of T) gives 0 (-1 for a right shift of a negative value), not C's UB.
template <typename T>
inline int64_t narrow(int64_t a) {
  return static_cast<int64_t>(static_cast<T>(a));
}
template <typename T>
inline int64_t shl(int64_t a, int64_t b) {
  using U = std::make_unsigned_t<T>;
  if (b < 0 || b >= static_cast<int64_t>(sizeof(T) * 8)) return 0;
  return narrow<T>(static_cast<U>(static_cast<U>(a) << b));
}
template <typename T>
inline int64_t shr(int64_t a, int64_t b) {
  const T v = static_cast<T>(a);
  if (b < 0 || b >= static_cast<int64_t>(sizeof(T) * 8)) {
    if constexpr (std::is_signed_v<T>) return v < 0 ? -1 : 0;
    return 0;
  }
  return narrow<T>(v >> b);
}
template <typename T>
inline int64_t bit_and(int64_t a, int64_t b) {
  return narrow<T>(static_cast<T>(a) & static_cast<T>(b));
}
template <typename T>
inline int64_t bit_or(int64_t a, int64_t b) {
  return narrow<T>(static_cast<T>(a) | static_cast<T>(b));
}
template <typename T>
inline int64_t bit_xor(int64_t a, int64_t b) {
  return narrow<T>(static_cast<T>(a) ^ static_cast<T>(b));
}
template <typename T>
inline int64_t bit_not(int64_t a) {
  return narrow<T>(~static_cast<T>(a));
}
// Leading zero bits in T's width (all of them for 0) and set bits.
template <typename T>
inline int64_t clz(int64_t a) {
  constexpr int bits = static_cast<int>(sizeof(T) * 8);
  const uint64_t u = static_cast<std::make_unsigned_t<T>>(a);
  return u == 0 ? bits : __builtin_clzll(u) - (64 - bits);
}
template <typename T>
inline int64_t popcount(int64_t a) {
  return __builtin_popcountll(static_cast<std::make_unsigned_t<T>>(a));
}

// DLTensor view of a TensorView (the C++ API takes TensorViews).
inline DLTensor as_dltensor(const ::tvm::ffi::TensorView& v) {
  DLTensor t;
  t.data = v.data_ptr();
  t.device = v.device();
  t.ndim = static_cast<int32_t>(v.ndim());
  t.dtype = v.dtype();
  t.shape = const_cast<int64_t*>(v.shape().data());
  t.strides = const_cast<int64_t*>(v.strides().data());
  t.byte_offset = v.byte_offset();
  return t;
}

}  // namespace v2
}  // namespace rt
}  // namespace tl_aot

#endif  // TL_AOT_LAUNCHER_RUNTIME_H_
