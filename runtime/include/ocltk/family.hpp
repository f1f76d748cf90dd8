// A kernel family: the algorithms that can compute it and the problem-size classes a
// profile keys its choices on. Each family lives in one vertical slice (its .cl files,
// its table, its geometry, its CPU reference, its shape classes) and registers here.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ocltk/params.hpp"

namespace ocltk {

struct ShapeClassSpec {
  std::string name;  // e.g. "gemv"
  std::string rule;  // how a launch maps to it, for docs and `ocltk profile show`
};

// Which algorithm and parameters serve a class when no profile says otherwise.
struct BuiltinChoice {
  std::string algorithm;
  Params params;  // over the algorithm's defaults
};

// Algorithms removed from what the runtime and the tuner may choose: the escape hatch for a
// driver that miscompiles one (OCLTK_EXCLUDE_ALGORITHMS). Profile entries that name them are
// passed over (the next entry, profile or built-in default serves), the tuner searches
// without them, and a class whose built-in algorithm is removed falls back to its family's
// first algorithm that is not (KernelFamily::builtin_for). Explicit choices (the *_with
// launches) are not filtered.
class AlgorithmExclusions {
 public:
  // `list`: comma-separated items, each ALGORITHM (in every family that has one of that name)
  // or KERNEL:ALGORITHM (e.g. "tc,gemm_nt:xgemm"); spaces around items are ignored. Throws
  // Error(kInvalidArgument) starting with `origin` for an item that names no registered
  // algorithm, or a list that removes every algorithm of a family.
  static AlgorithmExclusions parse(const std::string& list, const std::string& origin = "OCLTK_EXCLUDE_ALGORITHMS");
  // OCLTK_EXCLUDE_ALGORITHMS, parsed; none where it is unset or empty.
  static AlgorithmExclusions from_environment();

  bool excludes(const std::string& kernel, const std::string& algorithm) const {
    return pairs_.count({kernel, algorithm}) > 0;
  }
  bool empty() const { return pairs_.empty(); }
  std::string describe() const;  // "gemm_nt:xgemm, nf4_backward:tc"

 private:
  std::set<std::pair<std::string, std::string>> pairs_;  // (kernel, algorithm)
};

struct KernelFamily {
  std::string name;  // "gemm_nt"
  std::vector<AlgorithmSpec> algorithms;
  std::vector<ShapeClassSpec> classes;
  // Built-in default per class, same order as `classes`.
  std::vector<BuiltinChoice> builtin;

  const AlgorithmSpec* find_algorithm(const std::string& name) const;
  const ShapeClassSpec* find_class(const std::string& name) const;
  BuiltinChoice builtin_for(const std::string& shape_class) const;
  // The same where `excluded` removes algorithms: the class's own built-in choice if it is
  // not removed, else the first algorithm of the table that is not, at its defaults, and (with
  // `limits`) legal there and not searched only on tensor-core devices. Throws Error(kNotFound)
  // when none is left.
  BuiltinChoice builtin_for(const std::string& shape_class, const AlgorithmExclusions& excluded,
                            const DeviceLimits* limits = nullptr) const;
  // The built-in default's point: builtin_for's choice with its parameters complete (the
  // algorithm's defaults under the class's overrides), as launched and as a tune times it.
  BuiltinChoice builtin_point(const std::string& shape_class) const;
  BuiltinChoice builtin_point(const std::string& shape_class, const AlgorithmExclusions& excluded,
                              const DeviceLimits* limits = nullptr) const;
  // Whether a point (its parameters complete) is the class's built-in default's.
  bool is_builtin_point(const std::string& shape_class, const std::string& algorithm, const Params& params) const;
};

// All registered families (gemm_nt, ...).
const std::vector<const KernelFamily*>& kernel_families();
const KernelFamily* find_family(const std::string& name);

// The text of an embedded kernel file, e.g. "gemm_nt_tiled.cl"; throws Error(kNotFound).
const std::string& kernel_source(const std::string& source_name);
std::vector<std::string> kernel_source_names();

}  // namespace ocltk
