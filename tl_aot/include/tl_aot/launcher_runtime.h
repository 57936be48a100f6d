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
inline namespace v3 {  // v3: Entry and EntrySlot for table-driven checks

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

// Zero-initialised (so the slots of every entry take no room in the library file: .bss).
struct EntrySlot {
  std::atomic<int> loaded{0};  // 1 + the index into the entry's image table; 0 until loaded
  CUmodule module = nullptr;
  CUfunction kernels[kMaxKernels] = {};
  int64_t max_dynamic_smem[kMaxKernels] = {};  // what each kernel was allowed at load time
};

struct Library;
struct Checks;
struct Frame;
// Launches image `variant`'s kernels: one generated function per image of an entry.
using LaunchFn = void (*)(const Frame& x, const EntrySlot& slot, CUstream stream, int device, bool explicit_stream);

// An exported entry: its name, images and per-device slots; for calls, its library, argument
// checks (tables read by check_args) and one launch function per image.
struct Entry {
  const char* name;
  const Image* images;
  int num_images;
  EntrySlot* slots;  // kMaxDevices of them
  const Library* library = nullptr;
  const Checks* checks = nullptr;
  const LaunchFn* launches = nullptr;
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
  int v = entry.slots[device].loaded.load(std::memory_order_acquire);
  if (TL_AOT_UNLIKELY(v == 0)) {
    init_entry(lib, entry, device, arg, stream);
    v = entry.slots[device].loaded.load(std::memory_order_acquire);
  }
  return v - 1;
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

// ----------------------------------------------------------------------------------------------
// A call's arguments and the tables that check them. Each generated entry describes its
// parameters as constexpr data (which dims bind or must equal which value, dtypes, strides,
// alignment, how to read the TVM FFI arguments); one checker reads the tables, in the order the
// errors are reported: every input tensor, the devices, the symbols, the dims given by
// expressions, the outputs (allocated or checked), then data pointers and strides. Nothing is
// launched before every check passed; nothing here locks or builds a string unless it fails.
// ----------------------------------------------------------------------------------------------
union Scalar {
  int64_t i;  // integers and bool
  double f;   // float32 / float64
};

// One call's values: tensors (inputs, then outputs), their data, dynamic symbols, scalar
// parameters, outputs the call allocated. Storage is an entry's Args.
struct Frame {
  const DLTensor** t;
  void** p;
  int64_t* s;
  Scalar* a;
  ::tvm::ffi::Tensor* o;
};

// A frame's start (arrays zeroed, `no` empty outputs) and end (the outputs released): out of
// line, one call each instead of code inlined at every call site of every entry.
void start_frame(Frame& x, int nt, int ns, int na, int no);
void end_frame(Frame& x, int no);

// An entry's call storage: NT tensors, NS symbols, NA scalars, NO outputs.
template <int NT, int NS, int NA, int NO>
struct Args : Frame {
  Args() : Frame{t_, p_, s_, a_, reinterpret_cast<::tvm::ffi::Tensor*>(o_)} { start_frame(*this, NT, NS, NA, NO); }
  ~Args() { end_frame(*this, NO); }
  Args(const Args&) = delete;
  Args& operator=(const Args&) = delete;
  DLTensor dl[NT];  // the C++ API's tensors, viewed as DLTensors
  const DLTensor* t_[NT];
  void* p_[NT];
  int64_t s_[NS + 1];
  Scalar a_[NA + 1];
  alignas(::tvm::ffi::Tensor) unsigned char o_[sizeof(::tvm::ffi::Tensor) * (NO + 1)];
};

// A value the checker compares with: a constant, a symbol (slot n of Frame::s), or expression n
// of the entry's Checks::eval (over symbols and scalars, evaluated only when reached).
enum ValueKind : int8_t { kConst, kSymbol, kExpr };
struct Value {
  ValueKind kind;
  int64_t n;
};
using EvalFn = int64_t (*)(const Frame& x, int i);

// One dim of a tensor in its own check: not checked there (kSkip: a dim given by an expression,
// checked once every symbol is bound, or solved into a symbol), the binding of symbol value.n, or
// a value it must equal (`expected` then, for a symbol, its value and `source`, make the error).
enum DimKind : int8_t { kSkip, kBind, kEqual };
struct Dim {
  DimKind kind;
  Value value;
  const char* expected;
  const char* source;
};

// A DLPack dtype spelling a tensor may have (bool and float8 have two).
struct DType {
  uint8_t code;
  uint8_t bits;
};

struct TensorSpec {
  const char* name;
  int ndim;
  const char* shape;  // as errors show it: [m, 256]
  const char* dtype;  // float16
  DType dtypes[2];
  int num_dtypes;
  const Dim* dims;            // ndim of them
  const Value* strides;       // ndim of them; null: any strides
  const char* strides_shown;  // (256, 1)
  int alignment;              // bytes the data must be aligned to; 0: none
  DLDataType alloc_dtype;     // an output the call allocates: its dtype and shape
  const Value* alloc_shape;
  int alloc_ndim;
};

// A dynamic symbol: bound by a dim of tensor `tensor` (derive < 0) and checked in [1, max], or
// solved from that dim by expression `derive` and checked exact: the dim recomputed (`check`).
struct SymbolSpec {
  const char* name;
  int tensor;
  int dim;
  int64_t max;
  int derive;
  Value check;
  const char* expected;
};

// A dim given by an expression over the symbols: checked once every symbol is bound.
struct LateCheck {
  int tensor;
  int dim;
  Value value;
  const char* expected;
};

// How one TVM FFI argument is read: a tensor (into Frame::t[index]) or a scalar (Frame::a[index]),
// an integer in [lo, hi] of `dtype`, a float or a bool.
enum ArgKind : int8_t { kTensorArg, kIntArg, kFloatArg, kBoolArg };
struct ArgRead {
  const char* name;
  ArgKind kind;
  int index;
  int64_t lo;
  int64_t hi;
  const char* dtype;
};

// A call form: every parameter, or (for an entry with outputs) the inputs alone.
struct Form {
  const ArgRead* reads;
  int count;
  const char* names;  // as an argument-count error lists them
};

struct Checks {
  const TensorSpec* tensors;  // the inputs, then the outputs
  int num_tensors;
  int num_inputs;  // 0: no input tensor (the device is the current one, or the first output's)
  const SymbolSpec* symbols;
  int num_symbols;
  int num_scalars;
  const LateCheck* late;  // those of the inputs, then of the outputs
  int num_late_inputs;
  int num_late;
  EvalFn eval;  // null when no value is an expression
  Form every;
  Form inputs;    // inputs.reads null: no outputs, one form
  int decide_at;  // where a call of inputs + 1 arguments shows its form (see returns_outputs)
  bool decide_tensor;
};

// Check every argument of a call of `e` (with `alloc`, allocate its outputs); returns the device.
int check_args(const Entry& e, Frame& x, bool alloc);
// Which form a TVM FFI call takes (true: the inputs alone, outputs returned); `name` for errors.
bool call_form(const Entry& e, const ::tvm::ffi::AnyView* a, int32_t num_args, const char* name);
// Check, pick the stream, load on first use and launch the image for the device.
void run(const Entry& e, Frame& x, const ::tvm::ffi::AnyView* stream_view, bool has_stream, void* stream, bool alloc);
// A TVM FFI call of `e` in the given form: reads the arguments, runs, sets the result.
void invoke(const Entry& e, Frame& x, const ::tvm::ffi::AnyView* a, int32_t num_args, TVMFFIAny* result, bool alloc);

// The same on a frame of its own (on the stack; on the heap past 16 tensors, symbols or scalars).
void invoke(const Entry& e, const ::tvm::ffi::AnyView* a, int32_t num_args, TVMFFIAny* result, bool alloc);

// A TVM FFI function's body: runs `fn` on `ctx`, an error becoming the call's (the safe-call
// convention). `fn` is call_entry for an entry (`ctx` the Entry), or a picker's invoke.
using FfiFn = void (*)(const void* ctx, const ::tvm::ffi::AnyView* a, int32_t num_args, TVMFFIAny* result);
int safe_call(FfiFn fn, const void* ctx, const TVMFFIAny* raw, int32_t num_args, TVMFFIAny* result);
// The exported call of an entry without specialisations (`entry`, an Entry): its form, then invoke.
void call_entry(const void* entry, const ::tvm::ffi::AnyView* a, int32_t num_args, TVMFFIAny* result);

// The C++ API's tensor `v`, viewed in `dl`.
const DLTensor* view(const ::tvm::ffi::TensorView& v, DLTensor* dl);

// The library-wide exports (TVM FFI cleanup_module, tl_aot_prepare, tl_aot_manifest).
int ffi_cleanup(const Library& lib, int32_t num_args, TVMFFIAny* result);
int ffi_prepare(const Library& lib, const TVMFFIAny* raw, int32_t num_args, TVMFFIAny* result);
int ffi_manifest(const char* json, TVMFFIAny* result);
// "" when this machine's NVIDIA driver can load the library (or there is none), else why not: tl_aot.load asks.
int ffi_driver_check(const Library& lib, TVMFFIAny* result);

}  // namespace v3
}  // namespace rt
}  // namespace tl_aot

// TVM FFI export `name` of a library, calling `fn` (an FfiFn) on `ctx`. `name` is only pasted
// (##), never expanded, so an entry named like a macro keeps its name.
#define TL_AOT_EXPORT(name, fn, ctx)                                                                \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_##name(void*, const TVMFFIAny* raw, int32_t num_args, \
                                                     TVMFFIAny* result) {                           \
    return ::tl_aot::rt::safe_call(fn, ctx, raw, num_args, result);                                 \
  }

// What every library defines besides its entries: the TVM FFI exports cleanup_module,
// tl_aot_prepare and tl_aot_manifest, and the C++ API's cleanup_module(), prepare() and manifest()
// in namespace tl_aot::<lib>. `library` is the rt::Library, `json` the manifest's text.
// clang-format off: one short definition a line
#define TL_AOT_DEFINE_LIBRARY(lib, library, json)                                                                    \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_cleanup_module(void*, const TVMFFIAny*, int32_t num_args,              \
                                                             TVMFFIAny* result) {                                    \
    return ::tl_aot::rt::ffi_cleanup(library, num_args, result);                                                     \
  }                                                                                                                  \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tl_aot_prepare(void*, const TVMFFIAny* raw, int32_t num_args,          \
                                                             TVMFFIAny* result) {                                    \
    return ::tl_aot::rt::ffi_prepare(library, raw, num_args, result);                                                \
  }                                                                                                                  \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tl_aot_manifest(void*, const TVMFFIAny*, int32_t, TVMFFIAny* result) { \
    return ::tl_aot::rt::ffi_manifest(json, result);                                                                 \
  }                                                                                                                  \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tl_aot_driver_check(void*, const TVMFFIAny*, int32_t,                 \
                                                                  TVMFFIAny* result) {                               \
    return ::tl_aot::rt::ffi_driver_check(library, result);                                                          \
  }                                                                                                                  \
  namespace tl_aot {                                                                                                 \
  namespace lib {                                                                                                    \
  int cleanup_module() { return ::tl_aot::rt::cleanup(library); }                                                    \
  void prepare(int device) { ::tl_aot::rt::prepare(library, device); }                                               \
  const char* manifest() { return json; }                                                                            \
  }                                                                                                                  \
  }
// clang-format on

#endif  // TL_AOT_LAUNCHER_RUNTIME_H_
