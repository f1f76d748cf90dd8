#include "nf4_commands.hpp"

#include <cstring>
#include <iostream>
#include <map>
#include <optional>

#include "args.hpp"
#include "npy.hpp"
#include "ocltk/nf4.hpp"

namespace ocltk::cli {
namespace {

const char* const kForwardHelp =
    R"(Usage: ocltk run nf4-forward --packed P.npy --scales S.npy --experts E --out-features N
       --in-features K --block-size B --input X.npy --offsets OFF.npy --out Y.npy [OPTIONS]

Segmented grouped GEMM over NF4 expert weights: rows OFF[e] .. OFF[e+1]-1 of X multiply
expert e, Y[r, n] = sum_k X[r, k] * W[e, n, k], accumulated in f32.

  --packed P.npy        uint8 payload, two codes per byte, high nibble first (bitsandbytes): at least
                        the bytes the window's coefficients reach, at most the bytes of the whole
                        blocks its scales cover (a shard cut at block boundaries)
  --scales S.npy        float32 absmax per block of B flat coefficients, one per block the window touches
  --codebook C.npy      float32, 16 levels (default: NF4)
  --experts E --out-features N --in-features K --block-size B (power of two, 32..4096)
  --element-offset O    window: first coefficient O positions into the first stored block (default 0)
  --input X.npy         rows x K: float32, float16, or bf16 bits as uint16 (with --dtype bf16)
  --offsets OFF.npy     uint32, E+1 entries, from 0 to rows, never decreasing
  --out Y.npy           rows x N, in the input's type
  --dtype f32|f16|bf16  the input's type (default: from X.npy)
  --device SEL --profile FILE
)";

const char* const kBackwardHelp =
    R"(Usage: ocltk run nf4-backward [weight flags as nf4-forward] --grad G.npy --offsets OFF.npy
       --out DX.npy [--dtype f32|f16|bf16] [--device SEL] [--profile FILE]

Input gradient of nf4-forward: DX[r, k] = sum_n G[r, n] * W[e, n, k]; G is rows x N,
DX is rows x K float32.
)";

const char* const kQuantizeHelp =
    R"(Usage: ocltk quantize nf4 --weights W.npy --block-size B --packed P.npy --scales S.npy [--dtype f32|f16|bf16]

Quantizes W (any shape, flattened in C order; E x N x K or N x K) exactly as bitsandbytes'
quantize_4bit(quant_type="nf4"): P uint8 ((count+1)/2 bytes), S float32 (one absmax per block).
)";

const char* const kDequantizeHelp =
    R"(Usage: ocltk dequantize nf4 --packed P.npy --scales S.npy [--codebook C.npy] [--experts E]
       --out-features N --in-features K --block-size B [--element-offset O] --out W.npy [--dtype f32|f16|bf16]

Writes W = codebook[code] * scale as E x N x K (N x K without --experts), in --dtype (default f32).
)";

Nf4Flags parse(const std::string& command, const std::vector<std::string>& args,
               const std::vector<std::string>& known) {
  Nf4Flags flags;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i], value;
    if (name.rfind("--", 0) != 0) throw Nf4UsageError("unexpected argument '" + name + "' for `" + command + "`");
    const std::size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else {
      if (i + 1 >= args.size()) throw Nf4UsageError(name + " needs a value (`" + command + " --help`)");
      value = args[++i];
    }
    bool ok = false;
    for (const std::string& k : known) ok |= k == name;
    if (!ok) throw Nf4UsageError("unknown option " + name + " for `" + command + "` (see `" + command + " --help`)");
    if (flags.count(name)) throw Nf4UsageError(name + " given twice");
    flags[name] = value;
  }
  return flags;
}

const std::string& required(const Nf4Flags& f, const std::string& command, const std::string& name) {
  const auto it = f.find(name);
  if (it == f.end()) throw Nf4UsageError("`" + command + "` needs " + name + " (see `" + command + " --help`)");
  return it->second;
}

std::int64_t integer(const Nf4Flags& f, const std::string& command, const std::string& name, std::int64_t min_value,
                     std::optional<std::int64_t> fallback = std::nullopt) {
  const auto it = f.find(name);
  if (it == f.end()) {
    if (fallback) return *fallback;
    required(f, command, name);
  }
  try {
    std::size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used == it->second.size() && v >= min_value) return v;
  } catch (const std::exception&) {
  }
  throw Nf4UsageError(name + " expects an integer >= " + std::to_string(min_value) + ", got '" + it->second + "'");
}

std::optional<ElementType> dtype_flag(const Nf4Flags& f) {
  const auto it = f.find("--dtype");
  if (it == f.end()) return std::nullopt;
  if (it->second == "f32") return ElementType::f32;
  if (it->second == "f16") return ElementType::f16;
  if (it->second == "bf16") return ElementType::bf16;
  throw Nf4UsageError("--dtype must be f32, f16 or bf16, got '" + it->second + "'");
}

// The element type of an activation file, checked against --dtype.
ElementType activation_type(const npy::Array& a, const std::string& path, const char* flag,
                            std::optional<ElementType> dtype) {
  ElementType file;
  switch (a.dtype) {
    case npy::DType::f32:
      file = ElementType::f32;
      break;
    case npy::DType::f16:
      file = ElementType::f16;
      break;
    case npy::DType::u16:
    case npy::DType::bf16_as_u16:
      if (dtype != ElementType::bf16)
        throw Nf4UsageError(path + ": " + flag + " holds uint16 data; pass --dtype bf16 if they are bf16 bits");
      file = ElementType::bf16;
      break;
    default:
      throw Nf4UsageError(path + ": " + flag + " must be float32, float16 or bf16 bits (uint16), got " +
                          npy::name(a.dtype));
  }
  if (dtype && *dtype != file)
    throw Nf4UsageError(path + ": --dtype " + to_string(*dtype) + " but " + flag + " holds " + npy::name(a.dtype));
  return file;
}

npy::Array read_typed(const std::string& path, const char* flag, npy::DType want) {
  npy::Array a = npy::read(path);
  if (a.dtype != want)
    throw Nf4UsageError(path + ": " + flag + " must be " + npy::name(want) + ", got " + npy::name(a.dtype));
  return a;
}

npy::DType npy_type(ElementType t) {
  return t == ElementType::f32 ? npy::DType::f32 : (t == ElementType::f16 ? npy::DType::f16 : npy::DType::bf16_as_u16);
}

struct LoadedWeights {
  Nf4Geometry geometry;
  npy::Array packed, scales;
  std::array<float, 16> codebook = kNf4Codebook;
};

LoadedWeights load_weights(const Nf4Flags& f, const std::string& command, bool experts_optional) {
  LoadedWeights w;
  w.geometry = nf4_geometry_of(f, command, experts_optional);
  const Nf4Geometry& g = w.geometry;
  const std::string& pp = required(f, command, "--packed");
  const std::string& sp = required(f, command, "--scales");
  w.packed = read_typed(pp, "--packed", npy::DType::u8);
  w.scales = read_typed(sp, "--scales", npy::DType::f32);
  // A shard cut at block boundaries holds the bytes of whole blocks: any length from what
  // the window's coefficients need to what its scales' blocks cover is a window.
  const std::int64_t covered = g.scale_count() * g.block_size / 2;
  if (std::int64_t(w.packed.count()) < g.packed_bytes() || std::int64_t(w.packed.count()) > covered)
    throw Nf4UsageError(pp + ": --packed holds " + std::to_string(w.packed.count()) + " bytes, but " +
                        std::to_string(g.experts) + " experts x " + std::to_string(g.out_features) + " x " +
                        std::to_string(g.in_features) + " from element offset " + std::to_string(g.element_offset) +
                        " need " + std::to_string(g.packed_bytes()) +
                        (covered > g.packed_bytes() ? " to " + std::to_string(covered) + " (the bytes of the " +
                                                          std::to_string(g.scale_count()) + " blocks the scales cover)"
                                                    : ""));
  if (std::int64_t(w.scales.count()) != g.scale_count())
    throw Nf4UsageError(sp + ": --scales holds " + std::to_string(w.scales.count()) + " values, but the window needs " +
                        std::to_string(g.scale_count()) + " blocks of " + std::to_string(g.block_size));
  if (const auto it = f.find("--codebook"); it != f.end()) {
    const npy::Array c = read_typed(it->second, "--codebook", npy::DType::f32);
    if (c.count() != 16)
      throw Nf4UsageError(it->second + ": --codebook must hold 16 values, got " + std::to_string(c.count()));
    std::memcpy(w.codebook.data(), c.data.data(), 64);
  }
  return w;
}

}  // namespace

Nf4Geometry nf4_geometry_of(const Nf4Flags& f, const std::string& command, bool experts_optional) {
  Nf4Geometry g;
  g.experts = integer(f, command, "--experts", 0, experts_optional ? std::optional<std::int64_t>(1) : std::nullopt);
  g.out_features = integer(f, command, "--out-features", 1);
  g.in_features = integer(f, command, "--in-features", 1);
  g.block_size = integer(f, command, "--block-size", 1);
  g.element_offset = integer(f, command, "--element-offset", 0, 0);
  try {
    g.validate(command);
  } catch (const Error& e) {
    throw Nf4UsageError(e.what());
  }
  return g;
}

namespace {

Runtime open_runtime(const Nf4Flags& f) {
  RuntimeOptions options;
  if (const auto it = f.find("--device"); it != f.end()) options.device = it->second;
  if (const auto it = f.find("--profile"); it != f.end()) options.profile_path = it->second;
  Result<Runtime> rt = Runtime::open(options);
  rt.status().throw_if_error();
  return std::move(rt.value());
}

boost::compute::buffer upload(Runtime& rt, const void* data, std::size_t bytes) {
  boost::compute::buffer b = rt.allocate(std::max<std::size_t>(bytes, 4)).value();
  if (bytes) rt.queue().enqueue_write_buffer(b, 0, bytes, data);
  return b;
}

int run_product(const std::string& sub, const std::vector<std::string>& args) {
  const bool forward = sub == "nf4-forward";
  const std::string command = "ocltk run " + sub;
  const Nf4Flags f = parse_nf4_flags(sub, args);
  check_output_path(required(f, command, "--out"), "--out");
  LoadedWeights w = load_weights(f, command, false);
  const Nf4Geometry& g = w.geometry;
  const char* in_flag = forward ? "--input" : "--grad";
  const std::string& in_path = required(f, command, in_flag);
  const std::string& out_path = required(f, command, "--out");
  const npy::Array in = npy::read(in_path);
  const ElementType type = activation_type(in, in_path, in_flag, dtype_flag(f));
  const std::int64_t width = forward ? g.in_features : g.out_features;
  if (in.shape.size() != 2 || std::int64_t(in.shape[1]) != width)
    throw Nf4UsageError(in_path + ": " + in_flag + " must be rows x " + std::string(forward ? "K" : "N") +
                        " = (rows, " + std::to_string(width) + "), got " + npy::shape_str(in.shape));
  const std::int64_t rows = std::int64_t(in.shape[0]);
  if (g.experts == 0 && rows > 0)
    throw Nf4UsageError(in_path + ": " + std::to_string(rows) + " rows given to an empty owner (--experts 0)");
  const std::string& off_path = required(f, command, "--offsets");
  const npy::Array off = read_typed(off_path, "--offsets", npy::DType::u32);
  if (std::int64_t(off.count()) != g.experts + 1)
    throw Nf4UsageError(off_path + ": --offsets must hold experts + 1 = " + std::to_string(g.experts + 1) +
                        " entries, got " + std::to_string(off.count()));
  try {
    validate_nf4_offsets(off.as<std::uint32_t>(), off.count(), g.experts, rows, off_path);
  } catch (const Error& e) {
    throw Nf4UsageError(e.what());
  }

  Runtime rt = open_runtime(f);
  auto packed = upload(rt, w.packed.data.data(), w.packed.data.size());
  auto scales = upload(rt, w.scales.data.data(), w.scales.data.size());
  auto codebook = upload(rt, w.codebook.data(), 64);
  auto offsets = upload(rt, off.data.data(), off.data.size());
  auto input = upload(rt, in.data.data(), in.data.size());
  const std::int64_t out_width = forward ? g.out_features : g.in_features;
  const ElementType out_type = forward ? type : ElementType::f32;
  const std::size_t out_bytes = std::size_t(rows * out_width) * element_size(out_type);
  boost::compute::buffer out = rt.allocate(std::max<std::size_t>(out_bytes, 4)).value();
  const bool empty = g.experts == 0;
  Nf4Weights weights{g, empty ? nullptr : packed.get(), 0, empty ? nullptr : scales.get(), 0, codebook.get()};
  // Validated above on the host: no read-back, and the runtime is given the experts with rows
  // and the most rows on one of them it would have counted (its profile choice depends on them).
  const std::int64_t active = nf4_active_experts(off.as<std::uint32_t>(), off.count());
  const std::int64_t longest = nf4_max_expert_rows(off.as<std::uint32_t>(), off.count());
  Status s;
  if (forward)
    s = nf4_forward_segmented(rt, {weights, input.get(), type, rows, offsets.get(), out.get(), false, active, longest});
  else
    s = nf4_input_backward_segmented(
        rt, {weights, input.get(), type, rows, offsets.get(), out.get(), false, active, longest});
  s.throw_if_error();
  npy::Array result;
  result.dtype = npy_type(out_type);
  result.shape = {std::size_t(rows), std::size_t(out_width)};
  result.data.resize(out_bytes);
  if (out_bytes) rt.queue().enqueue_read_buffer(out, 0, out_bytes, result.data.data());
  npy::write_atomically(out_path, result);
  return 0;
}

int run_quantize(const std::vector<std::string>& args) {
  const std::string command = "ocltk quantize nf4";
  const Nf4Flags f = parse_nf4_flags("quantize", args);
  const std::string& wp = required(f, command, "--weights");
  const std::int64_t block = integer(f, command, "--block-size", 1);
  if (!nf4_block_size_valid(block))
    throw Nf4UsageError("--block-size " + std::to_string(block) + " is not a power of two from 32 to 4096");
  const std::string& pp = required(f, command, "--packed");
  const std::string& sp = required(f, command, "--scales");
  check_output_path(pp, "--packed");
  check_output_path(sp, "--scales");
  const npy::Array w = npy::read(wp);
  const ElementType type = activation_type(w, wp, "--weights", dtype_flag(f));
  const Nf4Packed q = type == ElementType::f32 ? quantize_nf4(w.as<float>(), w.count(), block)
                                               : quantize_nf4(w.as<std::uint16_t>(), type, w.count(), block);
  npy::Array p, s;
  p.dtype = npy::DType::u8;
  p.shape = {q.packed.size()};
  p.data = q.packed;
  s.dtype = npy::DType::f32;
  s.shape = {q.scales.size()};
  s.data.resize(q.scales.size() * 4);
  std::memcpy(s.data.data(), q.scales.data(), s.data.size());
  npy::write_atomically(pp, p);
  npy::write_atomically(sp, s);
  return 0;
}

int run_dequantize(const std::vector<std::string>& args) {
  const std::string command = "ocltk dequantize nf4";
  const Nf4Flags f = parse_nf4_flags("dequantize", args);
  const std::string& out_path = required(f, command, "--out");
  check_output_path(out_path, "--out");
  const LoadedWeights w = load_weights(f, command, true);
  const ElementType type = dtype_flag(f).value_or(ElementType::f32);
  const Nf4Geometry& g = w.geometry;
  const std::size_t count = std::size_t(g.coefficients());
  std::vector<float> values(count);
  if (count)
    dequantize_nf4(w.packed.data.data(), w.scales.as<float>(), w.codebook, g.element_offset, g.block_size, count,
                   values.data());
  npy::Array out;
  out.dtype = npy_type(type);
  if (f.count("--experts"))
    out.shape = {std::size_t(g.experts), std::size_t(g.out_features), std::size_t(g.in_features)};
  else
    out.shape = {std::size_t(g.out_features), std::size_t(g.in_features)};
  out.data.resize(count * element_size(type));
  for (std::size_t i = 0; i < count; ++i) {
    if (type == ElementType::f32) {
      std::memcpy(&out.data[i * 4], &values[i], 4);
    } else {
      const std::uint16_t b = type == ElementType::f16 ? float_to_half(values[i]) : float_to_bf16(values[i]);
      std::memcpy(&out.data[i * 2], &b, 2);
    }
  }
  npy::write_atomically(out_path, out);
  return 0;
}

}  // namespace

Nf4Flags parse_nf4_flags(const std::string& sub, const std::vector<std::string>& args) {
  if (sub == "nf4-forward" || sub == "nf4-backward")
    return parse("ocltk run " + sub, args,
                 {"--packed", "--scales", "--codebook", "--experts", "--out-features", "--in-features", "--block-size",
                  "--element-offset", sub == "nf4-forward" ? "--input" : "--grad", "--offsets", "--out", "--dtype",
                  "--device", "--profile"});
  if (sub == "quantize")
    return parse("ocltk quantize nf4", args, {"--weights", "--block-size", "--packed", "--scales", "--dtype"});
  if (sub == "dequantize")
    return parse("ocltk dequantize nf4", args,
                 {"--packed", "--scales", "--codebook", "--experts", "--out-features", "--in-features", "--block-size",
                  "--element-offset", "--out", "--dtype"});
  throw Nf4UsageError("unknown nf4 command '" + sub + "'");
}

int run_nf4_command(const std::string& sub, const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "-h" || a == "--help") {
      std::cout << nf4_help(sub);
      return 0;
    }
  if (sub == "nf4-forward" || sub == "nf4-backward") return run_product(sub, args);
  if (sub == "quantize") return run_quantize(args);
  if (sub == "dequantize") return run_dequantize(args);
  throw Nf4UsageError("unknown nf4 command '" + sub + "'");
}

const char* nf4_help(const std::string& sub) {
  if (sub == "nf4-forward") return kForwardHelp;
  if (sub == "nf4-backward") return kBackwardHelp;
  if (sub == "quantize") return kQuantizeHelp;
  if (sub == "dequantize") return kDequantizeHelp;
  return "";
}

}  // namespace ocltk::cli
