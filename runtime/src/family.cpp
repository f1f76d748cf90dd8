#include "ocltk/family.hpp"

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
