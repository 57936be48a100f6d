// Part of tl_aot's launcher runtime (tl_aot/launcher_runtime.h includes every part in order):
// the L2 persisting window around one launch.
#ifndef TL_AOT_RUNTIME_L2_WINDOW_H_
#define TL_AOT_RUNTIME_L2_WINDOW_H_

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "tl_aot/runtime/modules.h"

namespace tl_aot {
namespace rt {
inline namespace v4 {

// ----------------------------------------------------------------------------------------------
// L2 persisting window around one launch (T.annotate_l2_hit_ratio), clamped to the device.
// ----------------------------------------------------------------------------------------------
class L2Window {
 public:
  L2Window(const char* entry, CUstream s, void* base, int64_t bytes, float hit, const DeviceSlot& ds);
  ~L2Window();
  L2Window(const L2Window&) = delete;
  L2Window& operator=(const L2Window&) = delete;

 private:
  CUstream stream_;
  size_t old_limit_ = 0;
  bool active_ = false;
};

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot

#endif  // TL_AOT_RUNTIME_L2_WINDOW_H_
