// Part of tl_aot's launcher runtime (tl_aot/launcher_runtime.h includes every part in order):
// the branch hints and the limits the other parts use.
#ifndef TL_AOT_RUNTIME_BASE_H_
#define TL_AOT_RUNTIME_BASE_H_

#define TL_AOT_LIKELY(x) __builtin_expect(!!(x), 1)
#define TL_AOT_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace tl_aot {
namespace rt {
inline namespace v4 {  // v4: TensorSpec holds packed sub-byte tensors (v3: Entry and EntrySlot, table-driven checks)

constexpr int kMaxDevices = 64;
constexpr int kMaxKernels = 16;  // device kernels one entry may launch

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot

#endif  // TL_AOT_RUNTIME_BASE_H_
