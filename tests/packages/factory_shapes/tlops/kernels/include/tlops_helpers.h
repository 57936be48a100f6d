// Device helpers the scale kernel calls through T.call_extern; reached by -include in compile_flags.
#pragma once
__device__ __forceinline__ float tlops_relu6(float x) { return fminf(fmaxf(x, 0.0f), 6.0f); }
