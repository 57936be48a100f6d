// The floor's first half (issue 5): a TVM-FFI function that does nothing with its arguments.
// Called from Python with the same torch tensors as the tl_aot entry, it costs exactly what the
// tvm-ffi call itself costs (argument conversion, torch stream query, error-return check).
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <dlpack/dlpack.h>

extern "C" {

static int none_result(TVMFFIAny* result) {
  result->type_index = kTVMFFINone;
  result->zero_padding = 0;
  result->v_int64 = 0;
  return 0;
}

// noop(*args) -> None
TVM_FFI_DLL_EXPORT int __tvm_ffi_noop(void*, const TVMFFIAny*, int32_t, TVMFFIAny* result) { return none_result(result); }

// noop_env_stream(*args) -> None, after reading the CUDA environment stream of device 0, as every
// tl_aot launcher does once per call: the difference to noop is that lookup.
TVM_FFI_DLL_EXPORT int __tvm_ffi_noop_env_stream(void*, const TVMFFIAny*, int32_t, TVMFFIAny* result) {
  volatile TVMFFIStreamHandle s = TVMFFIEnvGetStream(kDLCUDA, 0);
  (void)s;
  return none_result(result);
}

}  // extern "C"
