// The launcher's call path without the GPU (issue 42): rt::run of a two-tensor entry against a fake
// driver whose "launch" does nothing, so what is timed is the runtime's own per-call work: the
// argument checks, the launch counted in flight (cleanup_module waits for it), the context guard.
// Compiled against one runtime tree at a time (bench/call_path_cpu.py builds it against this
// checkout and against a baseline), so the same source times both.
//
//   call_path THREADS CALLS ROUNDS
//
// Each round starts THREADS threads at once, each making CALLS calls; prints one JSON object: the
// median over rounds of the wall-clock ns per call per thread, the same in each thread's own CPU
// time (steadier on a shared machine: time spent preempted is not counted), and the total calls.
#include <time.h>
#include <tl_aot/launcher_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace rt = ::tl_aot::rt;

namespace {
// The fake driver: one device of compute capability 9.0 whose module has kernel "k".
CUresult f_ok0(unsigned int) {
  return CUDA_SUCCESS;
}
CUresult f_count(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult f_get(CUdevice* d, int i) {
  *d = i;
  return CUDA_SUCCESS;
}
CUresult f_attr(int* v, CUdevice_attribute a, CUdevice) {
  *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR            ? 9
       : a == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN ? 232448
                                                                    : 0;
  return CUDA_SUCCESS;
}
CUcontext const kCtx = reinterpret_cast<CUcontext>(0x1000);
CUresult f_retain(CUcontext* c, CUdevice) {
  *c = kCtx;
  return CUDA_SUCCESS;
}
CUresult f_release(CUdevice) {
  return CUDA_SUCCESS;
}
CUresult f_getcur(CUcontext* c) {
  *c = kCtx;
  return CUDA_SUCCESS;
}  // the device's context is current, as under torch
CUresult f_push(CUcontext) {
  return CUDA_SUCCESS;
}
CUresult f_pop(CUcontext* c) {
  *c = nullptr;
  return CUDA_SUCCESS;
}
CUresult f_load(CUmodule* m, const void*) {
  *m = reinterpret_cast<CUmodule>(0x2000);
  return CUDA_SUCCESS;
}
CUresult f_unload(CUmodule) {
  return CUDA_SUCCESS;
}
CUresult f_getfn(CUfunction* f, CUmodule, const char*) {
  *f = reinterpret_cast<CUfunction>(0x3000);
  return CUDA_SUCCESS;
}
CUresult f_fnattr(int* v, CUfunction_attribute, CUfunction) {
  *v = 0;
  return CUDA_SUCCESS;
}
CUresult f_setattr(CUfunction, CUfunction_attribute, int) {
  return CUDA_SUCCESS;
}
CUresult f_capturing(CUstream, CUstreamCaptureStatus* s) {
  *s = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

rt::Driver fake_driver() {
  rt::Driver d;
  d.ok = true;
  d.Init = f_ok0;
  d.DeviceGetCount = f_count;
  d.DeviceGet = f_get;
  d.DeviceGetAttribute = f_attr;
  d.PrimaryCtxRetain = f_retain;
  d.PrimaryCtxRelease = f_release;
  d.CtxGetCurrent = f_getcur;
  d.CtxPushCurrent = f_push;
  d.CtxPopCurrent = f_pop;
  d.ModuleLoadData = f_load;
  d.ModuleUnload = f_unload;
  d.ModuleGetFunction = f_getfn;
  d.FuncGetAttribute = f_fnattr;
  d.FuncSetAttribute = f_setattr;
  d.StreamIsCapturing = f_capturing;
  return d;
}

// An entry add(X: float32[n], Y: float32[n]) as the generated tables describe it.
const char* kKernels[] = {"k"};
int64_t kSmem[] = {0};
const int kCluster[] = {1};
const rt::Image kImages[] = {{"img", "sm_90a", 9, 0, true, false, 1, kKernels, kSmem, kCluster}};
const rt::Dim kDims[] = {{rt::kBind, {rt::kSymbol, 0}, "", ""}, {rt::kEqual, {rt::kSymbol, 0}, "[n]", "X"}, {}};
const rt::Value kStrides[] = {{rt::kConst, 1}, {}};
const rt::TensorSpec kTensors[] = {
    {"X", 1, "[n]", "float32", {{2, 32}}, 1, kDims + 0, kStrides, "(1,)", 64, {2, 32, 1}, nullptr, 0},
    {"Y", 1, "[n]", "float32", {{2, 32}}, 1, kDims + 1, kStrides, "(1,)", 64, {2, 32, 1}, nullptr, 0},
    {}};
const rt::SymbolSpec kSymbols[] = {{"n", 0, 0, 2147483647, -1, {rt::kConst, 0}, ""}, {}};
const rt::ArgRead kReads[] = {{"X", rt::kTensorArg, 0, 0, 0, ""}, {"Y", rt::kTensorArg, 1, 0, 0, ""}, {}};
const rt::Checks kChecks{kTensors,         2, 2,   kSymbols, 1, 0, nullptr, 0, 0, nullptr, {kReads, 2, "X, Y"},
                         {nullptr, 0, ""}, 0, true};
void no_launch(const rt::Frame&, const rt::EntrySlot& slot, CUstream, int, bool) {
  if (slot.kernels[0] == nullptr) std::abort();  // what a launch reads
}
const rt::LaunchFn kLaunches[] = {no_launch};
rt::EntrySlot g_slots[rt::kMaxDevices];
extern const rt::Library kLib;
const rt::Entry kEntry{"add", kImages, 1, g_slots, &kLib, &kChecks, kLaunches};
const rt::Entry* const kEntries[] = {&kEntry};
const rt::Library kLib{"bench", kEntries, 1};

double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

void calls(int n) {
  alignas(64) static float buf[1024];
  int64_t shape[] = {1024};
  DLTensor x{buf, DLDevice{kDLCUDA, 0}, 1, DLDataType{kDLFloat, 32, 1}, shape, nullptr, 0};
  DLTensor y = x;
  rt::Args<2, 1, 0, 0> args;
  for (int i = 0; i < n; ++i) {
    args.t[0] = &x;
    args.t[1] = &y;
    rt::run(kEntry, args, nullptr, true, nullptr, false);
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: call_path THREADS CALLS ROUNDS\n");
    return 2;
  }
  const int threads = std::atoi(argv[1]), n = std::atoi(argv[2]), rounds = std::atoi(argv[3]);
  rt::set_driver_for_testing(fake_driver());
  calls(1000);  // loads the entry; warms up
  std::vector<double> ns, cpu_ns;
  for (int r = 0; r < rounds; ++r) {
    std::atomic<double> cpu{0};
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&] {
        ++ready;
        while (!go) std::this_thread::yield();
        const double c0 = thread_cpu_ns();
        calls(n);
        const double used = thread_cpu_ns() - c0;
        for (double seen = cpu.load(); !cpu.compare_exchange_weak(seen, seen + used);) {
        }
      });
    while (ready < threads) std::this_thread::yield();
    const auto t0 = std::chrono::steady_clock::now();
    go = true;
    for (auto& t : ts) t.join();
    const double wall = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    ns.push_back(wall / n);  // per call of one thread: threads run at once
    cpu_ns.push_back(cpu.load() / (static_cast<double>(n) * threads));
  }
  std::sort(ns.begin(), ns.end());
  std::sort(cpu_ns.begin(), cpu_ns.end());
  std::printf(
      "{\"threads\": %d, \"calls\": %lld, \"ns_per_call\": %.2f, \"ns_min\": %.2f, \"cpu_ns_per_call\": %.2f}\n",
      threads, static_cast<long long>(threads) * n * rounds, ns[ns.size() / 2], ns[0], cpu_ns[cpu_ns.size() / 2]);
  return rt::cleanup(kLib);
}
