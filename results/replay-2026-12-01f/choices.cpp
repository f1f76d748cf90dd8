// Which profile entry serves each decode case of an h200 bench call, as the runtime
// chooses it (launch problem with the experts with rows and the most rows on one expert
// counted from the bench's layout, Profile::find), one line a case:
//   CASE_NAME<TAB>TYPE<TAB>ALGORITHM {P=V ...}
// Build: g++ -std=c++17 -I../../runtime/include choices.cpp -L../../build/runtime -locltk -lOpenCL -lz -lyaml-cpp
// (against a checkout before 2026-12-01f, whose runtime takes no max_rows, add -DBEFORE_MAX_ROWS)
// Run:   ./a.out PROFILE.yaml
#include <algorithm>
#include <cstdio>
#include <ocltk/nf4.hpp>
#include <ocltk/profile.hpp>
#include <string>

using namespace ocltk;

namespace {

struct Shape {
  const char* name;
  std::int64_t experts, n, k, top_k;
};

// bench_nf4's layouts: top-K routing seeded as its offsets_for does, else the even spread.
std::vector<std::uint32_t> offsets_of(const Shape& s, std::int64_t rows) {
  if (s.top_k > 0) {
    const std::uint32_t seed = std::uint32_t(s.experts * 73856093 ^ s.n * 19349663 ^ s.k * 83492791);
    return nf4_topk_offsets(rows / s.top_k, s.experts, s.top_k, seed + std::uint32_t(rows) + 3);
  }
  Nf4Problem even;
  even.experts = s.experts;
  even.rows = rows;
  return nf4_problem_offsets(even);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const Profile profile = read_profile(argv[1]);
  const Shape shapes[] = {{"mixtral_8x14336x4096", 8, 14336, 4096, 0},
                          {"mixtral_8x14336x4096_top2", 8, 14336, 4096, 2},
                          {"fine_grained_64x1408x2048", 64, 1408, 2048, 0},
                          {"fine_grained_64x1408x2048_top6", 64, 1408, 2048, 6}};
  for (const Shape& s : shapes)
    for (std::int64_t rows : {1, 2, 4, 6, 8, 12, 16, 18, 24, 32, 48, 64, 72, 96, 128}) {
      if (s.top_k > 0 && rows % s.top_k != 0) continue;
      const std::vector<std::uint32_t> off = offsets_of(s, rows);
      const std::int64_t active = nf4_active_experts(off.data(), off.size());
#ifdef BEFORE_MAX_ROWS
      std::int64_t longest = 0;
      for (std::size_t e = 0; e + 1 < off.size(); ++e) longest = std::max<std::int64_t>(longest, off[e + 1] - off[e]);
#else
      const std::int64_t longest = nf4_max_expert_rows(off.data(), off.size());
#endif
      const Nf4Geometry g{s.experts, s.n, s.k, 64};
      for (const char* kernel : {"nf4_forward", "nf4_backward"})
        for (ElementType type : {ElementType::f32, ElementType::bf16}) {
#ifdef BEFORE_MAX_ROWS
          const auto problem = nf4_problem_of(rows, g, type, active);
#else
          const auto problem = nf4_problem_of(rows, g, type, active, longest);
#endif
          const std::string cls = nf4_shape_class(double(rows) / double(active));
          const ProfileEntry* e = profile.find(kernel, cls, &problem);
          std::string params;
          if (e != nullptr)
            for (const auto& [name, value] : e->params)
              params += (params.empty() ? "" : " ") + name + "=" + std::to_string(value);
          std::printf("%s/%s/rows%lld/%s/%s\t%s {%s}\tactive=%lld max_rows=%lld\n", kernel, s.name, (long long)rows,
                      cls.c_str(), type == ElementType::f32 ? "ours" : "ours_bf16", e ? e->algorithm.c_str() : "none",
                      params.c_str(), (long long)active, (long long)longest);
        }
    }
}
