// tl_aot launcher runtime, the driver: libcuda dlopened and its API resolved at run time (never
// linked), the driver version and the check that it is new enough for a library.
#include "tl_aot/launcher_runtime.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>

namespace tl_aot {
namespace rt {
inline namespace v4 {  // v4: TensorSpec holds packed sub-byte tensors (v3: Entry and EntrySlot, table-driven checks)

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

// The leading decimal digits of `s` as a number. Not std::atoi: under glibc >= 2.38 headers it binds
// __isoc23_strtol@GLIBC_2.38, and one such symbol raises every wheel's manylinux tag to 2_38.
static int leading_number(const char* s) {
  int n = 0;
  for (; *s >= '0' && *s <= '9'; ++s) n = n * 10 + (*s - '0');
  return n;
}

static int read_driver_version() {
  if (const char* fake = std::getenv("TL_AOT_TESTING_DRIVER_VERSION")) {  // tests only: see the header
    const char* dot = std::strchr(fake, '.');
    return dot ? leading_number(fake) * 1000 + leading_number(dot + 1) * 10 : leading_number(fake);
  }
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return 0;
  using GetVersionFn = CUresult (*)(int*);
  auto get = reinterpret_cast<GetVersionFn>(dlsym(lib, "cuDriverGetVersion"));
  int v = 0;
  if (get == nullptr || get(&v) != CUDA_SUCCESS) v = 0;
  // Kept open: the first kernel call's driver() opens it again, and closing it here would unload and map the
  // whole driver library twice in a process that has not touched CUDA yet (tl_aot.load checks the driver).
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

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot
