// The CMake sample program: TileLang kernels built ahead of time by add_tilelang_kernel(), called
// from C++ through their generated headers on device memory from the CUDA runtime, each result
// checked against a CPU reference. No Python, TileLang or nvcc at run time.
//
// Exit status: 0 when every result matches, 1 on a mismatch or an error, 77 when there is no
// usable CUDA device (ctest reports the test as skipped) unless TL_AOT_REQUIRE_GPU=1.

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "sample_add_one.h"
#include "sample_axpy.h"
#include "sample_gemm.h"

namespace {

constexpr int kSkip = 77;
int g_failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  if (!ok) ++g_failures;
}

void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

// A device buffer with the DLTensor that describes it (row-major).
template <typename T>
struct DeviceTensor {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // tvm::ffi::TensorView needs explicit strides
  T* data = nullptr;
  size_t count = 1;
  DLTensor dl{};

  DeviceTensor(std::vector<int64_t> s, DLDataType dtype, int device) : shape(std::move(s)) {
    strides.assign(shape.size(), 1);
    for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
    for (int64_t d : shape) count *= static_cast<size_t>(d);
    cuda_check(cudaMalloc(reinterpret_cast<void**>(&data), count * sizeof(T)), "cudaMalloc");
    dl.data = data;
    dl.device = DLDevice{kDLCUDA, device};
    dl.ndim = static_cast<int32_t>(shape.size());
    dl.dtype = dtype;
    dl.shape = shape.data();
    dl.strides = strides.data();
    dl.byte_offset = 0;
  }
  ~DeviceTensor() { cudaFree(data); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  tvm::ffi::TensorView view() const { return tvm::ffi::TensorView(&dl); }
  void upload(const std::vector<T>& host) { cuda_check(cudaMemcpy(data, host.data(), count * sizeof(T), cudaMemcpyHostToDevice), "upload"); }
  std::vector<T> download() const {
    std::vector<T> host(count);
    cuda_check(cudaMemcpy(host.data(), data, count * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return host;
  }
};

const DLDataType kF32{kDLFloat, 32, 1};
const DLDataType kF16{kDLFloat, 16, 1};

std::vector<float> random_floats(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::fmax(m, std::fabs(a[i] - b[i]));
  return m;
}

// Y = X + 1 for a length that is not a multiple of the block (a dynamic dimension), three ways:
// the default (TVM FFI environment) stream, an environment stream set by the program, and an
// explicit stream argument.
void run_add_one(int device) {
  const int64_t n = 1000;
  std::vector<float> x = random_floats(n, -1.0f, 1.0f, 1), ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = x[i] + 1.0f;
  DeviceTensor<float> X({n}, kF32, device), Y({n}, kF32, device);
  X.upload(x);

  tl_aot::sample_add_one::sample_add_one(X.view(), Y.view());
  cuda_check(cudaDeviceSynchronize(), "sample_add_one");
  check(max_abs_diff(Y.download(), ref) == 0.0f, "sample_add_one, n = 1000, default stream");

  cudaStream_t stream;
  cuda_check(cudaStreamCreate(&stream), "cudaStreamCreate");
  cuda_check(cudaMemset(Y.data, 0, n * sizeof(float)), "cudaMemset");
  TVMFFIStreamHandle previous = nullptr;
  TVMFFIEnvSetStream(kDLCUDA, device, stream, &previous);
  tl_aot::sample_add_one::sample_add_one(X.view(), Y.view());
  TVMFFIEnvSetStream(kDLCUDA, device, previous, nullptr);
  cuda_check(cudaStreamSynchronize(stream), "sample_add_one (environment stream)");
  check(max_abs_diff(Y.download(), ref) == 0.0f, "sample_add_one on the TVM FFI environment stream");

  cuda_check(cudaMemset(Y.data, 0, n * sizeof(float)), "cudaMemset");
  tl_aot::sample_add_one::sample_add_one(X.view(), Y.view(), static_cast<void*>(stream));
  cuda_check(cudaStreamSynchronize(stream), "sample_add_one (explicit stream)");
  check(max_abs_diff(Y.download(), ref) == 0.0f, "sample_add_one on an explicit stream");
  cuda_check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

// Y = alpha * X + Y + shift, with a float and an int scalar.
void run_axpy(int device) {
  const int64_t n = 4096;
  const float alpha = 2.5f;
  const int32_t shift = 3;
  std::vector<float> x = random_floats(n, -1.0f, 1.0f, 2), y = random_floats(n, -1.0f, 1.0f, 3), ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = alpha * x[i] + y[i] + static_cast<float>(shift);
  DeviceTensor<float> X({n}, kF32, device), Y({n}, kF32, device);
  X.upload(x);
  Y.upload(y);
  tl_aot::sample_axpy::sample_axpy(X.view(), Y.view(), alpha, shift);
  cuda_check(cudaDeviceSynchronize(), "sample_axpy");
  float err = max_abs_diff(Y.download(), ref);
  check(err < 1e-5f, "sample_axpy, alpha = 2.5, shift = 3 (max error " + std::to_string(err) + ")");
}

// C = A @ B in fp16 with fp32 accumulation, against a CPU GEMM of the same fp16 inputs.
void run_gemm(int device) {
  const int64_t M = 256, N = 256, K = 256;
  std::vector<float> a = random_floats(M * K, -1.0f, 1.0f, 4), b = random_floats(K * N, -1.0f, 1.0f, 5);
  std::vector<__half> ha(a.size()), hb(b.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = __half2float(ha[i] = __float2half(a[i]));
  for (size_t i = 0; i < b.size(); ++i) b[i] = __half2float(hb[i] = __float2half(b[i]));
  std::vector<float> ref(M * N, 0.0f);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) ref[i * N + j] += a[i * K + k] * b[k * N + j];

  DeviceTensor<__half> A({M, K}, kF16, device), B({K, N}, kF16, device), C({M, N}, kF16, device);
  A.upload(ha);
  B.upload(hb);
  tl_aot::sample_gemm::sample_gemm(A.view(), B.view(), C.view());
  cuda_check(cudaDeviceSynchronize(), "sample_gemm");
  std::vector<__half> hc = C.download();
  float worst = 0.0f;
  for (size_t i = 0; i < hc.size(); ++i) {
    float tol = 2e-2f * std::fmax(1.0f, std::fabs(ref[i]));
    worst = std::fmax(worst, std::fabs(__half2float(hc[i]) - ref[i]) / tol);
  }
  check(worst <= 1.0f, "sample_gemm 256x256x256 fp16 (worst error / tolerance " + std::to_string(worst) + ")");
}

}  // namespace

int main() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    // TL_AOT_REQUIRE_GPU=1 (the GPU machine's run): a missing device is a failure, not a skip.
    const char* require = std::getenv("TL_AOT_REQUIRE_GPU");
    bool required = require != nullptr && std::string(require) == "1";
    std::printf("%s: no CUDA device (%s)\n", required ? "FAIL" : "skipped",
                err != cudaSuccess ? cudaGetErrorString(err) : "none found");
    return required ? 1 : kSkip;
  }
  const int device = 0;
  cudaDeviceProp prop;
  cuda_check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  std::printf("device %d: %s (sm_%d%d)\n", device, prop.name, prop.major, prop.minor);
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  try {
    // Load every kernel now rather than on the first call (what one does before graph capture).
    tl_aot::sample_add_one::prepare(device);
    tl_aot::sample_axpy::prepare(device);
    tl_aot::sample_gemm::prepare(device);
    run_add_one(device);
    run_axpy(device);
    run_gemm(device);
  } catch (const tvm::ffi::Error& e) {
    std::fprintf(stderr, "%s: %s\n", e.kind().c_str(), e.message().c_str());
    return 1;
  }
  check(tl_aot::sample_add_one::cleanup_module() == 0, "sample_add_one: cleanup_module()");
  check(tl_aot::sample_axpy::cleanup_module() == 0, "sample_axpy: cleanup_module()");
  check(tl_aot::sample_gemm::cleanup_module() == 0, "sample_gemm: cleanup_module()");
  std::printf("%d failure(s)\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}
