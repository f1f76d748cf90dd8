// The families `ocltk tune` knows, in tuning order. A new family adds its workload
// factory here and nothing else in the tuner.
#include <algorithm>
#include <utility>

#include "ocltk/gemm_nt.hpp"
#include "ocltk/lora.hpp"
#include "ocltk/nf4.hpp"
#include "workload.hpp"

namespace ocltk::tuner {

std::unique_ptr<Workload> make_gemm_nt_workload(Runtime& rt, const std::string& shape_class, std::mt19937_64& rng);
std::unique_ptr<Workload> make_gemm_nt_workload_for(Runtime& rt, const GemmProblem& p, ElementType type,
                                                    GemmPrecision precision, std::mt19937_64& rng);
std::unique_ptr<Workload> make_nf4_forward_workload(Runtime& rt, const std::string& shape_class, std::mt19937_64& rng);
std::unique_ptr<Workload> make_nf4_backward_workload(Runtime& rt, const std::string& shape_class, std::mt19937_64& rng);
std::unique_ptr<Workload> make_nf4_workload_for(Runtime& rt, bool forward, const Nf4Problem& p, std::mt19937_64& rng);
std::unique_ptr<Workload> make_lora_workload(Runtime& rt, const std::string& kernel, const std::string& shape_class,
                                             std::mt19937_64& rng);
std::unique_ptr<Workload> make_lora_workload_for(Runtime& rt, const std::string& kernel, const LoraTuneProblem& p,
                                                 std::mt19937_64& rng);

namespace {

GemmProblem gemm_of(const Problem& p) { return {p.at("m"), p.at("n"), p.at("k")}; }
// A problem's input type as the tuner measures it: bf16 for input_bits 16, else f32.
ElementType input_type_of(const Problem& p) { return input_bits_of(p) == 16 ? ElementType::bf16 : ElementType::f32; }
Nf4Problem nf4_of(const Problem& p) {
  const auto top_k = p.find("top_k");
  return {p.at("experts"),
          p.at("n"),
          p.at("k"),
          p.at("rows"),
          p.at("block_size"),
          input_bits_of(p),
          top_k == p.end() ? 0 : top_k->second};
}

// gemm_nt's tc multiplies f32 in TF32: it is searched only in the classes that allow it
// (large_tf32 … lora_expand_tf32x3) and in the 16-bit ones, and only where the probe passes on
// the device (which also keeps it out where there are no tensor cores). skinny is searched only
// in the classes with at most 64 rows on one side (gemm_nt_skinny_class): elsewhere it computes
// correctly but streams the big operand once per SR rows of the other. tcs, tc's kernel with
// small tiles and K split between warp groups, is searched only in the skinny classes that tc
// may serve (the 16-bit ones, lora_shrink's TF32 twins), under tc's rules; tcd (fragments
// straight from global memory) in the classes tc may serve but large's (large_half,
// large_tf32, large_tf32x3), where tc's staged tiles reuse what they load. These are the
// class's rules; gemm_nt_searches adds the probe.
bool gemm_nt_class_allows(const std::string& shape_class, const AlgorithmSpec& algorithm) {
  if (algorithm.name == "skinny") return gemm_nt_skinny_class(shape_class);
  if (!gemm_nt_tensor_core_algorithm(algorithm.name)) return true;
  const bool tc_class = gemm_nt_class_input(shape_class) != ElementType::f32 ||
                        gemm_nt_class_precision(shape_class) != GemmPrecision::exact;
  if (!tc_class) return false;
  if (algorithm.name == "tcs") return gemm_nt_skinny_class(shape_class);
  if (algorithm.name == "tcd") return gemm_nt_exact_class(shape_class) != "large" && shape_class != "large_half";
  return true;
}

bool gemm_nt_searches(Runtime& rt, const std::string& shape_class, const AlgorithmSpec& algorithm) {
  if (!gemm_nt_class_allows(shape_class, algorithm)) return false;
  if (!gemm_nt_tensor_core_algorithm(algorithm.name)) return true;
  return rt.probe_tensor_cores(gemm_nt_class_input(shape_class), gemm_nt_class_precision(shape_class)).usable;
}

// gemm_nt's TF32 classes where none of their tensor-core algorithms may run: excluded
// (OCLTK_EXCLUDE_ALGORITHMS), or refused by the probe for their precision (no NVIDIA GPU,
// OCLTK_TC_PROBE=off). They then search the SIMT algorithms alone, whose programs take no
// precision (gemm_nt_launch_variant), on the exact class's problem (gemm_nt_class_problem), so
// they would measure what the exact class measures; the runtime serves them with its point.
std::optional<ServedBy> gemm_nt_served_by(Runtime& rt, const std::string& shape_class) {
  const GemmPrecision precision = gemm_nt_class_precision(shape_class);
  if (precision == GemmPrecision::exact) return std::nullopt;
  const std::string exact = gemm_nt_exact_class(shape_class);
  const std::string runs = "its launches run " + exact + "'s SIMT kernels here: ";
  bool tensor_cores_left = false;
  for (const AlgorithmSpec& a : gemm_nt_family().algorithms)
    tensor_cores_left =
        tensor_cores_left || (gemm_nt_tensor_core_algorithm(a.name) && gemm_nt_class_allows(shape_class, a) &&
                              !rt.excluded_algorithms().excludes("gemm_nt", a.name));
  if (!tensor_cores_left)
    return ServedBy{exact,
                    runs + "its tensor-core algorithms are excluded (" + rt.excluded_algorithms().describe() + ")"};
  const TensorCoreProbe probe = rt.probe_tensor_cores(gemm_nt_class_input(shape_class), precision);
  if (probe.usable) return std::nullopt;
  return ServedBy{exact, runs + probe.reason};
}

// LoRA on every projection of the model: x·Aᵀ (shrink to the rank) and h·Bᵀ (expand back),
// on the hidden and the intermediate width.
std::vector<Problem> derive_lora(const ModelDescription& m) {
  std::vector<Problem> out;
  for (std::int64_t t : m.tokens)
    for (std::int64_t r : m.lora_ranks)
      for (std::int64_t width : {m.hidden, m.intermediate}) {
        if (width <= 0) continue;
        out.push_back({{"m", t}, {"n", r}, {"k", width}});
        out.push_back({{"m", t}, {"n", width}, {"k", r}});
      }
  return out;
}

// The expert MLP in NF4: up/gate (N = intermediate, K = hidden) and down (N = hidden,
// K = intermediate), each token routed to top_k experts: the rows are laid out as top-k
// routing lays them (nf4_problem_offsets), uneven and with experts left empty, as the
// engine's launches will have them.
std::vector<Problem> derive_experts(const ModelDescription& m) {
  std::vector<Problem> out;
  if (m.experts <= 0 || m.hidden <= 0 || m.intermediate <= 0) return out;
  const std::int64_t top_k = std::clamp<std::int64_t>(m.top_k, 1, m.experts);
  for (std::int64_t t : m.tokens) {
    const std::int64_t rows = t * top_k;
    for (const auto& [n, k] : {std::pair{m.intermediate, m.hidden}, std::pair{m.hidden, m.intermediate}})
      out.push_back(
          {{"experts", m.experts}, {"n", n}, {"k", k}, {"rows", rows}, {"block_size", m.block_size}, {"top_k", top_k}});
  }
  return out;
}

// The class the runtime files a launch under: by rows per expert with rows, counted on the
// problem's layout (even or routed: nf4_problem_offsets).
std::string nf4_class_of(const Problem& p) {
  const std::vector<std::uint32_t> offsets = nf4_problem_offsets(nf4_of(p));
  const std::int64_t active = std::max<std::int64_t>(1, nf4_active_experts(offsets.data(), offsets.size()));
  return nf4_shape_class(double(p.at("rows")) / double(active));
}

// An NF4 direction: its problems, classes and model shapes are the same both ways.
FamilyTuning nf4_tuning(const KernelFamily& family, bool forward,
                        std::unique_ptr<Workload> (*make)(Runtime&, const std::string&, std::mt19937_64&)) {
  return {
      &family,
      make,
      {"experts", "n", "k", "rows", "block_size", "input_bits", "top_k"},
      nf4_class_of,
      [forward](Runtime& rt, const Problem& p, std::mt19937_64& rng) {
        return make_nf4_workload_for(rt, forward, nf4_of(p), rng);
      },
      derive_experts,
      // Two experts of a few rows each, K a multiple of every block size and reduction width.
      [](std::int64_t input_bits) -> Problem {
        return {{"experts", 2}, {"n", 128}, {"k", 1024}, {"rows", 8}, {"block_size", 64}, {"input_bits", input_bits}};
      },
      nullptr,  // searches: every algorithm in every class
      nullptr,  // make_for_class: make_for serves profile check
      nullptr,  // served_by: every class is its own
      [](const std::string& shape_class) { return int(nf4_class_problem(shape_class, false).input_bits); },
      [](const std::string&, int input_bits, const AlgorithmSpec& a) {
        return nf4_launch_variant(a, input_bits == 16 ? ElementType::bf16 : ElementType::f32);
      }};
}

// A LoRA problem as the tuner lays it out; shrink's problems have no N and expand's no K
// (their buffers then take a width of 1).
LoraTuneProblem lora_of(const Problem& p) {
  const auto get = [&](const char* key) {
    const auto it = p.find(key);
    return it == p.end() ? std::int64_t(1) : it->second;
  };
  LoraTuneProblem t;
  t.problem = {p.at("m"), get("n"), get("k"), p.at("adapters"), p.at("rank")};
  t.segments = p.at("segments");
  t.type = input_type_of(p);
  return t;
}

// LoRA applied to every projection of the model, as engines run it (bf16): X of `hidden`
// columns into the hidden or the intermediate width, one adapter per rank.
std::vector<Problem> derive_lora_apply(const ModelDescription& m) {
  std::vector<Problem> out;
  for (std::int64_t t : m.tokens)
    for (std::int64_t r : m.lora_ranks)
      for (std::int64_t width : {m.hidden, m.intermediate}) {
        if (width <= 0) continue;
        out.push_back({{"m", t},
                       {"n", width},
                       {"k", m.hidden},
                       {"rank", r},
                       {"adapters", 1},
                       {"segments", 1},
                       {"input_bits", 16}});
      }
  return out;
}

// A LoRA family: its problems' keys (shrink has no N, expand no K), classes by rows per
// segment, workloads by the family's name.
FamilyTuning lora_tuning(const KernelFamily& family) {
  const std::string name = family.name;
  std::vector<std::string> keys = {"m"};
  if (name != "lora_shrink") keys.push_back("n");
  if (name != "lora_expand") keys.push_back("k");
  keys.insert(keys.end(), {"rank", "adapters", "segments", "input_bits"});
  const auto derive = [name](const ModelDescription& m) {
    std::vector<Problem> out = derive_lora_apply(m);
    for (Problem& p : out) p.erase(name == "lora_shrink" ? "n" : name == "lora_expand" ? "k" : "");
    return out;
  };
  return {&family,
          [name](Runtime& rt, const std::string& shape_class, std::mt19937_64& rng) {
            return make_lora_workload(rt, name, shape_class, rng);
          },
          keys, [](const Problem& p) { return lora_shape_class(p.at("m"), p.at("segments")); },
          [name](Runtime& rt, const Problem& p, std::mt19937_64& rng) {
            return make_lora_workload_for(rt, name, lora_of(p), rng);
          },
          derive,
          // Two adapters over two segments of a few rows.
          [name](std::int64_t input_bits) {
            Problem p{{"m", 16}, {"rank", 16}, {"adapters", 2}, {"segments", 2}};
            if (name != "lora_shrink") p["n"] = 64;
            if (name != "lora_expand") p["k"] = 64;
            if (input_bits == 16) p["input_bits"] = 16;
            return p;
          },
          nullptr,  // searches: every algorithm in every class
          nullptr,  // make_for_class: make_for serves profile check
          nullptr,  // served_by: every class is its own
          [](const std::string& shape_class) {
            return lora_class_problem(shape_class, false).type == ElementType::f32 ? 32 : 16;
          },
          [](const std::string&, int input_bits, const AlgorithmSpec&) {
            return lora_launch_variant(input_bits == 16 ? ElementType::bf16 : ElementType::f32);
          }};
}

}  // namespace

const std::vector<FamilyTuning>& tunable_families() {
  static const std::vector<FamilyTuning> families = {
      {&gemm_nt_family(),
       make_gemm_nt_workload,
       {"m", "n", "k", "input_bits"},
       [](const Problem& p) { return gemm_nt_shape_class(gemm_of(p), input_type_of(p)); },
       [](Runtime& rt, const Problem& p, std::mt19937_64& rng) {
         return make_gemm_nt_workload_for(rt, gemm_of(p), input_type_of(p), GemmPrecision::exact, rng);
       },
       derive_lora,
       [](std::int64_t input_bits) {
         Problem p{{"m", 16}, {"n", 64}, {"k", 64}};
         if (input_bits == 16) p["input_bits"] = 16;
         return p;
       },
       gemm_nt_searches,
       [](Runtime& rt, const std::string& shape_class, const Problem& p, std::mt19937_64& rng) {
         return make_gemm_nt_workload_for(rt, gemm_of(p), input_type_of(p), gemm_nt_class_precision(shape_class), rng);
       },
       gemm_nt_served_by,
       [](const std::string& shape_class) { return gemm_nt_class_input(shape_class) == ElementType::f32 ? 32 : 16; },
       [](const std::string& shape_class, int input_bits, const AlgorithmSpec& a) {
         const ElementType type = input_bits == 16 ? ElementType::bf16 : ElementType::f32;
         return gemm_nt_launch_variant(type, type, a.name, gemm_nt_class_precision(shape_class));
       }},
      nf4_tuning(nf4_forward_family(), true, make_nf4_forward_workload),
      nf4_tuning(nf4_backward_family(), false, make_nf4_backward_workload),
      lora_tuning(lora_shrink_family()),
      lora_tuning(lora_expand_family()),
      lora_tuning(lora_apply_family()),
  };
  return families;
}

}  // namespace ocltk::tuner
