// Part of tl_aot's launcher runtime (tl_aot/launcher_runtime.h includes every part in order):
// TMA descriptors, encoded on the host per call and passed by value.
#ifndef TL_AOT_RUNTIME_TMA_H_
#define TL_AOT_RUNTIME_TMA_H_

#include <cuda.h>

namespace tl_aot {
namespace rt {
inline namespace v4 {

// ----------------------------------------------------------------------------------------------
// TMA descriptors, encoded on the host per call and passed by value.
// ----------------------------------------------------------------------------------------------
void check_tma_operand(const char* entry, const char* arg, const void* ptr, const int64_t* strides, int n);
void encode_tiled(const char* entry, const char* arg, CUtensorMap* out, int dtype, int rank, void* addr,
                  const cuuint64_t* dims, const int64_t* byte_strides, const cuuint32_t* box, const cuuint32_t* estr,
                  int interleave, int swizzle, int l2, int oob);
void encode_im2col(const char* entry, const char* arg, CUtensorMap* out, int dtype, int rank, void* addr,
                   const cuuint64_t* dims, const int64_t* byte_strides, const int* lower, const int* upper,
                   unsigned channels, unsigned pixels, const cuuint32_t* estr, int interleave, int swizzle, int l2,
                   int oob);

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot

#endif  // TL_AOT_RUNTIME_TMA_H_
