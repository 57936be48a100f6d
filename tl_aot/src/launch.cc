// tl_aot launcher runtime, calls and launches: scalar and stream arguments, the current device,
// kernel launches (clusters, cooperative, PDL) and L2 access-policy windows.
#include "tl_aot/launcher_runtime.h"

#include <tvm/ffi/extra/c_env_api.h>

#include <cstring>
#include <string>

namespace tl_aot {
namespace rt {
inline namespace v4 {  // v4: TensorSpec holds packed sub-byte tensors (v3: Entry and EntrySlot, table-driven checks)

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

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot
