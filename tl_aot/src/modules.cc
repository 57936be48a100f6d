// tl_aot launcher runtime, modules: per-device state (a retained primary context), image
// selection, loading an entry's module and kernels (find_kernel_by_pattern), prepare, and cleanup
// once the launches in flight have drained.
#include "tl_aot/launcher_runtime.h"

#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tl_aot {
namespace rt {
inline namespace v4 {  // v4: TensorSpec holds packed sub-byte tensors (v3: Entry and EntrySlot, table-driven checks)

// ------------------------------------------------------------------------------------------------
// Per-device state
// ------------------------------------------------------------------------------------------------
static std::mutex g_mutex;  // loading, prepare and cleanup take turns; launches never take it
DeviceSlot g_devices[kMaxDevices];
InFlightShard g_in_flight[kInFlightShards];

// An exact match (the arch-specific one where the library has both sm_120 and sm_120a: it is what
// TileLang's JIT compiles on that GPU, and a plain image of a kernel using arch-specific instructions
// holds TileLang's trap in their place), else SASS of the same major from an older minor (binary
// compatible), else the newest PTX not newer than the device.
int select_image(const Image* images, int n, int major, int minor) {
  int best = -1;
  for (int i = 0; i < n; ++i)
    if (images[i].major == major && images[i].minor == minor &&
        (best < 0 || (images[i].arch_specific && !images[best].arch_specific)))
      best = i;
  if (best >= 0) return best;
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

// The variants of `entry` (any entry: nullptr) the build left out, for the arch labelled `label` (any: ""),
// as "<entry> (<arch>): <error>" joined by "; " ("" when none): Library::left_out, a line each.
static std::string left_out_of(const Library& lib, const char* entry, const std::string& label) {
  std::string found;
  const char* p = lib.left_out ? lib.left_out : "";
  while (*p) {
    const char* end = std::strchr(p, '\n');
    std::string line = end ? std::string(p, end) : std::string(p);
    p = end ? end + 1 : p + line.size();
    size_t t1 = line.find('\t');
    size_t t2 = t1 == std::string::npos ? std::string::npos : line.find('\t', t1 + 1);
    if (t2 == std::string::npos) continue;
    std::string who = line.substr(0, t1), arch = line.substr(t1 + 1, t2 - t1 - 1);
    if ((entry && who != entry) || (!label.empty() && arch != label)) continue;
    found += (found.empty() ? "" : "; ") + who + " (" + arch + "): " + line.substr(t2 + 1);
  }
  return found;
}

std::string check_images(const Library& lib, const std::string& label) {
  bool any = false;
  for (int i = 0; i < lib.num_entries; ++i) {
    const Entry& e = *lib.entries[i];
    for (int k = 0; k < e.num_images; ++k) {
      const Image& img = e.images[k];
      std::string have = is_pack_ref(img.data) ? pack_ref_label(img.data) : std::string(img.arch) + (img.ptx ? "_ptx" : "");
      if (have != label) continue;
      any = true;
      if (!is_pack_ref(img.data)) continue;  // embedded in the library itself
      std::string why;
      if (packed_image(img.data, &why).empty()) return std::string(e.name) + ": " + why;
    }
  }
  if (!any) {
    std::string built = lib.num_entries ? built_archs(lib.entries[0]->images, lib.entries[0]->num_images) : "";
    std::string left = left_out_of(lib, nullptr, label);
    return std::string(lib.name) + " has no " + label + " image (built for " + built + ")" +
           (left.empty() ? "" : "; the build left it out (--keep-going): " + left);
  }
  return "";
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
    std::string sm = std::to_string(ds.major) + std::to_string(ds.minor);
    std::string msg = std::string(name) + ": no kernel image fits cuda:" + std::to_string(device) + " (sm_" + sm + "); " +
                      lib.name + " was built for " + built_archs(entry.images, entry.num_images);
    // Variants the build left out: rebuilding for their arch would fail the same way, so say why instead.
    std::string left = left_out_of(lib, name, "");
    fail("RuntimeError", msg + (left.empty() ? ". Rebuild with --arch " + sm + (ds.major >= 9 ? "a" : "")
                                             : ", and left out (--keep-going) " + left));
  }
  ContextGuard guard(name, ds.ctx);
  const Image& img = entry.images[v];
  std::string unpacked;  // a packed image's bytes, read from its pack beside the library (packs.cc)
  const char* data = img.data;
  if (is_pack_ref(data)) {
    std::string why;
    unpacked = packed_image(data, &why);
    if (unpacked.empty())
      fail("RuntimeError", std::string(name) + ": cuda:" + std::to_string(device) + " (sm_" + std::to_string(ds.major) +
                               std::to_string(ds.minor) + ") needs " + lib.name + "'s " + img.arch + " image, but " + why);
    data = unpacked.data();
  }
  CUmodule module = nullptr;
  CUresult r = d.ModuleLoadData(&module, data);
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

int64_t launches_in_flight() {
  int64_t n = 0;
  for (const InFlightShard& s : g_in_flight) n += s.n.load(std::memory_order_seq_cst);
  return n;
}

// Waits until no launch is counted in flight, at most `drain_ms`; false if some still are. Each
// shard is read after every slot was marked unloaded, so a launch it misses saw its slot unloaded.
static bool drain(int64_t drain_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(drain_ms);
  for (const InFlightShard& s : g_in_flight) {
    for (int spins = 0; s.n.load(std::memory_order_seq_cst) != 0; ++spins) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      if (spins < 64)
        std::this_thread::yield();  // a launch is a few microseconds of driver work
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));  // one blocked in the driver's queue
    }
  }
  return true;
}

// Retire every slot (launches from now on wait for the mutex), wait for the launches in flight, then
// unload every module and release every retained primary context (even if an unload failed), clear
// all state and return the last error (0 when all went well). Safe twice; a later call
// re-initialises. If launches do not drain in time (one blocked for good, or cleanup called from
// inside a launch), the slots are restored and nothing is unloaded: a clear error instead of a hang.
int cleanup(const Library& lib, int64_t drain_ms) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Driver& d = driver();
  if (!d.ok) return 0;
  std::vector<int> was(static_cast<size_t>(lib.num_entries) * kMaxDevices);
  for (int i = 0; i < lib.num_entries; ++i)
    for (int dev = 0; dev < kMaxDevices; ++dev)
      was[i * kMaxDevices + dev] = lib.entries[i]->slots[dev].loaded.exchange(0, std::memory_order_seq_cst);
  if (!drain(drain_ms)) {
    for (int i = 0; i < lib.num_entries; ++i)
      for (int dev = 0; dev < kMaxDevices; ++dev)
        lib.entries[i]->slots[dev].loaded.store(was[i * kMaxDevices + dev], std::memory_order_seq_cst);
    fail("RuntimeError", std::string("cleanup_module: ") + std::to_string(launches_in_flight()) + " launch(es) of " +
                             lib.name + " still in flight after " + std::to_string(drain_ms) +
                             " ms; nothing was unloaded (was cleanup_module called from inside a launch, or is a "
                             "launch blocked in the driver?)");
  }
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

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot
