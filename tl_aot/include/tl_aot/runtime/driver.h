// Part of tl_aot's launcher runtime (tl_aot/launcher_runtime.h includes every part in order):
// the CUDA driver API, resolved at run time (dlopen + cuGetProcAddress, never linked).
#ifndef TL_AOT_RUNTIME_DRIVER_H_
#define TL_AOT_RUNTIME_DRIVER_H_

#include <cuda.h>

#include <string>

namespace tl_aot {
namespace rt {
inline namespace v4 {

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

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot

#endif  // TL_AOT_RUNTIME_DRIVER_H_
