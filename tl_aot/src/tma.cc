// tl_aot launcher runtime, TMA: operand checks and tensor-map (tiled, im2col) encoding.
#include "tl_aot/launcher_runtime.h"

#include <string>

namespace tl_aot {
namespace rt {
inline namespace v4 {  // v4: TensorSpec holds packed sub-byte tensors (v3: Entry and EntrySlot, table-driven checks)

// ------------------------------------------------------------------------------------------------
// TMA
// ------------------------------------------------------------------------------------------------
void check_tma_operand(const char* entry, const char* arg, const void* ptr, const int64_t* strides, int n) {
  if (TL_AOT_UNLIKELY(reinterpret_cast<uintptr_t>(ptr) % 16 != 0))
    bad_arg("ValueError", entry, arg, "a data pointer aligned to 16 bytes (the kernel reads it with TMA)",
            "an address 16-byte misaligned by " + std::to_string(reinterpret_cast<uintptr_t>(ptr) % 16) +
                " (an offset view?)");
  for (int i = 0; i < n; ++i)
    if (TL_AOT_UNLIKELY(strides[i] % 16 != 0 || strides[i] <= 0 || strides[i] >= (int64_t(1) << 40)))
      bad_arg("ValueError", entry, arg, "row strides that are positive multiples of 16 bytes (TMA)",
              "a stride of " + std::to_string(strides[i]) + " bytes");
}

void encode_tiled(const char* entry, const char* arg, CUtensorMap* out, int dtype, int rank, void* addr,
                  const cuuint64_t* dims, const int64_t* byte_strides, const cuuint32_t* box, const cuuint32_t* estr,
                  int interleave, int swizzle, int l2, int oob) {
  check_tma_operand(entry, arg, addr, byte_strides, rank - 1);
  cuuint64_t strides[5] = {};
  for (int i = 0; i + 1 < rank && i < 5; ++i) strides[i] = static_cast<cuuint64_t>(byte_strides[i]);
  CUresult r = driver().TensorMapEncodeTiled(
      out, static_cast<CUtensorMapDataType>(dtype), rank, addr, dims, strides, box, estr,
      static_cast<CUtensorMapInterleave>(interleave), static_cast<CUtensorMapSwizzle>(swizzle),
      static_cast<CUtensorMapL2promotion>(l2), static_cast<CUtensorMapFloatOOBfill>(oob));
  if (TL_AOT_UNLIKELY(r != CUDA_SUCCESS)) fail_cu(entry, std::string("encoding the TMA descriptor of '") + arg + "'", r);
}

void encode_im2col(const char* entry, const char* arg, CUtensorMap* out, int dtype, int rank, void* addr,
                   const cuuint64_t* dims, const int64_t* byte_strides, const int* lower, const int* upper,
                   unsigned channels, unsigned pixels, const cuuint32_t* estr, int interleave, int swizzle, int l2,
                   int oob) {
  check_tma_operand(entry, arg, addr, byte_strides, rank - 1);
  cuuint64_t strides[5] = {};
  for (int i = 0; i + 1 < rank && i < 5; ++i) strides[i] = static_cast<cuuint64_t>(byte_strides[i]);
  CUresult r = driver().TensorMapEncodeIm2col(
      out, static_cast<CUtensorMapDataType>(dtype), rank, addr, dims, strides, lower, upper, channels, pixels, estr,
      static_cast<CUtensorMapInterleave>(interleave), static_cast<CUtensorMapSwizzle>(swizzle),
      static_cast<CUtensorMapL2promotion>(l2), static_cast<CUtensorMapFloatOOBfill>(oob));
  if (TL_AOT_UNLIKELY(r != CUDA_SUCCESS))
    fail_cu(entry, std::string("encoding the im2col TMA descriptor of '") + arg + "'", r);
}

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot
