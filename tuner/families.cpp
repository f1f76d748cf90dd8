// The families `ocltk tune` knows, in tuning order. A new family adds its workload
// factory here and nothing else in the tuner.
#include <algorithm>
#include <utility>

#include "ocltk/gemm_nt.hpp"
#include "ocltk/nf4.hpp"
#include "workload.hpp"

namespace ocltk::tuner {

std::unique_ptr<Workload> make_gemm_nt_workload(Runtime& rt, const std::string& shape_class, std::mt19937_64& rng);
std::unique_ptr<Workload> make_gemm_nt_workload_for(Runtime& rt, const GemmProblem& p, std::mt19937_64& rng);
std::unique_ptr<Workload> make_nf4_forward_workload(Runtime& rt, const std::string& shape_class, std::mt19937_64& rng);
std::unique_ptr<Workload> make_nf4_backward_workload(Runtime& rt, const std::string& shape_class, std::mt19937_64& rng);
std::unique_ptr<Workload> make_nf4_workload_for(Runtime& rt, bool forward, const Nf4Problem& p, std::mt19937_64& rng);

namespace {

GemmProblem gemm_of(const Problem& p) { return {p.at("m"), p.at("n"), p.at("k")}; }
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
      }};
}

}  // namespace

const std::vector<FamilyTuning>& tunable_families() {
  static const std::vector<FamilyTuning> families = {
      {&gemm_nt_family(),
       make_gemm_nt_workload,
       {"m", "n", "k"},
       [](const Problem& p) { return gemm_nt_shape_class(gemm_of(p)); },
       [](Runtime& rt, const Problem& p, std::mt19937_64& rng) {
         return make_gemm_nt_workload_for(rt, gemm_of(p), rng);
       },
       derive_lora,
       [](std::int64_t) -> Problem {
         return {{"m", 16}, {"n", 64}, {"k", 64}};
       }},
      nf4_tuning(nf4_forward_family(), true, make_nf4_forward_workload),
      nf4_tuning(nf4_backward_family(), false, make_nf4_backward_workload),
  };
  return families;
}

}  // namespace ocltk::tuner
