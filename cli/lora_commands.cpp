#include "lora_commands.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "npy.hpp"
#include "ocltk/lora.hpp"

namespace ocltk::cli {
namespace {

const char* const kLoraHelp =
    R"(Usage: ocltk run lora --input X.npy --lora-a A.npy --lora-b B.npy --out Y.npy
           [--accumulate] [--scale S | --scales SC.npy] [--ranks RK.npy]
           [--offsets O.npy --segment-adapters I.npy] [--dtype f32|f16|bf16]
           [--device SEL] [--profile FILE]

LoRA in one call: Y = scale * (X * A^T) * B^T (Y += ... with --accumulate), the rank-r
intermediate in f32 on the device, rows grouped in segments that each use their own adapter.

  --input X.npy            M x K: float32, float16, or bf16 bits as uint16 (with --dtype bf16)
  --lora-a A.npy           L x R x K (or R x K for one adapter), in X's type
  --lora-b B.npy           L x N x R (or N x R), in X's type
  --out Y.npy              M x N in X's type; with --accumulate read first (same shape and type)
                           and added to; written atomically
  --accumulate             Y += ... instead of Y = ...
  --scale S                every adapter's scale (default 1)
  --scales SC.npy          float32, L entries: adapter l's scale (instead of --scale)
  --ranks RK.npy           int32 or uint32, L entries from 1 to R: adapter l uses the first
                           ranks[l] rows of its A and columns of its B (default: R each)
  --offsets O.npy          uint32, S + 1 entries from 0 to M, never decreasing: segment s is
                           rows O[s] .. O[s+1]-1 (with --segment-adapters)
  --segment-adapters I.npy int32, S entries from -1 to L-1: segment s's adapter, -1 none (its
                           rows of Y are left as they are, or zero without --accumulate)
                           Without the two, all rows use adapter 0.
  --dtype f32|f16|bf16     X's type (default: from X.npy)
  --device SEL --profile FILE
)";

using Flags = std::map<std::string, std::string>;

Flags parse(const std::string& command, const std::vector<std::string>& args) {
  static const char* const with_value[] = {
      "--input", "--lora-a", "--lora-b",           "--out",    "--scale", "--scales", "--ranks", "--offsets",
      "--dtype", "--device", "--segment-adapters", "--profile"};
  Flags flags;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i], value;
    if (name.rfind("--", 0) != 0) throw LoraUsageError("unexpected argument '" + name + "' for `" + command + "`");
    if (name == "--accumulate") {
      if (flags.count(name)) throw LoraUsageError(name + " given twice");
      flags[name] = "";
      continue;
    }
    const std::size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (std::find(std::begin(with_value), std::end(with_value), name) == std::end(with_value))
      throw LoraUsageError("unknown option " + name + " for `" + command + "` (see `" + command + " --help`)");
    if (eq == std::string::npos) {
      if (i + 1 >= args.size()) throw LoraUsageError(name + " needs a value (`" + command + " --help`)");
      value = args[++i];
    }
    if (flags.count(name)) throw LoraUsageError(name + " given twice");
    flags[name] = value;
  }
  return flags;
}

const std::string& required(const Flags& f, const std::string& command, const std::string& name) {
  const auto it = f.find(name);
  if (it == f.end()) throw LoraUsageError("`" + command + "` needs " + name + " (see `" + command + " --help`)");
  return it->second;
}

std::optional<std::string> optional(const Flags& f, const std::string& name) {
  const auto it = f.find(name);
  return it == f.end() ? std::nullopt : std::optional<std::string>(it->second);
}

// The element type of X, checked against --dtype: uint16 data are bf16 bits only when
// --dtype bf16 says so.
ElementType input_type(const npy::Array& x, const std::string& path, const std::optional<std::string>& dtype) {
  std::optional<ElementType> asked;
  if (dtype) {
    if (*dtype == "f32")
      asked = ElementType::f32;
    else if (*dtype == "f16")
      asked = ElementType::f16;
    else if (*dtype == "bf16")
      asked = ElementType::bf16;
    else
      throw LoraUsageError("--dtype must be f32, f16 or bf16, got '" + *dtype + "'");
  }
  ElementType type;
  switch (x.dtype) {
    case npy::DType::f32:
      type = ElementType::f32;
      break;
    case npy::DType::f16:
      type = ElementType::f16;
      break;
    case npy::DType::u16:
    case npy::DType::bf16_as_u16:
      if (asked != ElementType::bf16)
        throw LoraUsageError(path + ": --input holds uint16 data; pass --dtype bf16 if they are bf16 bits");
      type = ElementType::bf16;
      break;
    default:
      throw LoraUsageError(path + ": --input must be float32, float16 or bf16 bits (uint16), got " +
                           npy::name(x.dtype));
  }
  if (asked && *asked != type)
    throw LoraUsageError(path + ": --dtype " + to_string(*asked) + " but --input holds " + npy::name(x.dtype));
  return type;
}

bool same_type(npy::DType file, ElementType type) {
  switch (type) {
    case ElementType::f32:
      return file == npy::DType::f32;
    case ElementType::f16:
      return file == npy::DType::f16;
    case ElementType::bf16:
      return file == npy::DType::u16 || file == npy::DType::bf16_as_u16;
  }
  return false;
}

const char* npy_name_of(ElementType type) {
  return type == ElementType::f32 ? "float32" : type == ElementType::f16 ? "float16" : "bf16 bits (uint16)";
}

// A weight or output file in X's type.
npy::Array read_in_type(const std::string& path, const char* flag, ElementType type) {
  npy::Array a = npy::read(path);
  if (!same_type(a.dtype, type))
    throw LoraUsageError(path + ": " + flag + " holds " + npy::name(a.dtype) + " but --input is " + npy_name_of(type) +
                         " (X, A, B and Y share one type)");
  return a;
}

std::string shape_of(const npy::Array& a) { return npy::shape_str(a.shape); }

// A 1-D-or-any-shape list of `count` integers as int32: int32, or uint32 where `unsigned_ok`.
std::vector<std::int32_t> read_ints(const std::string& path, const char* flag, std::size_t count, bool unsigned_ok,
                                    const std::string& what) {
  const npy::Array a = npy::read(path);
  if (a.dtype != npy::DType::i32 && !(unsigned_ok && a.dtype == npy::DType::u32))
    throw LoraUsageError(path + ": " + flag + " must be int32" + (unsigned_ok ? " or uint32" : "") + ", got " +
                         npy::name(a.dtype));
  if (a.count() != count)
    throw LoraUsageError(path + ": " + flag + " must hold " + what + " = " + std::to_string(count) + " entries, got " +
                         std::to_string(a.count()) + " (shape " + shape_of(a) + ")");
  std::vector<std::int32_t> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, a.data.data() + i * 4, 4);
    if (a.dtype == npy::DType::u32 && bits > 0x7FFFFFFFu)
      throw LoraUsageError(path + ": " + flag + "[" + std::to_string(i) + "] = " + std::to_string(bits) +
                           " is out of range");
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

boost::compute::buffer upload(Runtime& rt, const void* data, std::size_t bytes) {
  boost::compute::buffer b = rt.allocate(std::max<std::size_t>(bytes, 4)).value();
  if (bytes) rt.queue().enqueue_write_buffer(b, 0, bytes, data);
  return b;
}

}  // namespace

int run_lora_command(const std::vector<std::string>& tokens) {
  const std::string command = "ocltk run lora";
  const Flags f = parse(command, tokens);
  const std::string& x_path = required(f, command, "--input");
  const std::string& a_path = required(f, command, "--lora-a");
  const std::string& b_path = required(f, command, "--lora-b");
  const std::string& out_path = required(f, command, "--out");
  const bool accumulate = f.count("--accumulate") > 0;

  // Everything is read and checked before the device is touched or anything written.
  const npy::Array x = npy::read(x_path);
  const ElementType type = input_type(x, x_path, optional(f, "--dtype"));
  if (x.shape.size() != 2) throw LoraUsageError(x_path + ": --input must be 2-D, M x K, got shape " + shape_of(x));
  const std::int64_t m = std::int64_t(x.shape[0]), k = std::int64_t(x.shape[1]);
  const npy::Array a = read_in_type(a_path, "--lora-a", type);
  if (a.shape.size() != 2 && a.shape.size() != 3)
    throw LoraUsageError(a_path + ": --lora-a must be L x R x K or R x K, got shape " + shape_of(a));
  const std::int64_t adapters = a.shape.size() == 3 ? std::int64_t(a.shape[0]) : 1;
  const std::int64_t rank = std::int64_t(a.shape[a.shape.size() - 2]);
  if (std::int64_t(a.shape.back()) != k)
    throw LoraUsageError(a_path + ": --lora-a's K is " + std::to_string(a.shape.back()) + " but --input's is " +
                         std::to_string(k) + " (A is " + shape_of(a) + ", X is " + shape_of(x) + ")");
  const npy::Array b = read_in_type(b_path, "--lora-b", type);
  if (b.shape.size() != 2 && b.shape.size() != 3)
    throw LoraUsageError(b_path + ": --lora-b must be L x N x R or N x R, got shape " + shape_of(b));
  const std::int64_t b_adapters = b.shape.size() == 3 ? std::int64_t(b.shape[0]) : 1;
  const std::int64_t n = std::int64_t(b.shape[b.shape.size() - 2]);
  if (std::int64_t(b.shape.back()) != rank)
    throw LoraUsageError(b_path + ": --lora-b's rank is " + std::to_string(b.shape.back()) + " but --lora-a's is " +
                         std::to_string(rank) + " (B is " + shape_of(b) + ", A is " + shape_of(a) + ")");
  if (b_adapters != adapters)
    throw LoraUsageError(b_path + ": --lora-b holds " + std::to_string(b_adapters) + " adapters but --lora-a holds " +
                         std::to_string(adapters) + " (B is " + shape_of(b) + ", A is " + shape_of(a) + ")");
  if (m == 0 || k == 0 || n == 0 || rank == 0 || adapters == 0)
    throw LoraUsageError("empty operand: --input is " + shape_of(x) + ", --lora-a " + shape_of(a) + ", --lora-b " +
                         shape_of(b) + "; M, N, K, R and L must be at least 1");
  const LoraProblem p{m, n, k, adapters, rank};

  if (f.count("--scale") && f.count("--scales"))
    throw LoraUsageError("--scale and --scales exclude each other (one factor for all, or one per adapter)");
  float scale = 1.0f;
  if (const auto s = optional(f, "--scale")) {
    try {
      std::size_t used = 0;
      scale = std::stof(*s, &used);
      if (used != s->size()) throw std::invalid_argument(*s);
    } catch (const std::exception&) {
      throw LoraUsageError("--scale expects a number, got '" + *s + "'");
    }
  }
  LoraHostSegments host;
  std::string scales_path, ranks_path, offsets_path, adapters_path;
  if (const auto s = optional(f, "--scales")) {
    scales_path = *s;
    const npy::Array sc = npy::read(scales_path);
    if (sc.dtype != npy::DType::f32)
      throw LoraUsageError(scales_path + ": --scales must be float32, got " + npy::name(sc.dtype));
    if (std::int64_t(sc.count()) != adapters)
      throw LoraUsageError(scales_path + ": --scales must hold L = " + std::to_string(adapters) +
                           " entries (one per adapter), got " + std::to_string(sc.count()) + " (shape " + shape_of(sc) +
                           ")");
    host.scales.resize(sc.count());
    std::memcpy(host.scales.data(), sc.data.data(), sc.data.size());
  }
  if (const auto r = optional(f, "--ranks")) {
    ranks_path = *r;
    host.ranks = read_ints(ranks_path, "--ranks", std::size_t(adapters), true, "L (one per adapter)");
    for (std::size_t i = 0; i < host.ranks.size(); ++i)
      if (host.ranks[i] < 1 || host.ranks[i] > rank)
        throw LoraUsageError(ranks_path + ": --ranks[" + std::to_string(i) + "] = " + std::to_string(host.ranks[i]) +
                             " is outside 1 .. R = " + std::to_string(rank));
  }
  const auto offsets_flag = optional(f, "--offsets"), adapters_flag = optional(f, "--segment-adapters");
  if (offsets_flag.has_value() != adapters_flag.has_value())
    throw LoraUsageError("--offsets and --segment-adapters come together (without them all rows use adapter 0)");
  if (offsets_flag) {
    offsets_path = *offsets_flag;
    adapters_path = *adapters_flag;
    const npy::Array o = npy::read(offsets_path);
    if (o.dtype != npy::DType::u32)
      throw LoraUsageError(offsets_path + ": --offsets must be uint32, got " + npy::name(o.dtype));
    const npy::Array ia = npy::read(adapters_path);
    if (ia.dtype != npy::DType::i32)
      throw LoraUsageError(adapters_path + ": --segment-adapters must be int32, got " + npy::name(ia.dtype));
    if (ia.count() == 0)
      throw LoraUsageError(adapters_path + ": --segment-adapters holds no segment (shape " + shape_of(ia) + ")");
    if (o.count() != ia.count() + 1)
      throw LoraUsageError(offsets_path + ": --offsets must hold one entry more than --segment-adapters (" +
                           std::to_string(ia.count() + 1) + "), got " + std::to_string(o.count()));
    host.offsets.resize(o.count());
    std::memcpy(host.offsets.data(), o.data.data(), o.data.size());
    host.adapters.resize(ia.count());
    std::memcpy(host.adapters.data(), ia.data.data(), ia.data.size());
    if (host.offsets.front() != 0)
      throw LoraUsageError(offsets_path + ": --offsets[0] = " + std::to_string(host.offsets.front()) +
                           " but must be 0");
    for (std::size_t i = 1; i < host.offsets.size(); ++i)
      if (host.offsets[i] < host.offsets[i - 1])
        throw LoraUsageError(offsets_path + ": --offsets decrease at entry " + std::to_string(i) + " (" +
                             std::to_string(host.offsets[i - 1]) + " then " + std::to_string(host.offsets[i]) + ")");
    if (std::int64_t(host.offsets.back()) != m)
      throw LoraUsageError(offsets_path + ": --offsets end at " + std::to_string(host.offsets.back()) +
                           " but must end at M = " + std::to_string(m) + " (the rows of --input)");
    for (std::size_t i = 0; i < host.adapters.size(); ++i)
      if (host.adapters[i] < -1 || host.adapters[i] >= adapters)
        throw LoraUsageError(adapters_path + ": --segment-adapters[" + std::to_string(i) +
                             "] = " + std::to_string(host.adapters[i]) + " is not an adapter (-1 for none, or 0 to " +
                             std::to_string(adapters - 1) + ")");
  }
  // The same checks as the library's (and any it adds), before the device.
  validate_lora_segments(host, p, command);

  npy::Array y;
  if (accumulate) {
    y = read_in_type(out_path, "--out", type);
    if (y.shape.size() != 2 || std::int64_t(y.shape[0]) != m || std::int64_t(y.shape[1]) != n)
      throw LoraUsageError(out_path + ": --out must be M x N = (" + std::to_string(m) + ", " + std::to_string(n) +
                           ") with --accumulate, got " + shape_of(y));
  } else {
    y.dtype = type == ElementType::f32   ? npy::DType::f32
              : type == ElementType::f16 ? npy::DType::f16
                                         : npy::DType::bf16_as_u16;
    y.shape = {std::size_t(m), std::size_t(n)};
    y.data.resize(std::size_t(m * n) * element_size(type));
  }

  RuntimeOptions options;
  options.device = optional(f, "--device").value_or("");
  options.profile_path = optional(f, "--profile").value_or("");
  Result<Runtime> opened = Runtime::open(options);
  opened.status().throw_if_error();
  Runtime& rt = opened.value();
  boost::compute::buffer dx = upload(rt, x.data.data(), x.data.size());
  boost::compute::buffer da = upload(rt, a.data.data(), a.data.size());
  boost::compute::buffer db = upload(rt, b.data.data(), b.data.size());
  boost::compute::buffer dy =
      accumulate ? upload(rt, y.data.data(), y.data.size()) : rt.allocate(y.data.size()).value();
  LoraArgs args;
  args.problem = p;
  args.x = {dx.get(), 0, 0, type};
  args.a = {da.get(), 0, 0, 0, type};
  args.b = {db.get(), 0, 0, 0, type};
  args.y = {dy.get(), 0, 0, type};
  args.scale = scale;
  args.accumulate = accumulate;
  args.validate = false;  // checked above on the host
  boost::compute::buffer d_scales, d_ranks, d_offsets, d_adapters;
  if (!host.scales.empty()) {
    d_scales = upload(rt, host.scales.data(), host.scales.size() * 4);
    args.scales = d_scales.get();
  }
  if (!host.ranks.empty()) {
    d_ranks = upload(rt, host.ranks.data(), host.ranks.size() * 4);
    args.ranks = d_ranks.get();
  }
  if (!host.offsets.empty()) {
    d_offsets = upload(rt, host.offsets.data(), host.offsets.size() * 4);
    d_adapters = upload(rt, host.adapters.data(), host.adapters.size() * 4);
    args.segments = std::int64_t(host.adapters.size());
    args.offsets = d_offsets.get();
    args.segment_adapters = d_adapters.get();
  }
  lora_apply(rt, args).throw_if_error();
  rt.queue().enqueue_read_buffer(dy, 0, y.data.size(), y.data.data());
  npy::write_atomically(out_path, y);
  return 0;
}

const char* lora_help() { return kLoraHelp; }

}  // namespace ocltk::cli
