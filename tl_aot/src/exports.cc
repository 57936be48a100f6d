// tl_aot launcher runtime, the library-wide exports: safe calls, an entry's call, cleanup_module,
// tl_aot_prepare, the manifest (whole, its index, a part) and the driver check.
#include "tl_aot/launcher_runtime.h"

#include <cstring>
#include <string>
#include <vector>

namespace tl_aot {
namespace rt {
inline namespace v4 {  // v4: TensorSpec holds packed sub-byte tensors (v3: Entry and EntrySlot, table-driven checks)

// ------------------------------------------------------------------------------------------------
// The library-wide exports
// ------------------------------------------------------------------------------------------------
int safe_call(FfiFn fn, const void* ctx, const TVMFFIAny* raw, int32_t num_args, TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  fn(ctx, reinterpret_cast<const ::tvm::ffi::AnyView*>(raw), num_args, result);
  TVM_FFI_SAFE_CALL_END();
}

namespace {
// Releases a frame's outputs however the call ends.
struct FrameEnd {
  Frame& x;
  int no;
  ~FrameEnd() { end_frame(x, no); }
};
}  // namespace

void invoke(const Entry& e, const ::tvm::ffi::AnyView* a, int32_t num_args, TVMFFIAny* result, bool alloc) {
  constexpr int kMax = 16;
  const Checks& c = *e.checks;
  const int nt = c.num_tensors, ns = c.num_symbols + 1, na = c.num_scalars + 1, no = c.num_tensors - c.num_inputs;
  if (TL_AOT_LIKELY(nt <= kMax && ns <= kMax && na <= kMax)) {
    const DLTensor* t[kMax];
    void* p[kMax];
    int64_t s[kMax];
    Scalar sc[kMax];
    alignas(::tvm::ffi::Tensor) unsigned char o[sizeof(::tvm::ffi::Tensor) * kMax];
    Frame x{t, p, s, sc, reinterpret_cast<::tvm::ffi::Tensor*>(o)};
    start_frame(x, nt, ns, na, no);
    FrameEnd end{x, no};
    invoke(e, x, a, num_args, result, alloc);
    return;
  }
  std::vector<const DLTensor*> t(nt);
  std::vector<void*> p(nt);
  std::vector<int64_t> s(ns);
  std::vector<Scalar> sc(na);
  std::vector<::tvm::ffi::Tensor> o(no + 1);
  Frame x{t.data(), p.data(), s.data(), sc.data(), o.data()};
  invoke(e, x, a, num_args, result, alloc);
}

void call_entry(const void* entry, const ::tvm::ffi::AnyView* a, int32_t num_args, TVMFFIAny* result) {
  const Entry& e = *static_cast<const Entry*>(entry);
  invoke(e, a, num_args, result, call_form(e, a, num_args, e.name));
}

int ffi_cleanup(const Library& lib, int32_t num_args, TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  if (num_args != 0) fail("TypeError", "cleanup_module() takes no arguments");
  int err = cleanup(lib);
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = err;
  TVM_FFI_SAFE_CALL_END();
}

int ffi_prepare(const Library& lib, const TVMFFIAny* raw, int32_t num_args, TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  if (num_args != 1) fail("TypeError", "tl_aot_prepare(device) takes one argument, the CUDA device id");
  const ::tvm::ffi::AnyView* a = reinterpret_cast<const ::tvm::ffi::AnyView*>(raw);
  prepare(lib, static_cast<int>(int_arg(a[0], "tl_aot_prepare", "device", 0, kMaxDevices - 1, "a device id")));
  set_none(result);
  TVM_FFI_SAFE_CALL_END();
}

int ffi_manifest(const char* json, TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  TVMFFIByteArray bytes{json, std::strlen(json)};
  return TVMFFIStringFromByteArray(&bytes, result);
  TVM_FFI_SAFE_CALL_END();
}

int ffi_manifest_part(const char* json, unsigned long long bytes, const TVMFFIAny* raw, int32_t num_args,
                      TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  if (num_args != 2) fail("TypeError", "tl_aot_manifest_part(offset, length) takes two arguments");
  const ::tvm::ffi::AnyView* a = reinterpret_cast<const ::tvm::ffi::AnyView*>(raw);
  const int64_t size = static_cast<int64_t>(bytes);
  int64_t offset = int_arg(a[0], "tl_aot_manifest_part", "offset", 0, size, "an offset into the manifest");
  int64_t length = int_arg(a[1], "tl_aot_manifest_part", "length", 0, size - offset, "a length within the manifest");
  TVMFFIByteArray part{json + offset, static_cast<size_t>(length)};
  return TVMFFIStringFromByteArray(&part, result);
  TVM_FFI_SAFE_CALL_END();
}

int ffi_driver_check(const Library& lib, TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  std::string why = driver_too_old(lib);
  TVMFFIByteArray bytes{why.data(), why.size()};
  return TVMFFIStringFromByteArray(&bytes, result);
  TVM_FFI_SAFE_CALL_END();
}

int ffi_check_images(const Library& lib, const TVMFFIAny* raw, int32_t num_args, TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  if (num_args != 1) fail("TypeError", "tl_aot_check_images(arch) takes one argument, an arch label such as 'sm_90a'");
  const ::tvm::ffi::AnyView* a = reinterpret_cast<const ::tvm::ffi::AnyView*>(raw);
  auto label = a[0].try_cast<::tvm::ffi::String>();
  if (!label.has_value()) fail("TypeError", "tl_aot_check_images(arch): arch must be a string such as 'sm_90a'");
  std::string why = check_images(lib, std::string(label.value()));
  TVMFFIByteArray bytes{why.data(), why.size()};
  return TVMFFIStringFromByteArray(&bytes, result);
  TVM_FFI_SAFE_CALL_END();
}

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot
