#include "ocltk/family.hpp"

#include <cstdlib>
#include <sstream>

#include "ocltk/gemm_nt.hpp"
#include "ocltk/lora.hpp"
#include "ocltk/nf4.hpp"
#include "ocltk/status.hpp"

namespace ocltk {
namespace detail {
const std::map<std::string, std::string>& embedded_kernels();  // generated at build time
}

const AlgorithmSpec* KernelFamily::find_algorithm(const std::string& algorithm) const {
  for (const AlgorithmSpec& a : algorithms)
    if (a.name == algorithm) return &a;
  return nullptr;
}

const ShapeClassSpec* KernelFamily::find_class(const std::string& shape_class) const {
  for (const ShapeClassSpec& c : classes)
    if (c.name == shape_class) return &c;
  return nullptr;
}

BuiltinChoice KernelFamily::builtin_for(const std::string& shape_class) const {
  for (std::size_t i = 0; i < classes.size(); ++i)
    if (classes[i].name == shape_class) return builtin.at(i);
  throw Error(ErrorCode::kNotFound, "kernel " + name + " has no shape class '" + shape_class + "'");
}

BuiltinChoice KernelFamily::builtin_for(const std::string& shape_class, const AlgorithmExclusions& excluded,
                                        const DeviceLimits* limits) const {
  BuiltinChoice own = builtin_for(shape_class);
  if (!excluded.excludes(name, own.algorithm)) return own;
  for (const AlgorithmSpec& a : algorithms) {
    if (excluded.excludes(name, a.name)) continue;
    if (limits != nullptr && (a.violation(a.defaults(), limits) || (a.search_needs_tensor_mma && !limits->tensor_mma)))
      continue;
    return {a.name, {}};
  }
  throw Error(ErrorCode::kNotFound, "OCLTK_EXCLUDE_ALGORITHMS (" + excluded.describe() + ") leaves " + name +
                                        " no algorithm that this device can run");
}

BuiltinChoice KernelFamily::builtin_point(const std::string& shape_class) const {
  return builtin_point(shape_class, AlgorithmExclusions{});
}

BuiltinChoice KernelFamily::builtin_point(const std::string& shape_class, const AlgorithmExclusions& excluded,
                                          const DeviceLimits* limits) const {
  BuiltinChoice b = builtin_for(shape_class, excluded, limits);
  b.params = find_algorithm(b.algorithm)->complete(b.params);
  return b;
}

bool KernelFamily::is_builtin_point(const std::string& shape_class, const std::string& algorithm,
                                    const Params& params) const {
  const BuiltinChoice b = builtin_point(shape_class);
  return algorithm == b.algorithm && params == b.params;
}

AlgorithmExclusions AlgorithmExclusions::parse(const std::string& list, const std::string& origin) {
  AlgorithmExclusions out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    const auto first = item.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    item = item.substr(first, item.find_last_not_of(" \t") - first + 1);
    const auto colon = item.find(':');
    const std::string kernel = colon == std::string::npos ? "" : item.substr(0, colon);
    const std::string algorithm = colon == std::string::npos ? item : item.substr(colon + 1);
    bool named = false;
    for (const KernelFamily* f : kernel_families()) {
      if (!kernel.empty() && f->name != kernel) continue;
      if (f->find_algorithm(algorithm) == nullptr) continue;
      out.pairs_.insert({f->name, algorithm});
      named = true;
    }
    if (!named) {
      std::string known;
      for (const KernelFamily* f : kernel_families())
        for (const AlgorithmSpec& a : f->algorithms) known += (known.empty() ? "" : ", ") + f->name + ":" + a.name;
      throw Error(ErrorCode::kInvalidArgument, origin + ": '" + item + "' names no algorithm (known: " + known + ")");
    }
  }
  for (const KernelFamily* f : kernel_families()) {
    bool left = false;
    for (const AlgorithmSpec& a : f->algorithms) left |= !out.excludes(f->name, a.name);
    if (!left) throw Error(ErrorCode::kInvalidArgument, origin + " removes every algorithm of " + f->name);
  }
  return out;
}

AlgorithmExclusions AlgorithmExclusions::from_environment() {
  const char* env = std::getenv("OCLTK_EXCLUDE_ALGORITHMS");
  return env == nullptr ? AlgorithmExclusions() : parse(env);
}

std::string AlgorithmExclusions::describe() const {
  std::string out;
  for (const auto& [kernel, algorithm] : pairs_) out += (out.empty() ? "" : ", ") + kernel + ":" + algorithm;
  return out;
}

const std::vector<const KernelFamily*>& kernel_families() {
  static const std::vector<const KernelFamily*> families = {&gemm_nt_family(),      &nf4_forward_family(),
                                                            &nf4_backward_family(), &lora_shrink_family(),
                                                            &lora_expand_family(),  &lora_apply_family()};
  return families;
}

const KernelFamily* find_family(const std::string& name) {
  for (const KernelFamily* f : kernel_families())
    if (f->name == name) return f;
  return nullptr;
}

const std::string& kernel_source(const std::string& source_name) {
  const auto& kernels = detail::embedded_kernels();
  const auto it = kernels.find(source_name);
  if (it == kernels.end()) throw Error(ErrorCode::kNotFound, "no embedded kernel source named " + source_name);
  return it->second;
}

std::vector<std::string> kernel_source_names() {
  std::vector<std::string> names;
  for (const auto& [name, text] : detail::embedded_kernels()) names.push_back(name);
  return names;
}

}  // namespace ocltk
