// A kernel family: the algorithms that can compute it and the problem-size classes a
// profile keys its choices on. Each family lives in one vertical slice (its .cl files,
// its table, its geometry, its CPU reference, its shape classes) and registers here.
#pragma once

#include <string>
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

struct KernelFamily {
  std::string name;  // "gemm_nt"
  std::vector<AlgorithmSpec> algorithms;
  std::vector<ShapeClassSpec> classes;
  // Built-in default per class, same order as `classes`.
  std::vector<BuiltinChoice> builtin;

  const AlgorithmSpec* find_algorithm(const std::string& name) const;
  const ShapeClassSpec* find_class(const std::string& name) const;
  BuiltinChoice builtin_for(const std::string& shape_class) const;
};

// All registered families (gemm_nt, ...).
const std::vector<const KernelFamily*>& kernel_families();
const KernelFamily* find_family(const std::string& name);

// The text of an embedded kernel file, e.g. "gemm_nt_tiled.cl"; throws Error(kNotFound).
const std::string& kernel_source(const std::string& source_name);
std::vector<std::string> kernel_source_names();

}  // namespace ocltk
