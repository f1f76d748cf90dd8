// The families `ocltk tune` knows, in tuning order. A new family adds its workload
// factory here and nothing else in the tuner.
#include "ocltk/gemm_nt.hpp"
#include "ocltk/nf4.hpp"
#include "workload.hpp"

namespace ocltk::tuner {

std::unique_ptr<Workload> make_gemm_nt_workload(Runtime& rt, const std::string& shape_class, std::mt19937_64& rng);
std::unique_ptr<Workload> make_nf4_forward_workload(Runtime& rt, const std::string& shape_class, std::mt19937_64& rng);
std::unique_ptr<Workload> make_nf4_backward_workload(Runtime& rt, const std::string& shape_class, std::mt19937_64& rng);

const std::vector<FamilyTuning>& tunable_families() {
  static const std::vector<FamilyTuning> families = {
      {&gemm_nt_family(), make_gemm_nt_workload},
      {&nf4_forward_family(), make_nf4_forward_workload},
      {&nf4_backward_family(), make_nf4_backward_workload},
  };
  return families;
}

}  // namespace ocltk::tuner
