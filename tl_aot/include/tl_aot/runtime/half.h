// Part of tl_aot's launcher runtime (tl_aot/launcher_runtime.h includes every part in order):
// float16 scalar arguments, converted from the call's double as TileLang's host code converts them.
#ifndef TL_AOT_RUNTIME_HALF_H_
#define TL_AOT_RUNTIME_HALF_H_

#include <cstdint>
#include <cstring>

namespace tl_aot {
namespace rt {
inline namespace v4 {

// An IEEE binary16 value as a kernel takes it (TileLang's `half_t` / `__half`: two bytes, aligned to
// two). TileLang's packed host function casts the call's double (or int64) to float16 in one step,
// rounding to nearest, ties to even; f16(double) does the same, bit for bit, without cuda_fp16.h so
// the launcher builds with any host compiler: NaN stays NaN, overflow gives +-inf, tiny values round
// to subnormals or a signed zero.
struct f16 {
  uint16_t bits;

  explicit f16(double x) : bits(from_double(x)) {}

  static uint16_t from_double(double x) {
    uint64_t u;
    std::memcpy(&u, &x, sizeof u);
    const uint16_t sign = static_cast<uint16_t>((u >> 48) & 0x8000u);
    const int exp = static_cast<int>((u >> 52) & 0x7ff);
    uint64_t mant = u & ((uint64_t{1} << 52) - 1);
    if (exp == 0x7ff) return sign | (mant ? 0x7e00u : 0x7c00u);  // NaN (quiet), +-inf
    int e = exp - 1023 + 15;                                      // the binary16 biased exponent
    if (e >= 31) return sign | 0x7c00u;                           // too large: +-inf
    int shift;                                                    // mantissa bits dropped
    if (e <= 0) {                                                 // a subnormal (or zero) result
      if (e < -10) return sign;                                   // below half the smallest subnormal
      mant |= uint64_t{1} << 52;                                  // the implicit leading one
      shift = 42 + 1 - e;
      e = 0;
    } else {
      shift = 42;
    }
    uint64_t kept = mant >> shift;
    const uint64_t rest = mant & ((uint64_t{1} << shift) - 1);
    const uint64_t half = uint64_t{1} << (shift - 1);
    if (rest > half || (rest == half && (kept & 1))) ++kept;  // round to nearest, ties to even
    // A carry out of the mantissa moves to the exponent (a subnormal becomes normal, 65520 becomes inf).
    return static_cast<uint16_t>(sign | ((static_cast<uint64_t>(e) << 10) + kept));
  }
};
static_assert(sizeof(f16) == 2 && alignof(f16) == 2, "f16 must match the kernel's half_t");

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot

#endif  // TL_AOT_RUNTIME_HALF_H_
