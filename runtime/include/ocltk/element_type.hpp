// The storage types of activations and weights that the kernel families share (gemm_nt,
// LoRA, NF4): f32, or a 16-bit type accumulated in f32. The device reads 16-bit values as
// bit patterns and converts them (NVIDIA's OpenCL has no cl_khr_fp16); the host converts
// with the functions below, rounding to nearest even as the kernels do.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ocltk {

// The values are the kernels' type codes (build options and run-time arguments): keep them.
enum class ElementType { f32 = 0, f16 = 1, bf16 = 2 };
const char* to_string(ElementType type);  // "f32", "f16", "bf16"
std::size_t element_size(ElementType type);

// The unit roundoff of a type (2^-24, 2^-11, 2^-8): one rounding to it moves a value by at
// most this fraction of its magnitude (away from f16's subnormal range, where the step is
// 2^-24 absolute).
double unit_roundoff(ElementType type);

// f16 / bf16 bit conversions (round to nearest even; NaN stays NaN).
float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_bf16(float f);

// One value of `type` at `bits` (an f32's bits, or a 16-bit pattern in the low half) as f32,
// and back: the round trip a buffer of that type makes on the host.
float element_to_float(ElementType type, std::uint32_t bits);
std::uint32_t float_to_element(ElementType type, float value);

}  // namespace ocltk
