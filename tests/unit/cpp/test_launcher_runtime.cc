// Unit tests of tl_aot's launcher runtime against a fake CUDA driver (no GPU, no libcuda).
// Built and run by tests/unit/test_runtime_cpp.py; prints "ok <n>" and exits 0 when all pass.
#include <tl_aot/launcher_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

namespace rt = ::tl_aot::rt;

static int g_failed = 0, g_passed = 0;
#define CHECK(cond)                                                  \
  do {                                                               \
    if (cond) {                                                      \
      ++g_passed;                                                    \
    } else {                                                         \
      ++g_failed;                                                    \
      std::fprintf(stderr, "%s:%d: CHECK(%s)\n", __FILE__, __LINE__, #cond); \
    }                                                                \
  } while (0)

// ---- the fake driver -------------------------------------------------------------------------
static std::vector<std::string> g_functions;  // names in the loaded module
static std::atomic<int> g_loads{0}, g_unloads{0}, g_releases{0};
static std::atomic<int> g_load_delay_ms{5};  // widens the init race window; 0 for the cleanup stress
static std::atomic<bool> g_live[1 << 16];     // module n (handle 0x2000 + n) loaded and not yet unloaded
static CUresult g_unload_result = CUDA_SUCCESS;
static int g_static_smem = 1024, g_optin = 232448, g_major = 9, g_minor = 0;
static int g_set_dynamic = -1;

static CUresult f_ok0(unsigned int) { return CUDA_SUCCESS; }
static CUresult f_count(int* n) { *n = 2; return CUDA_SUCCESS; }
static CUresult f_get(CUdevice* d, int i) { *d = i; return CUDA_SUCCESS; }
static CUresult f_attr(int* v, CUdevice_attribute a, CUdevice) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = g_major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = g_minor; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = g_optin; break;
    default: *v = 0;
  }
  return CUDA_SUCCESS;
}
static CUresult f_retain(CUcontext* c, CUdevice d) { *c = reinterpret_cast<CUcontext>(0x1000 + d); return CUDA_SUCCESS; }
static CUresult f_release(CUdevice) { ++g_releases; return CUDA_SUCCESS; }
static CUcontext g_current_ctx = nullptr;  // the context "made current" by the caller (torch, the runtime API)
static CUresult f_getcur(CUcontext* c) { *c = g_current_ctx; return CUDA_SUCCESS; }
static CUresult f_getdev(CUdevice* d) {  // device handles are 100 + ordinal: not the ordinal itself
  if (g_current_ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *d = 100 + static_cast<int>(reinterpret_cast<uintptr_t>(g_current_ctx) - 0x1000);
  return CUDA_SUCCESS;
}
static CUresult f_get_handle(CUdevice* d, int i) { *d = 100 + i; return CUDA_SUCCESS; }
static CUresult f_push(CUcontext) { return CUDA_SUCCESS; }
static CUresult f_pop(CUcontext* c) { *c = nullptr; return CUDA_SUCCESS; }
static CUresult f_load(CUmodule* m, const void*) {
  const int n = ++g_loads % (1 << 16);
  std::this_thread::sleep_for(std::chrono::milliseconds(g_load_delay_ms.load()));
  g_live[n] = true;
  *m = reinterpret_cast<CUmodule>(0x2000 + static_cast<uintptr_t>(n));
  return CUDA_SUCCESS;
}
static bool module_live(CUmodule m) {
  const uintptr_t n = reinterpret_cast<uintptr_t>(m) - 0x2000;
  return m != nullptr && n < (1 << 16) && g_live[n].load();
}
static CUresult f_unload(CUmodule m) {
  ++g_unloads;
  g_live[reinterpret_cast<uintptr_t>(m) - 0x2000] = false;
  return g_unload_result;
}
static CUresult f_getfn(CUfunction* f, CUmodule, const char* name) {
  for (size_t i = 0; i < g_functions.size(); ++i)
    if (g_functions[i] == name) { *f = reinterpret_cast<CUfunction>(0x3000 + i); return CUDA_SUCCESS; }
  return CUDA_ERROR_NOT_FOUND;
}
static CUresult f_fncount(unsigned int* n, CUmodule) { *n = static_cast<unsigned>(g_functions.size()); return CUDA_SUCCESS; }
static CUresult f_enum(CUfunction* fs, unsigned int n, CUmodule) {
  for (unsigned i = 0; i < n; ++i) fs[i] = reinterpret_cast<CUfunction>(0x3000 + i);
  return CUDA_SUCCESS;
}
static CUresult f_name(const char** name, CUfunction f) {
  *name = g_functions[reinterpret_cast<uintptr_t>(f) - 0x3000].c_str();
  return CUDA_SUCCESS;
}
static CUresult f_fnattr(int* v, CUfunction_attribute a, CUfunction) {
  *v = a == CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES ? g_static_smem : 0;
  return CUDA_SUCCESS;
}
static CUresult f_setattr(CUfunction, CUfunction_attribute a, int v) {
  if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) g_set_dynamic = v;
  return CUDA_SUCCESS;
}
static CUresult f_capturing(CUstream, CUstreamCaptureStatus* s) { *s = CU_STREAM_CAPTURE_STATUS_NONE; return CUDA_SUCCESS; }
static CUresult f_errname(CUresult, const char** s) { *s = "CUDA_ERROR_FAKE"; return CUDA_SUCCESS; }

static rt::Driver fake_driver() {
  rt::Driver d;
  d.ok = true;
  d.Init = f_ok0;
  d.DeviceGetCount = f_count;
  d.DeviceGet = f_get;
  d.DeviceGetAttribute = f_attr;
  d.PrimaryCtxRetain = f_retain;
  d.PrimaryCtxRelease = f_release;
  d.CtxGetCurrent = f_getcur;
  d.CtxGetDevice = f_getdev;
  d.CtxPushCurrent = f_push;
  d.CtxPopCurrent = f_pop;
  d.ModuleLoadData = f_load;
  d.ModuleUnload = f_unload;
  d.ModuleGetFunction = f_getfn;
  d.ModuleGetFunctionCount = f_fncount;
  d.ModuleEnumerateFunctions = f_enum;
  d.FuncGetName = f_name;
  d.FuncGetAttribute = f_fnattr;
  d.FuncSetAttribute = f_setattr;
  d.StreamIsCapturing = f_capturing;
  d.GetErrorName = f_errname;
  d.GetErrorString = f_errname;
  return d;
}

// ---- a one-entry library ---------------------------------------------------------------------
static const char* kKernels[] = {"gemm_kernel"};
static int64_t kSmem[] = {48 * 1024};
static const int kCluster[] = {1};
static const rt::Image kImages[] = {
    {"img80", "sm_80", 8, 0, false, false, 1, kKernels, kSmem, kCluster},
    {"img90a", "sm_90a", 9, 0, true, false, 1, kKernels, kSmem, kCluster},
};
static rt::EntrySlot g_slots[rt::kMaxDevices];
static const rt::Entry kEntry{"gemm", kImages, 2, g_slots};
static const rt::Entry* const kEntries[] = {&kEntry};
static const rt::Library kLib{"lib", kEntries, 1};

// An entry whose sm_80 variant the build left out (--keep-going): only its sm_90a image is in the library.
static rt::EntrySlot g_left_slots[rt::kMaxDevices];
static const rt::Entry kLeftEntry{"big", kImages + 1, 1, g_left_slots};
static const rt::Entry* const kLeftEntries[] = {&kLeftEntry};
static const rt::Library kLibLeftOut{
    "libleft",
    kLeftEntries,
    1,
    0,
    "",
    "",
    "big\tsm_80\tkernel main_kernel cannot launch on sm_80: 204800 bytes of shared memory\n"};

// The variant a launch of `entry` on `device` would use (loading it on first use), as rt::run gets it.
static int loaded_variant(const rt::Library& lib, const rt::Entry& entry, int device) {
  const rt::Launching launching(lib, entry, device, "A", nullptr);
  return launching.variant();
}

template <class F>
static std::string error_of(F fn) {
  try {
    fn();
  } catch (const ::tvm::ffi::Error& e) {
    return e.message();
  }
  return "";
}

static const rt::Library kLib13{"lib13", kEntries, 1, 13000, "580.65.06", "nvcc 13.0.88 from pip (nvidia-cuda-nvcc 13.0.88)"};
static const rt::Library kLib12{"lib12", kEntries, 1, 12000, "525.60.13", "NVRTC + ptxas 12.9.86 from pip"};
static const rt::Library kLibPtx{"libptx", kEntries, 1, 12090, "575.51.03", "nvcc 12.9.86 from PATH"};

// ---- the table-driven argument checker --------------------------------------------------------
// An entry pair(X: float16[n * 2, 8], Y: float16[m, n], k: int32) whose Y's dim 1 is solved n and
// whose X dim 0 is checked against it (a late check), plus a derived symbol: the shapes of the
// generated tables, without a generated launcher.
static int64_t pair_eval(const rt::Frame& x, int i) {
  const int64_t s_n = x.s[1];
  const int32_t a_k = static_cast<int32_t>(x.a[0].i);
  switch (i) {
    case 0:
      return s_n * 2;
    case 1:
      return rt::floordiv(x.t[1]->shape[1] + a_k, 1) - a_k;  // solved from Y dim 1
    case 2:
      return s_n;
  }
  return 0;
}
static const rt::Value kPairValues[] = {{rt::kConst, 8}, {rt::kConst, 1}, {rt::kExpr, 2}, {rt::kConst, 1}, {}};
static const rt::Dim kPairDims[] = {{rt::kSkip, {rt::kConst, 0}, "", ""},
                                    {rt::kEqual, {rt::kConst, 8}, "[n * 2, 8] with dim 1 = 8", ""},
                                    {rt::kBind, {rt::kSymbol, 0}, "", ""},
                                    {rt::kSkip, {rt::kConst, 0}, "", ""},
                                    {}};
static const rt::TensorSpec kPairTensors[] = {
    {"X",
     2,
     "[n * 2, 8]",
     "float16",
     {{2, 16}},
     1,
     kPairDims + 0,
     kPairValues + 0,
     "(8, 1)",
     64,
     {2, 16, 1},
     nullptr,
     0},
    {"Y", 2, "[m, n]", "float16", {{2, 16}}, 1, kPairDims + 2, kPairValues + 2, "(n, 1)", 0, {2, 16, 1}, nullptr, 0},
    {}};
static const rt::SymbolSpec kPairSymbols[] = {
    {"m", 1, 0, 2147483647, -1, {rt::kConst, 0}, ""},
    {"n", 1, 1, 2147483647, 1, {rt::kExpr, 2}, "[m, n] with dim 1 = n for an integer n in [1, 2147483647]"},
    {}};
static const rt::LateCheck kPairLate[] = {{0, 0, {rt::kExpr, 0}, "[n * 2, 8] with dim 0 = n * 2 = "}, {}};
static const rt::ArgRead kPairReads[] = {{"X", rt::kTensorArg, 0, 0, 0, ""},
                                         {"Y", rt::kTensorArg, 1, 0, 0, ""},
                                         {"k", rt::kIntArg, 0, -2147483648LL, 2147483647, "int32"},
                                         {}};
// clang-format off: the fields of rt::Checks, in order
static const rt::Checks kPairChecks{kPairTensors, 2, 2, kPairSymbols, 2, 1, kPairLate, 1, 1, pair_eval,
                                    {kPairReads, 3, "X, Y, k"}, {nullptr, 0, ""}, 0, true};
// clang-format on
static rt::EntrySlot g_pair_slots[rt::kMaxDevices];
static const rt::Entry kPair{"pair", kImages, 2, g_pair_slots, nullptr, &kPairChecks, nullptr};

struct FakeTensor {
  int64_t shape[4];
  int64_t strides[4];
  DLTensor t;
  FakeTensor(void* data, int device, DLDataType dtype, std::initializer_list<int64_t> dims, bool with_strides = false) {
    int i = 0;
    for (int64_t d : dims) shape[i++] = d;
    for (int k = i - 1, s = 1; k >= 0; --k) strides[k] = s, s *= static_cast<int>(shape[k]);
    t = DLTensor{data, DLDevice{kDLCUDA, device}, i, dtype, shape, with_strides ? strides : nullptr, 0};
  }
};

static std::string check_pair(FakeTensor& x, FakeTensor& y, int64_t k, int* device = nullptr,
                              rt::Frame* out = nullptr) {
  static rt::Args<2, 2, 1, 0> args;
  args.t[0] = &x.t;
  args.t[1] = &y.t;
  args.a[0].i = k;
  return error_of([&] {
    int d = rt::check_args(kPair, args, false);
    if (device) *device = d;
    if (out) *out = args;
  });
}

// An entry arange(out: int32[n], n: int32) with no input tensor: the device is its output's.
static int64_t arange_eval(const rt::Frame& x, int) {
  return static_cast<int32_t>(x.a[0].i);
}
static const rt::Value kArangeValues[] = {{rt::kExpr, 0}, {}};
static const rt::Dim kArangeDims[] = {{rt::kSkip, {rt::kConst, 0}, "", ""}, {}};
static const rt::TensorSpec kArangeTensors[] = {
    {"out", 1, "[n]", "int32", {{0, 32}}, 1, kArangeDims, nullptr, "()", 64, {0, 32, 1}, kArangeValues, 1}, {}};
static const rt::LateCheck kArangeLate[] = {{0, 0, {rt::kExpr, 0}, "[n] with dim 0 = n = "}, {}};
// clang-format off: the fields of rt::Checks, in order
static const rt::Checks kArangeChecks{kArangeTensors, 1, 0, nullptr, 0, 1, kArangeLate, 0, 1, arange_eval,
                                      {nullptr, 2, "out, n"}, {nullptr, 1, "n"}, 0, true};
// clang-format on
static const rt::Entry kArange{"arange", kImages, 2, g_pair_slots, nullptr, &kArangeChecks, nullptr};

static void test_tensorless() {
  alignas(64) static char buf[64];
  FakeTensor out(buf, 1, DLDataType{kDLInt, 32, 1}, {5});
  rt::Args<1, 0, 1, 1> args;
  args.t[0] = &out.t;
  args.a[0].i = 5;
  int device = -1;
  CHECK(error_of([&] { device = rt::check_args(kArange, args, false); }) == "" && device == 1);
  args.a[0].i = 4;
  CHECK(error_of([&] { rt::check_args(kArange, args, false); }) ==
        "arange: argument 'out' expected shape [n] with dim 0 = n = 4, got [5]");
}

// An entry pk(A: int4[m, n], B: int4[m, 128]) of packed sub-byte tensors, bound as TileLang's host code binds
// them: any 8-bit storage, the last dim two int4 a storage element (n = A.shape[1] * 2), strides but the last x 2.
static const rt::Value kPackedValues[] = {{rt::kSymbol, 1}, {rt::kConst, 1}, {rt::kConst, 128}, {rt::kConst, 1}, {}};
static const rt::Dim kPackedDims[] = {
    {rt::kBind, {rt::kSymbol, 0}, "", ""},
    {rt::kBind, {rt::kSymbol, 1}, "", ""},
    {rt::kEqual, {rt::kSymbol, 0}, "[m, 128] (packed in int8[m, 64]) with dim 0 = m = ", " (from 'A' dim 0)"},
    {rt::kEqual, {rt::kConst, 128}, "[m, 128] (packed in int8[m, 64]) with dim 1 = 128", ""},
    {}};
// clang-format off: one tensor a row
static const rt::TensorSpec kPackedTensors[] = {
    {"A", 2, "[m, n] (packed in int8[m, n / 2])", "int4 packed 2 per 8-bit element", {}, 0, kPackedDims + 0,
     kPackedValues + 0, "(n / 2, 1)", 64, {0, 8, 1}, nullptr, 0, 8, 2},
    {"B", 2, "[m, 128] (packed in int8[m, 64])", "int4 packed 2 per 8-bit element", {}, 0, kPackedDims + 2,
     kPackedValues + 2, "(64, 1)", 64, {0, 8, 1}, nullptr, 0, 8, 2},
    {}};
// clang-format on
static const rt::SymbolSpec kPackedSymbols[] = {
    {"m", 0, 0, 2147483647, -1, {rt::kConst, 0}, ""}, {"n", 0, 1, 2147483647, -1, {rt::kConst, 0}, ""}, {}};
static const rt::ArgRead kPackedReads[] = {{"A", rt::kTensorArg, 0, 0, 0, ""}, {"B", rt::kTensorArg, 1, 0, 0, ""}, {}};
// clang-format off: the fields of rt::Checks, in order
static const rt::Checks kPackedChecks{kPackedTensors, 2, 2, kPackedSymbols, 2, 0, nullptr, 0, 0, nullptr,
                                      {kPackedReads, 2, "A, B"}, {nullptr, 0, ""}, 0, true};
// clang-format on
static const rt::Entry kPacked{"pk", kImages, 2, g_pair_slots, nullptr, &kPackedChecks, nullptr};

static std::string check_packed(FakeTensor& a, FakeTensor& b, rt::Frame* out = nullptr) {
  static rt::Args<2, 2, 0, 0> args;
  args.t[0] = &a.t;
  args.t[1] = &b.t;
  return error_of([&] {
    rt::check_args(kPacked, args, false);
    if (out) *out = args;
  });
}

static void test_packed() {
  alignas(64) static char buf[64];
  const DLDataType i8{kDLInt, 8, 1}, u8{kDLUInt, 8, 1}, fp4x2{kDLFloat4_e2m1fn, 4, 2};
  FakeTensor a(buf, 1, i8, {3, 50}, true), b(buf, 1, u8, {3, 64}, true);
  rt::Frame f{};
  CHECK(check_packed(a, b, &f) == "");  // int8 and uint8 storage alike: TileLang checks bits, not the code
  CHECK(f.s[0] == 3 && f.s[1] == 100 && f.p[0] == buf);  // n bound from the storage's last dim, times 2
  FakeTensor b4(buf, 1, fp4x2, {3, 64}, true);           // torch.float4_e2m1fn_x2: 4 bits x 2 lanes
  CHECK(check_packed(a, b4) == "");
  FakeTensor ah(buf, 1, DLDataType{kDLFloat, 16, 1}, {3, 50});
  CHECK(check_packed(ah, b) == "pk: argument 'A' expected dtype int4 packed 2 per 8-bit element, got float16");
  FakeTensor bw(buf, 1, i8, {3, 128});  // one int4 a byte: unpacked
  CHECK(check_packed(a, bw) ==
        "pk: argument 'B' expected shape [m, 128] (packed in int8[m, 64]) with dim 1 = 128, got [3, 256] (packed in "
        "int8[3, 128])");
  FakeTensor bm(buf, 1, i8, {4, 64});
  CHECK(check_packed(a, bm) ==
        "pk: argument 'B' expected shape [m, 128] (packed in int8[m, 64]) with dim 0 = m = 3 (from 'A' dim 0), got "
        "[4, 128] (packed in int8[4, 64])");
  FakeTensor as(buf, 1, i8, {3, 50}, true);
  as.strides[0] = 64;  // columns 0..49 of an int8[3, 64]: int4 strides (128, 1), not (n, 1) = (100, 1)
  CHECK(check_packed(as, b) ==
        "pk: argument 'A' expected a contiguous tensor with strides (n / 2, 1), got strides (64, 1) (a transposed or "
        "sliced view? call .contiguous())");
  FakeTensor a0(buf, 1, i8, {3, 0});
  CHECK(check_packed(a0, b) ==
        "pk: argument 'A' expected dim 1 ('n') in [1, 2147483647], got [3, 0] (packed in int8[3, 0])");
}

static void test_checker() {
  test_tensorless();
  test_packed();
  alignas(64) static char buf[64];
  const DLDataType f16{kDLFloat, 16, 1};
  FakeTensor x(buf, 1, f16, {6, 8}), y(buf, 1, f16, {5, 3}, true);
  int device = -1;
  rt::Frame f{};
  CHECK(check_pair(x, y, 4, &device, &f) == "");
  CHECK(device == 1 && f.s[0] == 5 && f.s[1] == 3 && f.p[0] == buf);  // m bound, n solved from Y dim 1

  FakeTensor x3(buf, 1, f16, {6, 8, 1});
  CHECK(check_pair(x3, y, 4) == "pair: argument 'X' expected 2 dimension(s) [n * 2, 8], got 3 dimension(s) [6, 8, 1]");
  FakeTensor xf(buf, 1, DLDataType{kDLFloat, 32, 1}, {6, 8});
  CHECK(check_pair(xf, y, 4) == "pair: argument 'X' expected dtype float16, got float32");
  FakeTensor x9(buf, 1, f16, {6, 9});
  CHECK(check_pair(x9, y, 4) == "pair: argument 'X' expected shape [n * 2, 8] with dim 1 = 8, got [6, 9]");
  FakeTensor y0(buf, 0, f16, {5, 3});
  CHECK(check_pair(x, y0, 4) == "pair: argument 'Y' expected a tensor on cuda:1 like 'X', got a tensor on cuda:0");
  FakeTensor ym(buf, 1, f16, {0, 3});
  CHECK(check_pair(x, ym, 4) == "pair: argument 'Y' expected dim 0 ('m') in [1, 2147483647], got [0, 3]");
  FakeTensor yn(buf, 1, f16, {5, 0});
  CHECK(check_pair(x, yn, 4) ==
        "pair: argument 'Y' expected shape [m, n] with dim 1 = n for an integer n in [1, 2147483647], got [5, 0]");
  FakeTensor x7(buf, 1, f16, {7, 8});  // n = 3 from Y: X dim 0 must be 6
  CHECK(check_pair(x7, y, 4) == "pair: argument 'X' expected shape [n * 2, 8] with dim 0 = n * 2 = 6, got [7, 8]");
  FakeTensor ys(buf, 1, f16, {5, 3}, true);
  ys.strides[0] = 4;  // a sliced view
  CHECK(check_pair(x, ys, 4) ==
        "pair: argument 'Y' expected a contiguous tensor with strides (n, 1), got strides (4, 1) (a transposed or "
        "sliced view? call .contiguous())");
  FakeTensor xa(buf + 2, 1, f16, {6, 8});
  CHECK(check_pair(xa, y, 4).find("pair: argument 'X' expected a data pointer aligned to 64 bytes") == 0);
  FakeTensor xc(buf, 1, f16, {6, 8});
  xc.t.device.device_type = kDLCPU;
  CHECK(check_pair(xc, y, 4) == "pair: argument 'X' expected a CUDA tensor, got a tensor on cpu");

  // The argument count, as the TVM FFI call reads it.
  std::string msg = error_of([] { rt::call_form(kPair, nullptr, 1, "pair"); });
  CHECK(msg == "pair() takes 3 arguments (X, Y, k) and an optional stream, got 1");
  CHECK(error_of([] { CHECK(!rt::call_form(kPair, nullptr, 4, "pair")); }) == "");
}

// ---- cleanup against launches in flight ------------------------------------------------------
// An entry run through rt::run whose "launch" checks that what it was handed is still loaded: its
// module not unloaded, its kernel and its device's context set. A use after cleanup counts as dead.
static std::atomic<int> g_dead_uses{0}, g_launched{0};
static void live_launch(const rt::Frame&, const rt::EntrySlot& slot, CUstream, int device, bool) {
  if (!module_live(slot.module) || slot.kernels[0] == nullptr || rt::g_devices[device].ctx == nullptr) ++g_dead_uses;
  ++g_launched;
}
static const rt::LaunchFn kLiveLaunches[] = {live_launch, live_launch};
static rt::EntrySlot g_live_slots[rt::kMaxDevices];
extern const rt::Library kLiveLib;
static const rt::Entry kLive{"live", kImages, 2, g_live_slots, &kLiveLib, &kPairChecks, kLiveLaunches};
static const rt::Entry* const kLiveEntries[] = {&kLive};
const rt::Library kLiveLib{"livelib", kLiveEntries, 1};

// One call of entry `live` on cuda:1 through the call path (checks, in-flight count, context, launch).
static std::string run_live() {
  alignas(64) static char buf[64];
  const DLDataType f16{kDLFloat, 16, 1};
  FakeTensor x(buf, 1, f16, {6, 8}), y(buf, 1, f16, {5, 3});
  rt::Args<2, 2, 1, 0> args;
  args.t[0] = &x.t;
  args.t[1] = &y.t;
  args.a[0].i = 4;
  return error_of([&] { rt::run(kLive, args, nullptr, true, nullptr, false); });
}

// Runs `fn` on a thread of its own; done() says whether it has returned.
struct Async {
  std::atomic<bool> finished{false};
  std::thread thread;
  template <class F>
  explicit Async(F fn) : thread([this, fn] { fn(); finished = true; }) {}
  bool done() const { return finished.load(); }
  void join() { thread.join(); }
};

static void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

static void test_cleanup_waits_for_launches() {
  g_functions = {"gemm_kernel"};
  g_load_delay_ms = 0;
  rt::cleanup(kLib);

  // A launch in flight holds cleanup back: nothing is unloaded until it ends. A launch starting
  // meanwhile waits for the cleanup, then loads a fresh module; every launch saw a loaded slot.
  std::atomic<bool> release{false}, holding{false};
  CUmodule held_module = nullptr;
  Async holder([&] {
    const rt::Launching launching(kLib, kEntry, 1, "A", nullptr);
    held_module = g_slots[1].module;
    holding = true;
    while (!release) sleep_ms(1);
    if (!module_live(held_module)) ++g_dead_uses;
  });
  while (!holding) sleep_ms(1);
  CHECK(rt::launches_in_flight() == 1);
  const int unloads = g_unloads, loads = g_loads;
  int cleaned = -1;
  Async cleaner([&] { cleaned = rt::cleanup(kLib); });
  while (g_slots[1].loaded.load() != 0) sleep_ms(1);  // the cleanup has retired the slots
  sleep_ms(30);
  CHECK(!cleaner.done() && g_unloads == unloads && module_live(held_module));  // waiting for the launch
  CUmodule late_module = nullptr;
  Async late([&] {
    const rt::Launching launching(kLib, kEntry, 1, "A", nullptr);
    late_module = g_slots[1].module;
    if (!module_live(late_module)) ++g_dead_uses;
  });
  sleep_ms(30);
  CHECK(!late.done());  // its slot was retired: it waits for the cleanup instead of using the old module
  release = true;
  holder.join();
  cleaner.join();
  late.join();
  CHECK(cleaned == 0 && g_unloads == unloads + 1 && !module_live(held_module));
  CHECK(g_loads == loads + 1 && late_module != held_module && module_live(late_module));
  CHECK(rt::launches_in_flight() == 0 && g_dead_uses == 0);

  // A launch that never ends (here: cleanup called from inside it): a clear error after the wait,
  // nothing unloaded, the library as it was; once the launch ends, cleanup works.
  {
    const rt::Launching launching(kLib, kEntry, 1, "A", nullptr);
    const int before = g_unloads;
    std::string msg = error_of([] { rt::cleanup(kLib, 30); });
    CHECK(msg ==
          "cleanup_module: 1 launch(es) of lib still in flight after 30 ms; nothing was unloaded (was cleanup_module "
          "called from inside a launch, or is a launch blocked in the driver?)");
    CHECK(g_unloads == before && g_slots[1].loaded.load() == 2 && module_live(g_slots[1].module));
    CHECK(loaded_variant(kLib, kEntry, 1) == 1);  // still usable, no reload
  }
  CHECK(rt::cleanup(kLib, 30) == 0 && g_slots[1].loaded.load() == 0);

  // Stress: threads calling through rt::run while another cleans up over and over. Every call
  // succeeds, none uses an unloaded module or a released context, and the count returns to 0.
  // Each caller makes at least kCalls calls and goes on until kCleanups cleanups ran beside it.
  constexpr int kThreads = 4, kCalls = 2000, kCleanups = 20;
  std::atomic<int> running{kThreads}, errors{0}, cleanups{0}, calls{0};
  const int launched = g_launched;
  std::vector<std::thread> callers;
  for (int i = 0; i < kThreads; ++i)
    callers.emplace_back([&] {
      for (int k = 0; k < kCalls || cleanups < kCleanups; ++k, ++calls)
        if (!run_live().empty()) ++errors;
      --running;
    });
  std::thread cleaner2([&] {
    while (running > 0) {
      if (rt::cleanup(kLiveLib) == 0) ++cleanups;
      std::this_thread::yield();
    }
  });
  for (auto& t : callers) t.join();
  cleaner2.join();
  CHECK(errors == 0 && g_dead_uses == 0 && g_launched == launched + calls && calls >= kThreads * kCalls);
  CHECK(cleanups >= kCleanups && rt::launches_in_flight() == 0);
  std::fprintf(stderr, "cleanup stress: %d calls, %d cleanups, %d loads\n", calls.load(), cleanups.load(), g_loads.load());
  rt::cleanup(kLiveLib);
  rt::cleanup(kLib);
  g_load_delay_ms = 5;
}

int main() {
  // The driver floor: the driver's CUDA version (faked: one process, one reading) against each library's.
  setenv("TL_AOT_TESTING_DRIVER_VERSION", "12.8", 1);
  CHECK(rt::driver_version() == 12080);
  CHECK(rt::driver_too_old(kLib12).empty());
  CHECK(rt::driver_too_old(kLib).empty());  // no floor recorded
  std::string old = rt::driver_too_old(kLib13);
  CHECK(old ==
        "library lib13 was built with nvcc 13.0.88 from pip (nvidia-cuda-nvcc 13.0.88) and needs an NVIDIA driver "
        "supporting CUDA 13.0 or newer; this machine's driver supports CUDA 12.8. Either pip install "
        "'tl_aot[build-cu12]' (CUDA 12: loads on drivers >= 525.60.13) and rebuild, or update the NVIDIA driver to "
        "580.65.06 or newer.");
  CHECK(rt::driver_too_old(kLibPtx).find("rebuild with an older CUDA, or without +PTX archs") != std::string::npos);
  CHECK(rt::driver_too_old(kLibPtx).find("supporting CUDA 12.9 or newer") != std::string::npos);
  // Refused at the first call and by prepare, before the driver is touched: one message naming the entry.
  std::string msg = error_of([] { rt::init_entry(kLib13, kEntry, 0, "A", nullptr); });
  CHECK(msg == "gemm: " + old);
  msg = error_of([] { rt::prepare(kLib13, 0); });
  CHECK(msg == "tl_aot_prepare: " + old);

  rt::set_driver_for_testing(fake_driver());

  // Image selection: exact match; same-major older minor SASS; never an arch-specific image elsewhere; PTX.
  rt::Image imgs[] = {{"a", "sm_80", 8, 0, false, false, 0, nullptr, nullptr, nullptr},
                      {"b", "sm_86", 8, 6, false, false, 0, nullptr, nullptr, nullptr},
                      {"c", "sm_90a", 9, 0, true, false, 0, nullptr, nullptr, nullptr},
                      {"d", "sm_80", 8, 0, false, true, 0, nullptr, nullptr, nullptr}};
  CHECK(rt::select_image(imgs, 4, 8, 6) == 1);
  CHECK(rt::select_image(imgs, 4, 8, 9) == 1);
  CHECK(rt::select_image(imgs, 4, 9, 0) == 2);
  CHECK(rt::select_image(imgs, 3, 10, 0) == -1);  // sm_90a SASS never runs on sm_100
  CHECK(rt::select_image(imgs, 4, 12, 0) == 3);   // the PTX image is JIT-compiled there
  // sm_120 and sm_120a both built: the arch-specific image, in either order (the plain one may hold TileLang's
  // trap where the kernel's block-scaled MMA should be); a plain and a family image of one cc: the first.
  rt::Image both[] = {{"p", "sm_120", 12, 0, false, false, 0, nullptr, nullptr, nullptr},
                      {"a", "sm_120a", 12, 0, true, false, 0, nullptr, nullptr, nullptr},
                      {"f", "sm_120f", 12, 0, false, false, 0, nullptr, nullptr, nullptr}};
  CHECK(rt::select_image(both, 3, 12, 0) == 1);
  CHECK(rt::select_image(both + 1, 2, 12, 0) == 0);
  CHECK(rt::select_image(both, 1, 12, 0) == 0);
  CHECK(rt::select_image(both, 3, 12, 1) == 0);  // sm_121: the plain sm_120 SASS, never sm_120a

  // find_kernel_by_pattern: exact, a base name over its _N variants, ambiguity lists every match.
  CUfunction fn = nullptr;
  std::string why;
  g_functions = {"main_kernel", "main_kernel_1", "other"};
  CHECK(rt::find_kernel_by_pattern(nullptr, "main_kernel", &fn, &why) == CUDA_SUCCESS);
  g_functions = {"_Z11main_kernelv", "_Z13main_kernel_1v"};
  CHECK(rt::find_kernel_by_pattern(nullptr, "main_kernel", &fn, &why) == CUDA_SUCCESS &&
        reinterpret_cast<uintptr_t>(fn) == 0x3000);
  g_functions = {"a_main_kernel_x", "b_main_kernel_y"};
  CHECK(rt::find_kernel_by_pattern(nullptr, "main_kernel", &fn, &why) == CUDA_ERROR_NOT_FOUND);
  CHECK(why.find("ambiguous") != std::string::npos && why.find("a_main_kernel_x") != std::string::npos &&
        why.find("b_main_kernel_y") != std::string::npos);

  // Init: 8 threads race for the first call on device 1; the module loads once; 48 KiB of dynamic
  // shared memory (with static shared memory beside it) gets the opt-in attribute.
  g_functions = {"gemm_kernel"};
  std::vector<std::thread> threads;
  std::atomic<int> variants{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] { variants += loaded_variant(kLib, kEntry, 1); });
  for (auto& t : threads) t.join();
  CHECK(g_loads == 1);
  CHECK(variants == 8);  // every thread saw variant 1 (sm_90a)
  CHECK(g_set_dynamic == 48 * 1024);
  CHECK(g_slots[1].max_dynamic_smem[0] == 48 * 1024);

  // Cleanup after a failed unload still releases the context, clears state and reports the error.
  g_unload_result = CUDA_ERROR_INVALID_VALUE;
  CHECK(rt::cleanup(kLib) == CUDA_ERROR_INVALID_VALUE);
  CHECK(g_releases == 1 && g_slots[1].loaded.load() == 0 && g_slots[1].module == nullptr);
  g_unload_result = CUDA_SUCCESS;
  CHECK(rt::cleanup(kLib) == 0);  // twice is fine
  CHECK(loaded_variant(kLib, kEntry, 1) == 1 && g_loads == 2);  // and re-initialises
  rt::cleanup(kLib);

  // A kernel needing more shared memory than the device allows: a clear error, module unloaded.
  g_optin = 48 * 1024 + 512;  // static 1024 + dynamic 48 KiB does not fit
  int unloads = g_unloads;
  msg = error_of([] { loaded_variant(kLib, kEntry, 0); });
  CHECK(msg.find("gemm: kernel gemm_kernel needs 50176 bytes of shared memory (49152 dynamic + 1024 static)") == 0);
  CHECK(msg.find("allows a block at most 49664") != std::string::npos);
  CHECK(g_unloads == unloads + 1 && g_slots[0].loaded.load() == 0);
  g_optin = 232448;
  rt::cleanup(kLib);

  // No image for the device: names its sm and what was built.
  g_major = 7;
  g_minor = 5;
  msg = error_of([] { loaded_variant(kLib, kEntry, 0); });
  CHECK(msg.find("no kernel image fits cuda:0 (sm_75); lib was built for sm_80, sm_90a. Rebuild with --arch 75") !=
        std::string::npos);
  rt::cleanup(kLib);  // the device is read again on the next load
  // ... and when the build left the arch's variant out, why (rebuilding for it would fail the same way).
  g_major = 8;
  g_minor = 0;
  msg = error_of([] { loaded_variant(kLibLeftOut, kLeftEntry, 0); });
  CHECK(msg ==
        "big: no kernel image fits cuda:0 (sm_80); libleft was built for sm_90a, and left out (--keep-going) "
        "big (sm_80): kernel main_kernel cannot launch on sm_80: 204800 bytes of shared memory");
  CHECK(rt::check_images(kLibLeftOut, "sm_80") ==
        "libleft has no sm_80 image (built for sm_90a); the build left it out (--keep-going): big (sm_80): kernel "
        "main_kernel cannot launch on sm_80: 204800 bytes of shared memory");
  CHECK(rt::check_images(kLibLeftOut, "sm_90a").empty() &&
        rt::check_images(kLib, "sm_86") == "lib has no sm_86 image (built for sm_80, sm_90a)");
  g_major = 9;
  g_minor = 0;
  rt::cleanup(kLibLeftOut);

  // Argument checks and sizes.
  CHECK(rt::checked_bytes("e", "w", {1024, 1024}, 4) == 4 * 1024 * 1024);
  msg = error_of([] { rt::checked_bytes("e", "w", {int64_t(1) << 40, int64_t(1) << 30}, 4); });
  CHECK(msg.find("e: buffer 'w' would need more than 2^63 bytes") == 0);
  int64_t grid[3] = {1, 65536, 1};
  static int64_t* g = grid;
  msg = error_of([] { rt::check_grid("e", "k", g); });
  CHECK(msg.find("grid dimension 1 = 65536") != std::string::npos);
  grid[1] = 65535;
  rt::check_grid("e", "k", grid);  // the exact limit is fine
  msg = error_of([] { rt::check_smem("e", "k", 300000, 232448); });
  CHECK(msg.find("would need 300000 bytes of dynamic shared memory") != std::string::npos);

  // The device of a call with no input tensor: the current context's, found by its CUdevice handle; else 0.
  CHECK(rt::current_device() == 0);  // nothing current
  rt::Driver handles = fake_driver();
  handles.DeviceGet = f_get_handle;
  rt::set_driver_for_testing(handles);
  g_current_ctx = reinterpret_cast<CUcontext>(0x1000 + 1);
  CHECK(rt::current_device() == 1);
  g_current_ctx = reinterpret_cast<CUcontext>(0x1000 + 7);  // a device this process cannot see
  CHECK(rt::current_device() == 0);
  g_current_ctx = nullptr;
  rt::Driver none;  // no driver at all: 0, and loading the entry says why
  rt::set_driver_for_testing(none);
  CHECK(rt::current_device() == 0);
  rt::set_driver_for_testing(fake_driver());

  // A returned output whose size (from a scalar argument) is negative: named before any allocation.
  msg = error_of([] {
    ::tvm::ffi::Tensor keep;
    const DLTensor* t = nullptr;
    const int64_t shape[] = {4, -3};
    rt::alloc_output("arange", "out", shape, 2, DLDataType{kDLInt, 32, 1}, 0, &keep, &t);
  });
  CHECK(msg == "arange: output 'out' would have shape [4, -3] for these arguments; a dim cannot be negative");

  // Bit operations in the width of their dtype, as TileLang's host code computes them.
  CHECK(rt::shl<int32_t>(1, 31) == INT32_MIN);  // wraps in 32 bits, not 2^31
  CHECK(rt::shl<int64_t>(1, 31) == (int64_t(1) << 31));
  CHECK(rt::shl<int32_t>(1, 32) == 0 && rt::shl<int32_t>(1, -1) == 0);  // out-of-range amounts: 0, not UB
  CHECK(rt::shr<int32_t>(-8, 1) == -4 && rt::shr<int32_t>(-8, 40) == -1);  // arithmetic for signed
  CHECK(rt::shr<uint32_t>(0xFFFFFFFFLL, 4) == 0x0FFFFFFFLL && rt::shr<uint32_t>(-1, 31) == 1);  // logical for unsigned
  CHECK(rt::shr<int32_t>(1000 + 127, 7) == 8);
  CHECK(rt::bit_and<int32_t>(0x1234, 0xFF) == 0x34 && rt::bit_or<int32_t>(0x10, 0x01) == 0x11);
  CHECK(rt::bit_xor<int8_t>(0x7F, -1) == -128);  // in 8 bits
  CHECK(rt::bit_not<int32_t>(0) == -1 && rt::bit_not<uint32_t>(0) == 0xFFFFFFFFLL && rt::bit_not<uint8_t>(1) == 254);
  CHECK(rt::clz<int32_t>(1) == 31 && rt::clz<int32_t>(0) == 32 && rt::clz<int64_t>(1) == 63 && rt::clz<int32_t>(-1) == 0);
  CHECK(rt::popcount<int32_t>(-1) == 32 && rt::popcount<uint16_t>(0x0F0F) == 8);
  CHECK(rt::floordiv(-7, 2) == -4 && rt::floormod(-7, 2) == 1);

  test_checker();
  test_cleanup_waits_for_launches();

  std::printf("ok %d\n", g_passed);
  if (g_failed) std::fprintf(stderr, "%d failed\n", g_failed);
  return g_failed ? 1 : 0;
}
