// Shared by the bench's C++ programs (culaunch.cc, entrycall.cc): the CUDA driver resolved at run
// time with dlopen + cuGetProcAddress (as tl_aot's launcher does, so they build without libcuda),
// device 0's primary context made current with one kernel loaded from a cubin file, and helpers.
#pragma once

#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

namespace bench {

//! The program name errors are prefixed with (set by main).
inline const char* g_program = "bench";

[[noreturn]] inline void die(const std::string& msg) {
  std::fprintf(stderr, "%s: %s\n", g_program, msg.c_str());
  std::exit(1);
}

inline void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) die(std::string(what) + " failed with CUresult " + std::to_string(static_cast<int>(r)));
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Driver {
  decltype(&::cuInit) Init;
  decltype(&::cuDeviceGet) DeviceGet;
  decltype(&::cuDevicePrimaryCtxRetain) PrimaryCtxRetain;
  decltype(&::cuCtxSetCurrent) CtxSetCurrent;
  decltype(&::cuCtxGetCurrent) CtxGetCurrent;
  decltype(&::cuModuleLoadData) ModuleLoadData;
  decltype(&::cuModuleGetFunction) ModuleGetFunction;
  decltype(&::cuFuncSetAttribute) FuncSetAttribute;
  decltype(&::cuMemAlloc) MemAlloc;
  decltype(&::cuLaunchKernel) LaunchKernel;
  decltype(&::cuCtxSynchronize) CtxSynchronize;
};

inline Driver load_driver() {
  using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) die("cannot load libcuda.so.1");
  auto gpa = reinterpret_cast<GetProcAddressFn>(dlsym(lib, "cuGetProcAddress_v2"));
  if (gpa == nullptr) die("the driver lacks cuGetProcAddress_v2");
  Driver d{};
  auto get = [&](const char* name, auto& fn) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult q;
    if (gpa(name, &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS || p == nullptr) die(std::string("no ") + name);
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  get("cuInit", d.Init);
  get("cuDeviceGet", d.DeviceGet);
  get("cuDevicePrimaryCtxRetain", d.PrimaryCtxRetain);
  get("cuCtxSetCurrent", d.CtxSetCurrent);
  get("cuCtxGetCurrent", d.CtxGetCurrent);
  get("cuModuleLoadData", d.ModuleLoadData);
  get("cuModuleGetFunction", d.ModuleGetFunction);
  get("cuFuncSetAttribute", d.FuncSetAttribute);
  get("cuMemAlloc", d.MemAlloc);
  get("cuLaunchKernel", d.LaunchKernel);
  get("cuCtxSynchronize", d.CtxSynchronize);
  return d;
}

// Make device 0's primary context current, load the cubin at `path` and return its kernel `name`
// (allowed `smem` bytes of dynamic shared memory when that is above the 48 KB default).
inline CUfunction load_kernel(const Driver& cu, const std::string& path, const std::string& name, unsigned smem) {
  std::ifstream f(path, std::ios::binary);
  if (!f) die("cannot read " + path);
  std::vector<char> image((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  check(cu.Init(0), "cuInit");
  CUdevice dev;
  check(cu.DeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  check(cu.PrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cu.CtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUmodule mod;
  check(cu.ModuleLoadData(&mod, image.data()), "cuModuleLoadData");
  CUfunction fn;
  check(cu.ModuleGetFunction(&fn, mod, name.c_str()), "cuModuleGetFunction");
  if (smem > 48 * 1024) check(cu.FuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem), "cuFuncSetAttribute");
  return fn;
}

}  // namespace bench
