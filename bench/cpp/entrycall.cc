// Launch-path profile (issue 5): a tl_aot entry called from C++ with no Python in the way,
// interleaved round by round with plain cuLaunchKernel of the same kernel in the same process.
// The difference is what the generated launcher adds per call (argument checks, context query,
// environment stream, the TVM FFI error frame), apart from Python and tvm-ffi's argument
// conversion (the `noop` figure) and from the driver's own launch cost (the `culaunch` figure).
//
//   entrycall LIBRARY ENTRY NTENSORS ELEMS DTYPE_CODE DTYPE_BITS CUBIN KERNEL GRID BLOCK SMEM [CALLS] [BATCH]
//
// The entry gets NTENSORS compact 1-D CUDA tensors of ELEMS elements (DLPack dtype code/bits) on
// device 0; the plain launch gets the same buffers. Both run on the legacy default stream (the
// entry's environment stream is unset here, so it is the null stream too). Also timed alone:
// cuCtxGetCurrent and TVMFFIEnvGetStream, the two lookups the launcher's steady path makes.
// Prints one JSON object. libtvm_ffi must be on the loader path (the library links it).
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "driver.h"

using bench::check;
using bench::die;
using bench::median;
using SafeCall = int (*)(void*, const TVMFFIAny*, int32_t, TVMFFIAny*);

int main(int argc, char** argv) {
  bench::g_program = "entrycall";
  if (argc < 12)
    die("usage: entrycall LIBRARY ENTRY NTENSORS ELEMS DTYPE_CODE DTYPE_BITS CUBIN KERNEL GRID BLOCK SMEM [CALLS] [BATCH] "
        "[ENTRY2]");
  const std::string library = argv[1], entry = argv[2];
  const int ntensors = std::atoi(argv[3]);
  int64_t elems = std::atoll(argv[4]);
  const int code = std::atoi(argv[5]), bits = std::atoi(argv[6]);
  const std::string cubin_path = argv[7], kernel = argv[8];
  const unsigned grid = static_cast<unsigned>(std::atoi(argv[9])), block = static_cast<unsigned>(std::atoi(argv[10]));
  const unsigned smem = static_cast<unsigned>(std::atoi(argv[11]));
  const int calls = argc > 12 ? std::atoi(argv[12]) : 30000;
  const int batch = argc > 13 ? std::atoi(argv[13]) : 100;
  const std::string entry2 = argc > 14 ? argv[14] : "";  // a second entry taking the same tensors, timed interleaved
  if (ntensors <= 0 || ntensors > 16 || elems <= 0 || calls <= 0 || batch <= 0) die("bad NTENSORS, ELEMS, CALLS or BATCH");

  const bench::Driver cu = bench::load_driver();
  CUfunction fn = bench::load_kernel(cu, cubin_path, kernel, smem);

  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) die(std::string("cannot load ") + library + ": " + dlerror());
  auto call = reinterpret_cast<SafeCall>(dlsym(lib, ("__tvm_ffi_" + entry).c_str()));
  if (call == nullptr) die("the library exports no __tvm_ffi_" + entry);
  SafeCall call2 = entry2.empty() ? call : reinterpret_cast<SafeCall>(dlsym(lib, ("__tvm_ffi_" + entry2).c_str()));
  if (call2 == nullptr) die("the library exports no __tvm_ffi_" + entry2);

  // Buffers, and the DLTensors / packed arguments the entry gets (what tvm-ffi hands a C function).
  std::vector<CUdeviceptr> ptrs(ntensors);
  std::vector<void*> launch_args(ntensors);
  std::vector<DLTensor> tensors(ntensors);
  std::vector<TVMFFIAny> packed(ntensors);
  for (int i = 0; i < ntensors; ++i) {
    check(cu.MemAlloc(&ptrs[i], static_cast<size_t>(elems) * bits / 8 + 256), "cuMemAlloc");
    launch_args[i] = &ptrs[i];
    DLTensor& t = tensors[i];
    t.data = reinterpret_cast<void*>(ptrs[i]);
    t.device = DLDevice{kDLCUDA, 0};
    t.ndim = 1;
    t.dtype = DLDataType{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
    t.shape = &elems;
    t.strides = nullptr;
    t.byte_offset = 0;
    packed[i].type_index = kTVMFFIDLTensorPtr;
    packed[i].zero_padding = 0;
    packed[i].v_ptr = &t;
  }
  auto call_with = [&](SafeCall f) {
    TVMFFIAny result;
    result.type_index = kTVMFFINone;
    result.zero_padding = 0;
    result.v_int64 = 0;
    if (f(nullptr, packed.data(), ntensors, &result) != 0) {
      TVMFFIObjectHandle err = nullptr;
      TVMFFIErrorMoveFromRaised(&err);
      if (err != nullptr) TVMFFIObjectDecRef(err);
      die("the entry call failed (see the library's error)");
    }
  };
  auto entry_call = [&] { call_with(call); };
  auto entry2_call = [&] { call_with(call2); };
  auto raw_launch = [&] { cu.LaunchKernel(fn, grid, 1, 1, block, 1, 1, smem, nullptr, launch_args.data(), nullptr); };
  volatile uintptr_t sink = 0;
  auto ctx_query = [&] {
    CUcontext c;
    cu.CtxGetCurrent(&c);
    sink = sink + reinterpret_cast<uintptr_t>(c);
  };
  auto env_stream = [&] { sink = sink + reinterpret_cast<uintptr_t>(TVMFFIEnvGetStream(kDLCUDA, 0)); };

  for (int i = 0; i < 2000; ++i) {
    entry_call();
    entry2_call();
    raw_launch();
  }
  check(cu.CtxSynchronize(), "cuCtxSynchronize");

  using clock = std::chrono::steady_clock;
  auto time_batch = [&](auto&& fn_) {
    auto t0 = clock::now();
    for (int i = 0; i < batch; ++i) fn_();
    auto t1 = clock::now();
    check(cu.CtxSynchronize(), "cuCtxSynchronize");
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / batch;
  };
  std::vector<double> e_us, e2_us, r_us, c_us, s_us;
  for (int done = 0; done < calls; done += batch) {
    e_us.push_back(time_batch(entry_call));
    if (!entry2.empty()) e2_us.push_back(time_batch(entry2_call));
    r_us.push_back(time_batch(raw_launch));
    c_us.push_back(time_batch(ctx_query));
    s_us.push_back(time_batch(env_stream));
  }
  if (!entry2.empty())
    std::printf("{\"entry2_us\": %.4f, \"entry2_min_us\": %.4f}\n", median(e2_us),
                *std::min_element(e2_us.begin(), e2_us.end()));
  std::printf("{\"entry_us\": %.4f, \"culaunch_us\": %.4f, \"launcher_overhead_us\": %.4f, \"ctx_get_current_us\": %.4f, "
              "\"env_stream_us\": %.4f, \"entry_min_us\": %.4f, \"culaunch_min_us\": %.4f, \"calls\": %d, \"batch\": %d}\n",
              median(e_us), median(r_us), median(e_us) - median(r_us), median(c_us), median(s_us),
              *std::min_element(e_us.begin(), e_us.end()), *std::min_element(r_us.begin(), r_us.end()), calls, batch);
  return 0;
}
