// Part of tl_aot's launcher runtime (tl_aot/launcher_runtime.h includes every part in order):
// per-device and per-entry state: images, slots, entries, the library, loading, cleanup.
#ifndef TL_AOT_RUNTIME_MODULES_H_
#define TL_AOT_RUNTIME_MODULES_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "tl_aot/runtime/base.h"

namespace tl_aot {
namespace rt {
inline namespace v4 {

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
  const char* left_out = "";  // the variants the build left out (--keep-going): "<entry>\t<arch>\t<error>\n" each
};

// "" when this machine's driver loads `lib` (or there is no driver); else the one message saying
// which driver it needs and the two ways out (an older-CUDA build, a driver update).
std::string driver_too_old(const Library& lib);

extern DeviceSlot g_devices[kMaxDevices];

int select_image(const Image* images, int n, int major, int minor);
CUresult find_kernel_by_pattern(CUmodule module, const char* pattern, CUfunction* out, std::string* why);

// Load `entry`'s image on `device` (first call per device, or the first after a cleanup). `arg`
// names the tensor that chose the device; `stream` is the call's (a first call under CUDA graph
// capture fails cleanly). Takes the library's mutex, so it waits while a cleanup runs.
void init_entry(const Library& lib, const Entry& entry, int device, const char* arg, CUstream stream,
                bool prepare = false);

// ----------------------------------------------------------------------------------------------
// Launches in flight, so that cleanup never unloads what a launch is using. A launch counts itself
// in (one atomic increment) before it reads its entry's slot and out (one decrement) after its last
// driver call; cleanup first marks every slot unloaded, then waits until no launch is counted, and
// only then unloads modules and releases contexts. Both sides use sequentially consistent order
// (a Dekker handshake): either the launch sees its slot unloaded (and loads it again, after the
// cleanup, under the mutex), or the cleanup sees the launch counted (and waits for it). The count
// is spread over cache-line shards picked by the caller's stack address, so threads launching at
// once rarely share a line; the steady path takes no lock and builds no string.
// ----------------------------------------------------------------------------------------------
struct alignas(64) InFlightShard {
  std::atomic<int64_t> n{0};
};
constexpr int kInFlightShards = 32;  // in_flight_shard() takes 5 bits
extern InFlightShard g_in_flight[kInFlightShards];

// The shard of the calling thread: thread stacks lie megabytes apart, so the stack address (in
// 64 KiB units, Fibonacci-hashed) tells threads apart without thread-local storage.
inline std::atomic<int64_t>& in_flight_shard() {
  int probe = 0;
  const uint64_t at = reinterpret_cast<uintptr_t>(&probe) >> 16;
  return g_in_flight[(at * 0x9E3779B97F4A7C15ull) >> 59].n;  // the top 5 bits: kInFlightShards == 32
}

// One launch of `entry` on `device`, counted in flight from construction to destruction: the
// entry's slot (its module, kernels and the device's context) stays loaded meanwhile. Loads the
// entry on first use, or again after a cleanup, without being counted while it waits or loads.
class Launching {
 public:
  Launching(const Library& lib, const Entry& entry, int device, const char* arg, CUstream stream)
      : shard_(in_flight_shard()) {
    for (;;) {
      shard_.fetch_add(1, std::memory_order_seq_cst);
      const int v = entry.slots[device].loaded.load(std::memory_order_seq_cst);
      if (TL_AOT_LIKELY(v != 0)) {
        variant_ = v - 1;
        return;
      }
      shard_.fetch_sub(1, std::memory_order_release);  // not counted while loading (cleanup may hold the mutex)
      init_entry(lib, entry, device, arg, stream);
    }
  }
  ~Launching() { shard_.fetch_sub(1, std::memory_order_release); }
  Launching(const Launching&) = delete;
  Launching& operator=(const Launching&) = delete;

  // The index of the loaded image in the entry's image table.
  int variant() const { return variant_; }

 private:
  std::atomic<int64_t>& shard_;
  int variant_ = -1;
};

// How long cleanup waits for launches in flight before it refuses (nothing unloaded, state kept).
constexpr int64_t kCleanupDrainMs = 10000;

// Load every entry of `lib` on `device` now (before CUDA graph capture).
void prepare(const Library& lib, int device);
// "" when every image of arch `label` ("sm_90a", "sm_80_ptx") is at hand (embedded, or in its pack
// beside the library, of this build and intact), else the first problem, naming what to install.
std::string check_images(const Library& lib, const std::string& label);
// Unload every module and release every retained context once no launch is in flight; returns the
// last CUresult (0 when all went well). Launches that start meanwhile wait, then load again. If
// launches are still in flight after `drain_ms`, raises a RuntimeError and unloads nothing.
int cleanup(const Library& lib, int64_t drain_ms = kCleanupDrainMs);
// Launches counted in flight now (all shards): 0 whenever no launch of this library is running.
int64_t launches_in_flight();

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

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot

#endif  // TL_AOT_RUNTIME_MODULES_H_
