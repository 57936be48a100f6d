// tl_aot launcher runtime: see launcher_runtime.h. Compiled once per toolchain and tl_aot
// version, then linked into every library with hidden visibility.
#include "tl_aot/launcher_runtime.h"

#include <dlfcn.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <sstream>
#include <type_traits>
#include <utility>
#include <vector>

namespace tl_aot {
namespace rt {
inline namespace v3 {  // v3: Entry and EntrySlot for table-driven checks

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

std::string shape_str(const DLTensor* t) {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < t->ndim; ++i) os << (i ? ", " : "") << t->shape[i];
  os << "]";
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

void bad_dim(const char* entry, const char* arg, const char* expected, const DLTensor* t) {
  bad_arg("ValueError", entry, arg, std::string("shape ") + expected, shape_str(t));
}

void bad_dim_from(const char* entry, const char* arg, const char* expected, int64_t value, const char* source,
                  const DLTensor* t) {
  bad_arg("ValueError", entry, arg, std::string("shape ") + expected + std::to_string(value) + source, shape_str(t));
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

void bad_symbol(const char* entry, const char* arg, int dim, const char* symbol, int64_t max, const DLTensor* t) {
  bad_arg("ValueError", entry, arg,
          "dim " + std::to_string(dim) + " ('" + symbol + "') in [1, " + std::to_string(max) + "]", shape_str(t));
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

// ------------------------------------------------------------------------------------------------
// Driver
// ------------------------------------------------------------------------------------------------
using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

static void load_real_driver(Driver& d) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    d.error = std::string("cannot load the NVIDIA driver library libcuda.so.1 (") + (why ? why : "not found") +
              "): this machine has no NVIDIA driver, or it is not on the loader path";
    return;
  }
  auto gpa = reinterpret_cast<GetProcAddressFn>(dlsym(lib, "cuGetProcAddress_v2"));
  if (gpa == nullptr) {
    d.error = "the NVIDIA driver is too old: cuGetProcAddress_v2 is missing (a CUDA 12 driver or newer is needed)";
    return;
  }
  std::string missing;
  auto get = [&](const char* name, auto& fn, int version, bool required) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult q;
    if (gpa(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS) p = nullptr;
    if (p == nullptr && required) missing += std::string(missing.empty() ? "" : ", ") + name;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  get("cuInit", d.Init, 12000, true);
  get("cuDeviceGetCount", d.DeviceGetCount, 12000, true);
  get("cuDeviceGet", d.DeviceGet, 12000, true);
  get("cuDeviceGetAttribute", d.DeviceGetAttribute, 12000, true);
  get("cuDevicePrimaryCtxRetain", d.PrimaryCtxRetain, 12000, true);
  get("cuDevicePrimaryCtxRelease", d.PrimaryCtxRelease, 12000, true);
  get("cuCtxGetCurrent", d.CtxGetCurrent, 12000, true);
  get("cuCtxGetDevice", d.CtxGetDevice, 12000, true);
  get("cuCtxPushCurrent", d.CtxPushCurrent, 12000, true);
  get("cuCtxPopCurrent", d.CtxPopCurrent, 12000, true);
  get("cuCtxSetLimit", d.CtxSetLimit, 12000, true);
  get("cuCtxGetLimit", d.CtxGetLimit, 12000, true);
  get("cuCtxResetPersistingL2Cache", d.CtxResetPersistingL2Cache, 12000, true);
  get("cuModuleLoadData", d.ModuleLoadData, 12000, true);
  get("cuModuleUnload", d.ModuleUnload, 12000, true);
  get("cuModuleGetFunction", d.ModuleGetFunction, 12000, true);
  get("cuModuleGetFunctionCount", d.ModuleGetFunctionCount, 12040, false);
  get("cuModuleEnumerateFunctions", d.ModuleEnumerateFunctions, 12040, false);
  get("cuFuncGetName", d.FuncGetName, 12030, false);
  get("cuFuncGetAttribute", d.FuncGetAttribute, 12000, true);
  get("cuFuncSetAttribute", d.FuncSetAttribute, 12000, true);
  get("cuLaunchKernel", d.LaunchKernel, 12000, true);
  get("cuLaunchKernelEx", d.LaunchKernelEx, 12000, true);
  get("cuTensorMapEncodeTiled", d.TensorMapEncodeTiled, 12000, true);
  get("cuTensorMapEncodeIm2col", d.TensorMapEncodeIm2col, 12000, true);
  get("cuStreamIsCapturing", d.StreamIsCapturing, 12000, true);
  get("cuStreamSetAttribute", d.StreamSetAttribute, 12000, true);
  get("cuStreamSynchronize", d.StreamSynchronize, 12000, true);
  get("cuGetErrorName", d.GetErrorName, 12000, true);
  get("cuGetErrorString", d.GetErrorString, 12000, true);
  if (!missing.empty()) {
    d.error = "the NVIDIA driver lacks " + missing + " (a CUDA 12 driver or newer is needed)";
    return;
  }
  CUresult r = d.Init(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    d.GetErrorName(r, &name);
    d.error = std::string("cuInit failed: ") + (name ? name : "unknown error") +
              " (is a GPU visible to this process? check CUDA_VISIBLE_DEVICES and the driver)";
    return;
  }
  d.ok = true;
}

static Driver g_driver;
static std::once_flag g_driver_once;

Driver& driver() {
  std::call_once(g_driver_once, [] { load_real_driver(g_driver); });
  return g_driver;
}

void set_driver_for_testing(const Driver& d) {
  std::call_once(g_driver_once, [] {});
  g_driver = d;
}

static int read_driver_version() {
  if (const char* fake = std::getenv("TL_AOT_TESTING_DRIVER_VERSION")) {  // tests only: see the header
    const char* dot = std::strchr(fake, '.');
    return dot ? std::atoi(fake) * 1000 + std::atoi(dot + 1) * 10 : std::atoi(fake);
  }
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return 0;
  using GetVersionFn = CUresult (*)(int*);
  auto get = reinterpret_cast<GetVersionFn>(dlsym(lib, "cuDriverGetVersion"));
  int v = 0;
  if (get == nullptr || get(&v) != CUDA_SUCCESS) v = 0;
  dlclose(lib);  // the driver() path opens it again (a reference count: nothing is unloaded while used)
  return v;
}

int driver_version() {
  static const int version = read_driver_version();
  return version;
}

static std::string cuda_str(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

std::string driver_too_old(const Library& lib) {
  int have = driver_version();
  if (have <= 0 || have >= lib.min_driver) return "";
  std::string need = cuda_str(lib.min_driver);
  std::string driver = lib.min_driver_version[0] ? std::string(lib.min_driver_version) : "one supporting CUDA " + need;
  std::string older = lib.min_driver >= 13000
                          ? "pip install 'tl_aot[build-cu12]' (CUDA 12: loads on drivers >= 525.60.13) and rebuild"
                          : "rebuild with an older CUDA, or without +PTX archs (a cubin loads on any driver of its CUDA major)";
  return std::string("library ") + lib.name + " was built with " + lib.built_with +
         " and needs an NVIDIA driver supporting CUDA " + need + " or newer; this machine's driver supports CUDA " +
         cuda_str(have) + ". Either " + older + ", or update the NVIDIA driver to " + driver + " or newer.";
}

std::string cu_error(CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  Driver& d = driver();
  if (d.GetErrorName) d.GetErrorName(r, &name);
  if (d.GetErrorString) d.GetErrorString(r, &text);
  return std::string(name ? name : "CUDA error") + " (" + std::to_string(static_cast<int>(r)) + ": " +
         (text ? text : "unknown") + ")";
}

void fail_cu(const char* entry, const std::string& what, CUresult r) {
  fail("RuntimeError", std::string(entry) + ": " + what + " failed: " + cu_error(r));
}

// ------------------------------------------------------------------------------------------------
// Per-device state
// ------------------------------------------------------------------------------------------------
static std::mutex g_mutex;
DeviceSlot g_devices[kMaxDevices];

// An exact match, else SASS of the same major from an older minor (binary compatible), else the
// newest PTX not newer than the device.
int select_image(const Image* images, int n, int major, int minor) {
  for (int i = 0; i < n; ++i)
    if (images[i].major == major && images[i].minor == minor) return i;
  int best = -1;
  for (int i = 0; i < n; ++i)
    if (!images[i].arch_specific && images[i].major == major && images[i].minor <= minor &&
        (best < 0 || images[i].minor > images[best].minor))
      best = i;
  if (best >= 0) return best;
  for (int i = 0; i < n; ++i) {
    int cc = images[i].major * 10 + images[i].minor;
    if (images[i].ptx && cc <= major * 10 + minor && (best < 0 || cc > images[best].major * 10 + images[best].minor))
      best = i;
  }
  return best;
}

// Exact name first; else a unique substring match, where a base name wins over its _N variants;
// ambiguity is an error listing every match.
CUresult find_kernel_by_pattern(CUmodule module, const char* pattern, CUfunction* out, std::string* why) {
  Driver& d = driver();
  if (d.ModuleGetFunction(out, module, pattern) == CUDA_SUCCESS) return CUDA_SUCCESS;
  if (!d.ModuleGetFunctionCount || !d.ModuleEnumerateFunctions || !d.FuncGetName) {
    *why = std::string("kernel '") + pattern + "' not found (this driver cannot enumerate module functions)";
    return CUDA_ERROR_NOT_FOUND;
  }
  unsigned int count = 0;
  CUresult r = d.ModuleGetFunctionCount(&count, module);
  if (r != CUDA_SUCCESS) return r;
  std::vector<CUfunction> funcs(count);
  r = d.ModuleEnumerateFunctions(funcs.data(), count, module);
  if (r != CUDA_SUCCESS) return r;
  std::vector<std::pair<std::string, CUfunction>> base, variants;
  size_t plen = std::strlen(pattern);
  for (CUfunction f : funcs) {
    const char* name = nullptr;
    if (d.FuncGetName(&name, f) != CUDA_SUCCESS || name == nullptr) continue;
    std::string s(name);
    size_t pos = s.find(pattern);
    if (pos == std::string::npos) continue;
    size_t after = pos + plen;
    bool is_variant = after + 1 < s.size() && s[after] == '_' && s[after + 1] >= '0' && s[after + 1] <= '9';
    (is_variant ? variants : base).emplace_back(s, f);
  }
  auto& pick = base.empty() ? variants : base;
  if (pick.size() == 1) {
    *out = pick[0].second;
    return CUDA_SUCCESS;
  }
  if (pick.empty()) {
    *why = std::string("no kernel in the module matches '") + pattern + "'";
  } else {
    *why = std::string("kernel pattern '") + pattern + "' is ambiguous; it matches:";
    for (auto& m : pick) *why += " " + m.first;
  }
  return CUDA_ERROR_NOT_FOUND;
}

static std::string built_archs(const Image* images, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += std::string(i ? ", " : "") + images[i].arch + (images[i].ptx ? "+PTX" : "");
  return s;
}

// Retain the primary context of `device`, named by argument `arg` (caller holds g_mutex).
static DeviceSlot& device_slot(const char* entry, int device, const char* arg) {
  Driver& d = driver();
  DeviceSlot& ds = g_devices[device];
  if (ds.ctx != nullptr) return ds;
  int count = 0;
  CUresult r = d.DeviceGetCount(&count);
  if (r != CUDA_SUCCESS) fail_cu(entry, "cuDeviceGetCount", r);
  if (device >= count)
    bad_arg("ValueError", entry, arg,
            "a visible CUDA device (" + std::to_string(count) + " visible; check CUDA_VISIBLE_DEVICES)",
            "cuda:" + std::to_string(device));
  CUdevice dev;
  r = d.DeviceGet(&dev, device);
  if (r != CUDA_SUCCESS) fail_cu(entry, "cuDeviceGet", r);
  DeviceSlot s;
  d.DeviceGetAttribute(&s.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  d.DeviceGetAttribute(&s.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  d.DeviceGetAttribute(&s.smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev);
  d.DeviceGetAttribute(&s.l2_max_persisting, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, dev);
  d.DeviceGetAttribute(&s.l2_max_window, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, dev);
  r = d.PrimaryCtxRetain(&s.ctx, dev);
  if (r != CUDA_SUCCESS) fail_cu(entry, "cuDevicePrimaryCtxRetain on cuda:" + std::to_string(device), r);
  ds = s;
  return ds;
}

ContextGuard::ContextGuard(const char* entry, CUcontext ctx) {
  Driver& d = driver();
  CUcontext cur = nullptr;
  d.CtxGetCurrent(&cur);
  if (TL_AOT_UNLIKELY(cur != ctx)) {
    CUresult r = d.CtxPushCurrent(ctx);
    if (r != CUDA_SUCCESS) fail_cu(entry, "cuCtxPushCurrent", r);
    pushed_ = true;
  }
}

ContextGuard::~ContextGuard() {
  if (pushed_) {
    CUcontext popped;
    driver().CtxPopCurrent(&popped);
  }
}

// Shared memory: every kernel that uses dynamic shared memory may use, on top of its static
// shared memory, what it needs (known size) or whatever the device allows (size known per call).
// The default without the attribute is 48 KiB of static + dynamic, which a kernel with exactly
// 48 KiB of dynamic plus a few barriers in static shared memory already exceeds.
static CUresult allow_smem(const char* entry, const Image& img, int k, CUfunction fn, const DeviceSlot& ds, int device,
                           int64_t* allowed) {
  Driver& d = driver();
  int64_t dyn = img.dynamic_smem[k];
  *allowed = 0;
  if (dyn == 0) return CUDA_SUCCESS;
  int static_bytes = 0;
  CUresult r = d.FuncGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn);
  if (r != CUDA_SUCCESS) return r;
  int64_t room = static_cast<int64_t>(ds.smem_optin) - static_bytes;
  if (dyn > 0 && dyn > room)
    fail("RuntimeError", std::string(entry) + ": kernel " + img.kernel_names[k] + " needs " +
                             std::to_string(dyn + static_bytes) + " bytes of shared memory (" + std::to_string(dyn) +
                             " dynamic + " + std::to_string(static_bytes) + " static) but cuda:" +
                             std::to_string(device) + " (sm_" + std::to_string(ds.major) + std::to_string(ds.minor) +
                             ") allows a block at most " + std::to_string(ds.smem_optin) +
                             "; rebuild for this GPU with smaller tiles or fewer pipeline stages");
  *allowed = dyn > 0 ? dyn : (room > 0 ? room : 0);
  return d.FuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(*allowed));
}

void init_entry(const Library& lib, const Entry& entry, int device, const char* arg, CUstream stream, bool prepare) {
  Driver& d = driver();
  const char* name = entry.name;
  std::string old_driver = driver_too_old(lib);
  if (!old_driver.empty()) fail("RuntimeError", std::string(name) + ": " + old_driver);
  if (!d.ok) fail("RuntimeError", std::string(name) + ": " + d.error);
  std::lock_guard<std::mutex> lock(g_mutex);
  EntrySlot& slot = entry.slots[device];
  if (slot.loaded.load(std::memory_order_acquire) != 0) return;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!prepare && d.StreamIsCapturing(stream, &capture) == CUDA_SUCCESS && capture != CU_STREAM_CAPTURE_STATUS_NONE)
    fail("RuntimeError", std::string(name) + ": first call on cuda:" + std::to_string(device) +
                             " happened during CUDA graph capture, where loading a module is not allowed; call " +
                             "the function once, or " + lib.name + "'s tl_aot_prepare(" + std::to_string(device) +
                             ") (Library.prepare), before capturing");
  DeviceSlot& ds = device_slot(name, device, arg);
  int v = select_image(entry.images, entry.num_images, ds.major, ds.minor);
  if (v < 0) {
    if (prepare) return;
    fail("RuntimeError", std::string(name) + ": no kernel image fits cuda:" + std::to_string(device) + " (sm_" +
                             std::to_string(ds.major) + std::to_string(ds.minor) + "); " + lib.name +
                             " was built for " + built_archs(entry.images, entry.num_images) + ". Rebuild with --arch " +
                             std::to_string(ds.major) + std::to_string(ds.minor) + (ds.major >= 9 ? "a" : ""));
  }
  ContextGuard guard(name, ds.ctx);
  const Image& img = entry.images[v];
  CUmodule module = nullptr;
  CUresult r = d.ModuleLoadData(&module, img.data);
  if (r != CUDA_SUCCESS) fail_cu(name, std::string("loading the ") + img.arch + " image on cuda:" + std::to_string(device), r);
  for (int k = 0; k < img.num_kernels; ++k) {
    std::string why;
    CUfunction fn = nullptr;
    int64_t allowed = 0;
    try {
      r = find_kernel_by_pattern(module, img.kernel_names[k], &fn, &why);
      if (r == CUDA_SUCCESS) r = allow_smem(name, img, k, fn, ds, device, &allowed);
      if (r == CUDA_SUCCESS && img.cluster_size[k] > 8)
        r = d.FuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
    } catch (...) {
      d.ModuleUnload(module);
      throw;
    }
    if (r != CUDA_SUCCESS) {
      d.ModuleUnload(module);
      fail("RuntimeError", std::string(name) + ": preparing kernel " + img.kernel_names[k] + " on cuda:" +
                               std::to_string(device) + " failed: " + (why.empty() ? cu_error(r) : why));
    }
    slot.kernels[k] = fn;
    slot.max_dynamic_smem[k] = allowed;
  }
  slot.module = module;
  slot.loaded.store(v + 1, std::memory_order_release);
}

void prepare(const Library& lib, int device) {
  if (device < 0 || device >= kMaxDevices)
    bad_arg("ValueError", "tl_aot_prepare", "device", "a device id in [0, " + std::to_string(kMaxDevices) + ")",
            std::to_string(device));
  std::string old_driver = driver_too_old(lib);
  if (!old_driver.empty()) fail("RuntimeError", "tl_aot_prepare: " + old_driver);
  Driver& d = driver();
  if (!d.ok) fail("RuntimeError", std::string("tl_aot_prepare: ") + d.error);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    device_slot("tl_aot_prepare", device, "device");  // an invalid device is reported as such
  }
  for (int i = 0; i < lib.num_entries; ++i) {
    const Entry& e = *lib.entries[i];
    if (e.slots[device].loaded.load(std::memory_order_acquire) == 0)
      init_entry(lib, e, device, "device", nullptr, true);
  }
}

// Unload every module, release every retained primary context (even if an unload failed), clear
// all state and return the last error (0 when all went well). Safe twice; a later call re-initialises.
int cleanup(const Library& lib) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Driver& d = driver();
  if (!d.ok) return 0;
  CUresult last = CUDA_SUCCESS;
  for (int i = 0; i < lib.num_entries; ++i) {
    EntrySlot* slots = lib.entries[i]->slots;
    for (int dev = 0; dev < kMaxDevices; ++dev) {
      EntrySlot& s = slots[dev];
      if (s.module != nullptr) {
        CUcontext ctx = g_devices[dev].ctx;
        bool pushed = ctx != nullptr && d.CtxPushCurrent(ctx) == CUDA_SUCCESS;
        CUresult r = d.ModuleUnload(s.module);
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) last = r;  // deinitialized: freed with the context
        if (pushed) {
          CUcontext popped;
          d.CtxPopCurrent(&popped);
        }
      }
      s.module = nullptr;
      for (auto& k : s.kernels) k = nullptr;
      for (auto& m : s.max_dynamic_smem) m = 0;
      s.loaded.store(0, std::memory_order_release);
    }
  }
  for (int dev = 0; dev < kMaxDevices; ++dev) {
    if (g_devices[dev].ctx != nullptr) {
      CUdevice cudev;
      CUresult r = d.DeviceGet(&cudev, dev);
      if (r == CUDA_SUCCESS) r = d.PrimaryCtxRelease(cudev);
      if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) last = r;
      g_devices[dev] = DeviceSlot();
    }
  }
  return static_cast<int>(last);
}

void not_loaded(const char* entry, int device) {
  fail("RuntimeError", std::string(entry) + ": not loaded on cuda:" + std::to_string(device) +
                           " (was cleanup_module called while this call ran?)");
}

// ------------------------------------------------------------------------------------------------
// Scalars and streams
// ------------------------------------------------------------------------------------------------
int64_t int_arg(const ::tvm::ffi::AnyView& v, const char* entry, const char* arg, int64_t lo, int64_t hi,
                const char* dtype) {
  if (TL_AOT_LIKELY(v.type_index() == ::tvm::ffi::TypeIndex::kTVMFFIInt)) {
    int64_t x = v.cast<int64_t>();
    if (TL_AOT_LIKELY(x >= lo && x <= hi)) return x;
    bad_arg("ValueError", entry, arg, std::string("a value in range of ") + dtype, std::to_string(x));
  }
  if (v.type_index() == ::tvm::ffi::TypeIndex::kTVMFFIBool) return v.cast<bool>() ? 1 : 0;
  bad_arg("TypeError", entry, arg, std::string("an int (") + dtype + ")", std::string(v.GetTypeKey()));
}

double float_arg(const ::tvm::ffi::AnyView& v, const char* entry, const char* arg, const char* dtype) {
  if (TL_AOT_LIKELY(v.type_index() == ::tvm::ffi::TypeIndex::kTVMFFIFloat)) return v.cast<double>();
  if (v.type_index() == ::tvm::ffi::TypeIndex::kTVMFFIInt) return static_cast<double>(v.cast<int64_t>());
  bad_arg("TypeError", entry, arg, std::string("a float (") + dtype + ")", std::string(v.GetTypeKey()));
}

bool bool_arg(const ::tvm::ffi::AnyView& v, const char* entry, const char* arg) {
  if (TL_AOT_LIKELY(v.type_index() == ::tvm::ffi::TypeIndex::kTVMFFIBool)) return v.cast<bool>();
  if (v.type_index() == ::tvm::ffi::TypeIndex::kTVMFFIInt) return v.cast<int64_t>() != 0;
  bad_arg("TypeError", entry, arg, "a bool", std::string(v.GetTypeKey()));
}

CUstream stream_arg(const ::tvm::ffi::AnyView* v, int device, const char* entry) {
  if (v == nullptr || v->type_index() == ::tvm::ffi::TypeIndex::kTVMFFINone)
    return static_cast<CUstream>(TVMFFIEnvGetStream(kDLCUDA, device));
  if (v->type_index() == ::tvm::ffi::TypeIndex::kTVMFFIInt) {
    int64_t h = v->cast<int64_t>();
    if (h < 0) bad_arg("ValueError", entry, "stream", "a non-negative stream handle (cudaStream_t as int)", std::to_string(h));
    return reinterpret_cast<CUstream>(static_cast<uintptr_t>(h));
  }
  if (v->type_index() == ::tvm::ffi::TypeIndex::kTVMFFIOpaquePtr) return static_cast<CUstream>(v->cast<void*>());
  bad_arg("TypeError", entry, "stream", "None, an int handle or a pointer", std::string(v->GetTypeKey()));
}

int current_device() {
  Driver& d = driver();
  CUcontext ctx = nullptr;
  CUdevice dev;
  if (!d.ok || d.CtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr || d.CtxGetDevice(&dev) != CUDA_SUCCESS) return 0;
  int count = 0;
  if (d.DeviceGetCount(&count) != CUDA_SUCCESS) return 0;
  for (int i = 0; i < count && i < kMaxDevices; ++i) {  // a CUdevice is a handle: find its ordinal
    CUdevice di;
    if (d.DeviceGet(&di, i) == CUDA_SUCCESS && di == dev) return i;
  }
  return 0;
}

// ------------------------------------------------------------------------------------------------
// Launches
// ------------------------------------------------------------------------------------------------
void bad_grid(const char* entry, const char* kernel, int dim, int64_t value) {
  fail("ValueError", std::string(entry) + ": kernel " + kernel + " would launch grid dimension " + std::to_string(dim) +
                         " = " + std::to_string(value) + " (the inputs' sizes are out of range)");
}

void bad_smem(const char* entry, const char* kernel, int64_t bytes, int64_t allowed) {
  fail("ValueError", std::string(entry) + ": kernel " + kernel + " would need " + std::to_string(bytes) +
                         " bytes of dynamic shared memory for these inputs; the device allows it " +
                         std::to_string(allowed));
}

[[noreturn]] static void fail_launch(const char* entry, const char* kernel, CUresult r) {
  std::string hint;
  if (r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED)
    hint = " (was an explicit stream from another device or context passed? after a cudaDeviceReset, call cleanup_module)";
  fail("RuntimeError", std::string(entry) + ": launching " + kernel + " failed: " + cu_error(r) + hint);
}

void launch(const char* entry, const char* kernel, CUfunction fn, const int64_t grid[3], const int64_t block[3],
            int64_t smem, CUstream stream, void** args, const int* cluster, bool cooperative, bool pdl) {
  Driver& d = driver();
  CUresult r;
  if (TL_AOT_LIKELY(cluster == nullptr && !cooperative && !pdl)) {
    r = d.LaunchKernel(fn, static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]), static_cast<unsigned>(grid[2]),
                       static_cast<unsigned>(block[0]), static_cast<unsigned>(block[1]), static_cast<unsigned>(block[2]),
                       static_cast<unsigned>(smem), stream, args, nullptr);
  } else {
    CUlaunchAttribute attrs[3];
    unsigned n = 0;
    if (cluster != nullptr) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[n].value.clusterDim.x = cluster[0];
      attrs[n].value.clusterDim.y = cluster[1];
      attrs[n].value.clusterDim.z = cluster[2];
      ++n;
    }
    if (cooperative) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      attrs[n].value.cooperative = 1;
      ++n;
    }
    if (pdl) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[n].value.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    CUlaunchConfig cfg;
    std::memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = static_cast<unsigned>(grid[0]);
    cfg.gridDimY = static_cast<unsigned>(grid[1]);
    cfg.gridDimZ = static_cast<unsigned>(grid[2]);
    cfg.blockDimX = static_cast<unsigned>(block[0]);
    cfg.blockDimY = static_cast<unsigned>(block[1]);
    cfg.blockDimZ = static_cast<unsigned>(block[2]);
    cfg.sharedMemBytes = static_cast<unsigned>(smem);
    cfg.hStream = stream;
    cfg.attrs = attrs;
    cfg.numAttrs = n;
    r = d.LaunchKernelEx(&cfg, fn, args, nullptr);
  }
  if (TL_AOT_UNLIKELY(r != CUDA_SUCCESS)) fail_launch(entry, kernel, r);
}

// ------------------------------------------------------------------------------------------------
// TMA
// ------------------------------------------------------------------------------------------------
void check_tma_operand(const char* entry, const char* arg, const void* ptr, const int64_t* strides, int n) {
  if (TL_AOT_UNLIKELY(reinterpret_cast<uintptr_t>(ptr) % 16 != 0))
    bad_arg("ValueError", entry, arg, "a data pointer aligned to 16 bytes (the kernel reads it with TMA)",
            "an address 16-byte misaligned by " + std::to_string(reinterpret_cast<uintptr_t>(ptr) % 16) +
                " (an offset view?)");
  for (int i = 0; i < n; ++i)
    if (TL_AOT_UNLIKELY(strides[i] % 16 != 0 || strides[i] <= 0 || strides[i] >= (int64_t(1) << 40)))
      bad_arg("ValueError", entry, arg, "row strides that are positive multiples of 16 bytes (TMA)",
              "a stride of " + std::to_string(strides[i]) + " bytes");
}

void encode_tiled(const char* entry, const char* arg, CUtensorMap* out, int dtype, int rank, void* addr,
                  const cuuint64_t* dims, const int64_t* byte_strides, const cuuint32_t* box, const cuuint32_t* estr,
                  int interleave, int swizzle, int l2, int oob) {
  check_tma_operand(entry, arg, addr, byte_strides, rank - 1);
  cuuint64_t strides[5] = {};
  for (int i = 0; i + 1 < rank && i < 5; ++i) strides[i] = static_cast<cuuint64_t>(byte_strides[i]);
  CUresult r = driver().TensorMapEncodeTiled(
      out, static_cast<CUtensorMapDataType>(dtype), rank, addr, dims, strides, box, estr,
      static_cast<CUtensorMapInterleave>(interleave), static_cast<CUtensorMapSwizzle>(swizzle),
      static_cast<CUtensorMapL2promotion>(l2), static_cast<CUtensorMapFloatOOBfill>(oob));
  if (TL_AOT_UNLIKELY(r != CUDA_SUCCESS)) fail_cu(entry, std::string("encoding the TMA descriptor of '") + arg + "'", r);
}

void encode_im2col(const char* entry, const char* arg, CUtensorMap* out, int dtype, int rank, void* addr,
                   const cuuint64_t* dims, const int64_t* byte_strides, const int* lower, const int* upper,
                   unsigned channels, unsigned pixels, const cuuint32_t* estr, int interleave, int swizzle, int l2,
                   int oob) {
  check_tma_operand(entry, arg, addr, byte_strides, rank - 1);
  cuuint64_t strides[5] = {};
  for (int i = 0; i + 1 < rank && i < 5; ++i) strides[i] = static_cast<cuuint64_t>(byte_strides[i]);
  CUresult r = driver().TensorMapEncodeIm2col(
      out, static_cast<CUtensorMapDataType>(dtype), rank, addr, dims, strides, lower, upper, channels, pixels, estr,
      static_cast<CUtensorMapInterleave>(interleave), static_cast<CUtensorMapSwizzle>(swizzle),
      static_cast<CUtensorMapL2promotion>(l2), static_cast<CUtensorMapFloatOOBfill>(oob));
  if (TL_AOT_UNLIKELY(r != CUDA_SUCCESS))
    fail_cu(entry, std::string("encoding the im2col TMA descriptor of '") + arg + "'", r);
}

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

// ------------------------------------------------------------------------------------------------
// L2 windows
// ------------------------------------------------------------------------------------------------
L2Window::L2Window(const char* entry, CUstream s, void* base, int64_t bytes, float hit, const DeviceSlot& ds)
    : stream_(s) {
  if (ds.l2_max_persisting <= 0 || ds.l2_max_window <= 0) return;  // no persisting L2 on this device
  Driver& d = driver();
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (d.StreamIsCapturing(s, &capture) != CUDA_SUCCESS || capture != CU_STREAM_CAPTURE_STATUS_NONE)
    return;  // a performance hint only: skipped in CUDA graph capture (context limits are not capturable)
  int64_t n = min<int64_t>(bytes, min<int64_t>(ds.l2_max_persisting, ds.l2_max_window));
  d.CtxGetLimit(&old_limit_, CU_LIMIT_PERSISTING_L2_CACHE_SIZE);
  CUresult r = d.CtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, static_cast<size_t>(n));
  if (r != CUDA_SUCCESS) fail_cu(entry, "setting the persisting L2 limit", r);
  CUlaunchAttributeValue v;
  std::memset(&v, 0, sizeof(v));
  v.accessPolicyWindow.base_ptr = base;
  v.accessPolicyWindow.num_bytes = static_cast<size_t>(n);
  v.accessPolicyWindow.hitRatio = hit;
  v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
  v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
  r = d.StreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v);
  if (r != CUDA_SUCCESS) fail_cu(entry, "setting the L2 access policy window", r);
  active_ = true;
}

L2Window::~L2Window() {
  if (!active_) return;
  Driver& d = driver();
  CUlaunchAttributeValue v;
  std::memset(&v, 0, sizeof(v));
  d.StreamSetAttribute(stream_, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v);
  d.CtxResetPersistingL2Cache();
  d.CtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, old_limit_);
}

// ------------------------------------------------------------------------------------------------
// The argument checker (see Checks in the header): the tables of one entry, read in the order the
// generated checks had, so each bad argument gets the same error first.
// ------------------------------------------------------------------------------------------------
static inline int64_t value_of(const Value& v, const Frame& x, EvalFn eval) {
  if (v.kind == kConst) return v.n;
  if (v.kind == kSymbol) return x.s[v.n];
  return eval(x, static_cast<int>(v.n));
}

static inline bool dtype_ok(const TensorSpec& ts, DLDataType d) {
  if (d.lanes != 1) return false;
  for (int i = 0; i < ts.num_dtypes; ++i)
    if (d.code == ts.dtypes[i].code && d.bits == ts.dtypes[i].bits) return true;
  return false;
}

// A tensor's own checks: on a CUDA device, rank, dtype, each dim (binding symbols); its data.
static void check_tensor(const char* entry, const TensorSpec& ts, Frame& x, int i) {
  const DLTensor* t = x.t[i];
  check_cuda_tensor(t, entry, ts.name);
  if (TL_AOT_UNLIKELY(t->ndim != ts.ndim)) bad_ndim(entry, ts.name, ts.ndim, ts.shape, t);
  if (TL_AOT_UNLIKELY(!dtype_ok(ts, t->dtype))) bad_dtype(entry, ts.name, ts.dtype, t);
  for (int d = 0; d < ts.ndim; ++d) {
    const Dim& dim = ts.dims[d];
    if (dim.kind == kBind) {
      x.s[dim.value.n] = t->shape[d];
    } else if (dim.kind == kEqual) {
      const int64_t want = dim.value.kind == kConst ? dim.value.n : x.s[dim.value.n];
      if (TL_AOT_UNLIKELY(t->shape[d] != want)) {
        if (dim.value.kind == kConst) bad_dim(entry, ts.name, dim.expected, t);
        bad_dim_from(entry, ts.name, dim.expected, want, dim.source, t);
      }
    }
  }
  x.p[i] = static_cast<char*>(t->data) + t->byte_offset;
}

static void check_late(const char* entry, const Checks& c, const Frame& x, int from, int to) {
  for (int k = from; k < to; ++k) {
    const LateCheck& l = c.late[k];
    const DLTensor* t = x.t[l.tensor];
    const int64_t want = value_of(l.value, x, c.eval);
    if (TL_AOT_UNLIKELY(t->shape[l.dim] != want))
      bad_dim_from(entry, c.tensors[l.tensor].name, l.expected, want, "", t);
  }
}

static void check_symbols(const char* entry, const Checks& c, Frame& x) {
  for (int k = 0; k < c.num_symbols; ++k) {
    const SymbolSpec& s = c.symbols[k];
    const DLTensor* t = x.t[s.tensor];
    const char* arg = c.tensors[s.tensor].name;
    if (s.derive >= 0) {  // solved from the dim as TileLang solves it; exact or refused
      const int64_t v = x.s[k] = c.eval(x, s.derive);
      if (TL_AOT_UNLIKELY(v <= 0 || v > s.max || t->shape[s.dim] != value_of(s.check, x, c.eval)))
        bad_dim(entry, arg, s.expected, t);
    } else if (TL_AOT_UNLIKELY(x.s[k] <= 0 || x.s[k] > s.max)) {
      bad_symbol(entry, arg, s.dim, s.name, s.max, t);
    }
  }
}

static void* alloc_output(const char* entry, const Checks& c, const TensorSpec& ts, Frame& x, int i, int device) {
  int64_t small[8];
  std::vector<int64_t> big;
  int64_t* shape = small;
  if (ts.alloc_ndim > 8) {
    big.resize(ts.alloc_ndim);
    shape = big.data();
  }
  for (int d = 0; d < ts.alloc_ndim; ++d) shape[d] = value_of(ts.alloc_shape[d], x, c.eval);
  return alloc_output(entry, ts.name, shape, ts.alloc_ndim, ts.alloc_dtype, device, &x.o[i - c.num_inputs], &x.t[i]);
}

static void check_layout(const char* entry, const Checks& c, const Frame& x) {
  for (int i = 0; i < c.num_tensors; ++i) {
    const TensorSpec& ts = c.tensors[i];
    check_data(entry, ts.name, x.p[i], ts.alignment);
    const int64_t* st = x.t[i]->strides;
    if (ts.strides == nullptr || st == nullptr) continue;
    const int64_t* sh = x.t[i]->shape;
    for (int d = 0; d < ts.ndim; ++d)
      if (TL_AOT_UNLIKELY(sh[d] != 1 && st[d] != value_of(ts.strides[d], x, c.eval)))
        bad_strides(entry, ts.name, ts.strides_shown, x.t[i]);
  }
}

int check_args(const Entry& e, Frame& x, bool alloc) {
  const Checks& c = *e.checks;
  const char* entry = e.name;
  for (int i = 0; i < c.num_inputs; ++i) check_tensor(entry, c.tensors[i], x, i);
  const char* first = c.tensors[0].name;
  int device = c.num_inputs > 0 ? x.t[0]->device.device_id : 0;
  for (int i = 1; i < c.num_inputs; ++i)
    if (TL_AOT_UNLIKELY(x.t[i]->device.device_id != device))
      bad_device(entry, c.tensors[i].name, first, device, x.t[i]);
  check_symbols(entry, c, x);
  check_late(entry, c, x, 0, c.num_late_inputs);
  if (c.num_tensors > c.num_inputs) {
    if (alloc) {
      if (c.num_inputs == 0) device = current_device();
      for (int i = c.num_inputs; i < c.num_tensors; ++i) x.p[i] = alloc_output(entry, c, c.tensors[i], x, i, device);
    } else {
      for (int i = c.num_inputs; i < c.num_tensors; ++i) {
        check_tensor(entry, c.tensors[i], x, i);
        if (c.num_inputs == 0 && i == 0)  // no input tensor: the first output names the device
          device = x.t[i]->device.device_id;
        else if (TL_AOT_UNLIKELY(x.t[i]->device.device_id != device))
          bad_device(entry, c.tensors[i].name, first, device, x.t[i]);
      }
      check_late(entry, c, x, c.num_late_inputs, c.num_late);
    }
  }
  check_layout(entry, c, x);
  return device;
}

bool call_form(const Entry& e, const ::tvm::ffi::AnyView* a, int32_t num_args, const char* name) {
  const Checks& c = *e.checks;
  if (c.inputs.reads != nullptr)
    return returns_outputs(a, num_args, c.inputs.count, c.every.count, c.decide_at, c.decide_tensor, name,
                           c.inputs.names, c.every.names);
  if (TL_AOT_UNLIKELY(num_args != c.every.count && num_args != c.every.count + 1))
    bad_arg_count(name, c.every.count, c.every.names, num_args);
  return false;
}

void run(const Entry& e, Frame& x, const ::tvm::ffi::AnyView* stream_view, bool has_stream, void* stream_ptr,
         bool alloc) {
  const int device = check_args(e, x, alloc);
  const bool explicit_stream =
      has_stream || (stream_view != nullptr && stream_view->type_index() != ::tvm::ffi::TypeIndex::kTVMFFINone);
  CUstream stream = has_stream ? static_cast<CUstream>(stream_ptr) : stream_arg(stream_view, device, e.name);
  const int v = loaded_variant(*e.library, e, device, e.checks->tensors[0].name, stream);
  ContextGuard guard(e.name, g_devices[device].ctx);
  if (TL_AOT_UNLIKELY(v < 0 || v >= e.num_images)) not_loaded(e.name, device);
  e.launches[v](x, e.slots[device], stream, device, explicit_stream);
}

void invoke(const Entry& e, Frame& x, const ::tvm::ffi::AnyView* a, int32_t num_args, TVMFFIAny* result, bool alloc) {
  const Checks& c = *e.checks;
  const Form& form = alloc ? c.inputs : c.every;
  for (int k = 0; k < form.count; ++k) {
    const ArgRead& r = form.reads[k];
    switch (r.kind) {
      case kTensorArg:
        x.t[r.index] = tensor_arg(a[k], e.name, r.name);
        break;
      case kIntArg:
        x.a[r.index].i = int_arg(a[k], e.name, r.name, r.lo, r.hi, r.dtype);
        break;
      case kFloatArg:
        x.a[r.index].f = float_arg(a[k], e.name, r.name, r.dtype);
        break;
      case kBoolArg:
        x.a[r.index].i = bool_arg(a[k], e.name, r.name);
        break;
    }
  }
  run(e, x, num_args > form.count ? &a[form.count] : nullptr, false, nullptr, alloc);
  const int outputs = c.num_tensors - c.num_inputs;
  if (!alloc) {
    set_none(result);
  } else if (outputs == 1) {
    *result = ::tvm::ffi::details::AnyUnsafe::MoveAnyToTVMFFIAny(::tvm::ffi::Any(std::move(x.o[0])));
  } else {
    ::tvm::ffi::Array<::tvm::ffi::Tensor> outs;
    for (int k = 0; k < outputs; ++k) outs.push_back(std::move(x.o[k]));
    *result = ::tvm::ffi::details::AnyUnsafe::MoveAnyToTVMFFIAny(::tvm::ffi::Any(std::move(outs)));
  }
}

void start_frame(Frame& x, int nt, int ns, int na, int no) {
  std::memset(static_cast<void*>(x.t), 0, sizeof(*x.t) * nt);
  std::memset(static_cast<void*>(x.p), 0, sizeof(*x.p) * nt);
  std::memset(static_cast<void*>(x.s), 0, sizeof(*x.s) * (ns + 1));
  std::memset(static_cast<void*>(x.a), 0, sizeof(*x.a) * (na + 1));
  for (int i = 0; i < no; ++i) new (&x.o[i])::tvm::ffi::Tensor();
}

void end_frame(Frame& x, int no) {
  for (int i = 0; i < no; ++i) x.o[i].~Tensor();
}

const DLTensor* view(const ::tvm::ffi::TensorView& v, DLTensor* dl) {
  *dl = as_dltensor(v);
  return dl;
}

// ------------------------------------------------------------------------------------------------
// The library-wide exports
// ------------------------------------------------------------------------------------------------
int safe_call(FfiFn fn, const void* ctx, const TVMFFIAny* raw, int32_t num_args, TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  fn(ctx, reinterpret_cast<const ::tvm::ffi::AnyView*>(raw), num_args, result);
  TVM_FFI_SAFE_CALL_END();
}

namespace {
// Releases a frame's outputs however the call ends.
struct FrameEnd {
  Frame& x;
  int no;
  ~FrameEnd() { end_frame(x, no); }
};
}  // namespace

void invoke(const Entry& e, const ::tvm::ffi::AnyView* a, int32_t num_args, TVMFFIAny* result, bool alloc) {
  constexpr int kMax = 16;
  const Checks& c = *e.checks;
  const int nt = c.num_tensors, ns = c.num_symbols + 1, na = c.num_scalars + 1, no = c.num_tensors - c.num_inputs;
  if (TL_AOT_LIKELY(nt <= kMax && ns <= kMax && na <= kMax)) {
    const DLTensor* t[kMax];
    void* p[kMax];
    int64_t s[kMax];
    Scalar sc[kMax];
    alignas(::tvm::ffi::Tensor) unsigned char o[sizeof(::tvm::ffi::Tensor) * kMax];
    Frame x{t, p, s, sc, reinterpret_cast<::tvm::ffi::Tensor*>(o)};
    start_frame(x, nt, ns, na, no);
    FrameEnd end{x, no};
    invoke(e, x, a, num_args, result, alloc);
    return;
  }
  std::vector<const DLTensor*> t(nt);
  std::vector<void*> p(nt);
  std::vector<int64_t> s(ns);
  std::vector<Scalar> sc(na);
  std::vector<::tvm::ffi::Tensor> o(no + 1);
  Frame x{t.data(), p.data(), s.data(), sc.data(), o.data()};
  invoke(e, x, a, num_args, result, alloc);
}

void call_entry(const void* entry, const ::tvm::ffi::AnyView* a, int32_t num_args, TVMFFIAny* result) {
  const Entry& e = *static_cast<const Entry*>(entry);
  invoke(e, a, num_args, result, call_form(e, a, num_args, e.name));
}

int ffi_cleanup(const Library& lib, int32_t num_args, TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  if (num_args != 0) fail("TypeError", "cleanup_module() takes no arguments");
  int err = cleanup(lib);
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = err;
  TVM_FFI_SAFE_CALL_END();
}

int ffi_prepare(const Library& lib, const TVMFFIAny* raw, int32_t num_args, TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  if (num_args != 1) fail("TypeError", "tl_aot_prepare(device) takes one argument, the CUDA device id");
  const ::tvm::ffi::AnyView* a = reinterpret_cast<const ::tvm::ffi::AnyView*>(raw);
  prepare(lib, static_cast<int>(int_arg(a[0], "tl_aot_prepare", "device", 0, kMaxDevices - 1, "a device id")));
  set_none(result);
  TVM_FFI_SAFE_CALL_END();
}

int ffi_manifest(const char* json, TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  TVMFFIByteArray bytes{json, std::strlen(json)};
  return TVMFFIStringFromByteArray(&bytes, result);
  TVM_FFI_SAFE_CALL_END();
}

int ffi_driver_check(const Library& lib, TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  std::string why = driver_too_old(lib);
  TVMFFIByteArray bytes{why.data(), why.size()};
  return TVMFFIStringFromByteArray(&bytes, result);
  TVM_FFI_SAFE_CALL_END();
}

}  // namespace v3
}  // namespace rt
}  // namespace tl_aot
