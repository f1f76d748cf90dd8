// The families `ocltk tune` knows, in tuning order. A new family adds its workload
// factory here and nothing else in the tuner.
#include <algorithm>

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
  return {p.at("experts"), p.at("n"), p.at("k"), p.at("rows"), p.at("block_size"), input_bits_of(p)};
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
// K = intermediate), each token routed to top_k experts.
std::vector<Problem> derive_experts(const ModelDescription& m) {
  std::vector<Problem> out;
  if (m.experts <= 0 || m.hidden <= 0 || m.intermediate <= 0) return out;
  for (std::int64_t t : m.tokens) {
    const std::int64_t rows = t * std::max<std::int64_t>(1, m.top_k);
    out.push_back(
        {{"experts", m.experts}, {"n", m.intermediate}, {"k", m.hidden}, {"rows", rows}, {"block_size", m.block_size}});
    out.push_back(
        {{"experts", m.experts}, {"n", m.hidden}, {"k", m.intermediate}, {"rows", rows}, {"block_size", m.block_size}});
  }
  return out;
}

std::string nf4_class_of(const Problem& p) {
  return nf4_shape_class(double(p.at("rows")) / double(std::max<std::int64_t>(1, p.at("experts"))));
}

// An NF4 direction: its problems, classes and model shapes are the same both ways.
FamilyTuning nf4_tuning(const KernelFamily& family, bool forward,
                        std::unique_ptr<Workload> (*make)(Runtime&, const std::string&, std::mt19937_64&)) {
  return {&family,
          make,
          {"experts", "n", "k", "rows", "block_size", "input_bits"},
          nf4_class_of,
          [forward](Runtime& rt, const Problem& p, std::mt19937_64& rng) {
            return make_nf4_workload_for(rt, forward, nf4_of(p), rng);
          },
          derive_experts};
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
       derive_lora},
      nf4_tuning(nf4_forward_family(), true, make_nf4_forward_workload),
      nf4_tuning(nf4_backward_family(), false, make_nf4_backward_workload),
  };
  return families;
}

}  // namespace ocltk::tuner
