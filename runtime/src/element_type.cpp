// Element types on the host: names, sizes, roundoff and the 16-bit conversions.
#include "ocltk/element_type.hpp"

#include <cmath>
#include <cstring>

namespace ocltk {

const char* to_string(ElementType type) {
  switch (type) {
    case ElementType::f32:
      return "f32";
    case ElementType::f16:
      return "f16";
    case ElementType::bf16:
      return "bf16";
  }
  return "?";
}

std::size_t element_size(ElementType type) { return type == ElementType::f32 ? 4 : 2; }

double unit_roundoff(ElementType type) {
  switch (type) {
    case ElementType::f16:
      return 1.0 / 2048;
    case ElementType::bf16:
      return 1.0 / 256;
    default:
      return 1.0 / 16777216;
  }
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000) << 16;
  const int exp = (h >> 10) & 0x1F;
  const std::uint32_t mant = h & 0x3FF;
  std::uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | (std::uint32_t(exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: value = mant · 2^-24
    float v = std::ldexp(float(mant), -24);
    std::memcpy(&bits, &v, 4);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint16_t float_to_half(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint16_t sign = std::uint16_t((x >> 16) & 0x8000);
  const std::uint32_t ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) return sign | (ax > 0x7F800000u ? 0x7E00 : 0x7C00);
  if (ax >= 0x477FF000u) return sign | 0x7C00;  // rounds to >= 65520: infinity
  if (ax < 0x38800000u) {                       // below 2^-14: subnormal or zero
    const float a = std::fabs(f);
    const float scaled = a * 16777216.0f;                 // units of 2^-24, exact
    return sign | std::uint16_t(std::nearbyint(scaled));  // default rounding: nearest even
  }
  const std::uint32_t mant = ax & 0x7FFFFFu;
  std::uint32_t h = ((ax >> 23) - 112) << 10 | (mant >> 13);
  const std::uint32_t rest = mant & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return sign | std::uint16_t(h);
}

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t bits = std::uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint16_t float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  u += 0x7FFFu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}

float element_to_float(ElementType type, std::uint32_t bits) {
  if (type == ElementType::f16) return half_to_float(std::uint16_t(bits));
  if (type == ElementType::bf16) return bf16_to_float(std::uint16_t(bits));
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint32_t float_to_element(ElementType type, float value) {
  if (type == ElementType::f16) return float_to_half(value);
  if (type == ElementType::bf16) return float_to_bf16(value);
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

}  // namespace ocltk
