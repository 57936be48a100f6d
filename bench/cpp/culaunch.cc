// The floor's second half (issue 5): cuLaunchKernel in a plain C++ loop on the very cubin tl_aot
// embedded for an entry, timing the host cost of each launch with the GPU kept out of the way.
//
//   culaunch CUBIN KERNEL GRID_X BLOCK_X SMEM NUM_PTR_ARGS BYTES [CALLS] [BATCH]
//
// Each pointer argument gets its own BYTES-sized device buffer. Launches go in batches of BATCH
// on the legacy default stream (torch's default): the batch is timed (host enqueue only), then the
// stream is synchronised outside the timed region, so the figure is host cost, not GPU throughput.
// Prints one JSON object. The driver is resolved with dlopen like tl_aot's launcher, so this
// builds on a machine without libcuda.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "driver.h"

using bench::check;
using bench::die;
using bench::median;

int main(int argc, char** argv) {
  bench::g_program = "culaunch";
  if (argc < 8) die("usage: culaunch CUBIN KERNEL GRID_X BLOCK_X SMEM NUM_PTR_ARGS BYTES [CALLS] [BATCH]");
  const std::string cubin_path = argv[1];
  const std::string kernel = argv[2];
  const unsigned grid = static_cast<unsigned>(std::atoi(argv[3]));
  const unsigned block = static_cast<unsigned>(std::atoi(argv[4]));
  const unsigned smem = static_cast<unsigned>(std::atoi(argv[5]));
  const int nptr = std::atoi(argv[6]);
  const size_t bytes = static_cast<size_t>(std::atoll(argv[7]));
  const int calls = argc > 8 ? std::atoi(argv[8]) : 20000;
  const int batch = argc > 9 ? std::atoi(argv[9]) : 100;
  if (nptr <= 0 || nptr > 16 || calls <= 0 || batch <= 0) die("bad NUM_PTR_ARGS, CALLS or BATCH");

  const bench::Driver cu = bench::load_driver();
  CUfunction fn = bench::load_kernel(cu, cubin_path, kernel, smem);
  std::vector<CUdeviceptr> ptrs(nptr);
  std::vector<void*> args(nptr);
  for (int i = 0; i < nptr; ++i) {
    check(cu.MemAlloc(&ptrs[i], bytes), "cuMemAlloc");
    args[i] = &ptrs[i];
  }
  CUstream stream = nullptr;  // legacy default stream, as torch's default stream
  auto launch = [&] { return cu.LaunchKernel(fn, grid, 1, 1, block, 1, 1, smem, stream, args.data(), nullptr); };

  using clock = std::chrono::steady_clock;
  for (int i = 0; i < 2000; ++i) check(launch(), "cuLaunchKernel");
  check(cu.CtxSynchronize(), "cuCtxSynchronize");

  // Host enqueue cost: batches timed without the synchronisation.
  std::vector<double> per_call;
  for (int done = 0; done < calls; done += batch) {
    auto t0 = clock::now();
    for (int i = 0; i < batch; ++i) launch();
    auto t1 = clock::now();
    check(cu.CtxSynchronize(), "cuCtxSynchronize");
    per_call.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / batch);
  }
  // Back to back with the final synchronisation: bound by the GPU when it is slower than the host.
  auto t0 = clock::now();
  for (int i = 0; i < calls; ++i) launch();
  check(cu.CtxSynchronize(), "cuCtxSynchronize");
  double stream_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count() / calls;

  std::printf("{\"us_per_launch\": %.4f, \"min\": %.4f, \"max\": %.4f, \"batches\": %zu, \"batch\": %d, "
              "\"back_to_back_us\": %.4f, \"calls\": %d}\n",
              median(per_call), *std::min_element(per_call.begin(), per_call.end()),
              *std::max_element(per_call.begin(), per_call.end()), per_call.size(), batch, stream_us, calls);
  return 0;
}
