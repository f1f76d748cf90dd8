// `tune --shapes FILE`: a user's own problem sizes, tuned beside the default classes.
//
//   model:                      # optional: sizes the families derive their problems from
//     hidden: 4096
//     intermediate: 14336
//     experts: 8                # NF4 expert projections (with top_k, block_size)
//     top_k: 2                  # rows laid out by top-k routing (nf4_problem_offsets)
//     lora_ranks: [16, 64]      # LoRA shrink and expand per rank
//     tokens: [1, 16, 512]      # rows per launch (default 1, 16, 512)
//   shapes:                     # optional: explicit problems
//     - {kernel: gemm_nt, m: 1, n: 4096, k: 4096}
//     - {kernel: nf4_forward, experts: 8, n: 14336, k: 4096, rows: 16, block_size: 64}
//     - {kernel: nf4_forward, experts: 64, n: 1408, k: 2048, rows: 48, top_k: 6}
#pragma once

#include <string>
#include <vector>

#include "workload.hpp"

namespace ocltk::tuner {

struct UserShape {
  const FamilyTuning* tuning = nullptr;
  std::string shape_class;  // the class the runtime files it under (the family's rule)
  Problem problem;
  std::string origin;  // "model" or "shapes[2]", for messages
};

// Reads a shapes file; every problem is checked against its family's keys. Duplicates
// (also between the model's and the explicit list) are dropped. Throws
// Error(kInvalidArgument) whose message starts "FILE:LINE:COLUMN: ".
std::vector<UserShape> read_shapes(const std::string& path, const std::vector<FamilyTuning>& families);
// The same on a shapes file's text; `path` names it in the messages.
std::vector<UserShape> parse_shapes(const std::string& text, const std::string& path,
                                    const std::vector<FamilyTuning>& families);

}  // namespace ocltk::tuner
