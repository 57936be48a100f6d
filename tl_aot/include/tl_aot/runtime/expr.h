// Part of tl_aot's launcher runtime (tl_aot/launcher_runtime.h includes every part in order):
// integer helpers for the expressions TileLang's lowering emits.
#ifndef TL_AOT_RUNTIME_EXPR_H_
#define TL_AOT_RUNTIME_EXPR_H_

#include <cstdint>
#include <type_traits>

namespace tl_aot {
namespace rt {
inline namespace v4 {

// ----------------------------------------------------------------------------------------------
// Integer helpers for expressions TileLang's lowering emits (floor division and modulo, bit operations).
// ----------------------------------------------------------------------------------------------
inline int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t floormod(int64_t a, int64_t b) { return a - floordiv(a, b) * b; }
template <typename T>
inline T min(T a, T b) {
  return a < b ? a : b;
}
template <typename T>
inline T max(T a, T b) {
  return a < b ? b : a;
}

// Bit operations of a TIR integer dtype T (int32_t, uint64_t, ...) on the launcher's int64_t values:
// computed in T's width, two's complement, as TileLang's host code computes them. A shift by an
// amount outside [0, bits of T) gives 0 (-1 for a right shift of a negative value), not C's UB.
template <typename T>
inline int64_t narrow(int64_t a) {
  return static_cast<int64_t>(static_cast<T>(a));
}
template <typename T>
inline int64_t shl(int64_t a, int64_t b) {
  using U = std::make_unsigned_t<T>;
  if (b < 0 || b >= static_cast<int64_t>(sizeof(T) * 8)) return 0;
  return narrow<T>(static_cast<U>(static_cast<U>(a) << b));
}
template <typename T>
inline int64_t shr(int64_t a, int64_t b) {
  const T v = static_cast<T>(a);
  if (b < 0 || b >= static_cast<int64_t>(sizeof(T) * 8)) {
    if constexpr (std::is_signed_v<T>) return v < 0 ? -1 : 0;
    return 0;
  }
  return narrow<T>(v >> b);
}
template <typename T>
inline int64_t bit_and(int64_t a, int64_t b) {
  return narrow<T>(static_cast<T>(a) & static_cast<T>(b));
}
template <typename T>
inline int64_t bit_or(int64_t a, int64_t b) {
  return narrow<T>(static_cast<T>(a) | static_cast<T>(b));
}
template <typename T>
inline int64_t bit_xor(int64_t a, int64_t b) {
  return narrow<T>(static_cast<T>(a) ^ static_cast<T>(b));
}
template <typename T>
inline int64_t bit_not(int64_t a) {
  return narrow<T>(~static_cast<T>(a));
}
// Leading zero bits in T's width (all of them for 0) and set bits.
template <typename T>
inline int64_t clz(int64_t a) {
  constexpr int bits = static_cast<int>(sizeof(T) * 8);
  const uint64_t u = static_cast<std::make_unsigned_t<T>>(a);
  return u == 0 ? bits : __builtin_clzll(u) - (64 - bits);
}
template <typename T>
inline int64_t popcount(int64_t a) {
  return __builtin_popcountll(static_cast<std::make_unsigned_t<T>>(a));
}

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot

#endif  // TL_AOT_RUNTIME_EXPR_H_
