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

// noop_alloc(x) -> a new 1-d tensor of x's size, dtype and device from the TVM FFI environment
// allocator (torch's when torch calls), returned: what returning an output costs besides the launch.
extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_noop_alloc(void*, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  if (num_args < 1) return none_result(result);
  const DLTensor* x = nullptr;
  if (args[0].type_index == kTVMFFIDLTensorPtr) x = static_cast<const DLTensor*>(args[0].v_ptr);
  if (args[0].type_index == kTVMFFITensor) x = TVMFFITensorGetDLTensorPtr(args[0].v_obj);
  if (x == nullptr) return none_result(result);
  int64_t n = 1;
  for (int i = 0; i < x->ndim; ++i) n *= x->shape[i];
  DLTensor proto{};
  proto.device = x->device;
  proto.dtype = x->dtype;
  proto.ndim = 1;
  proto.shape = &n;
  TVMFFIObjectHandle out = nullptr;
  if (TVMFFIEnvTensorAlloc(&proto, &out) != 0) return -1;
  result->type_index = kTVMFFITensor;
  result->zero_padding = 0;
  result->v_obj = static_cast<TVMFFIObject*>(out);
  return 0;
}
