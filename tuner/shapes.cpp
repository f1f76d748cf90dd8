#include "shapes.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "ocltk/bounded_file.hpp"
#include "ocltk/status.hpp"

namespace ocltk::tuner {
namespace {

constexpr std::int64_t kMaxDimension = std::int64_t(1) << 30;
// Experts and rows are laid out on the host before anything is measured (nf4_problem_offsets:
// an offset per expert, a row per routed pair), so their bound is what that may hold.
constexpr std::int64_t kMaxExperts = std::int64_t(1) << 20;
constexpr std::int64_t kMaxRows = std::int64_t(1) << 24;

struct Reader {
  std::string path;
  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& message) const {
    std::ostringstream out;
    out << path << ":" << mark.line + 1 << ":" << mark.column + 1 << ": " << message;
    throw Error(ErrorCode::kInvalidArgument, out.str());
  }
  std::int64_t positive(const YAML::Node& n, const std::string& what, std::int64_t most = kMaxDimension) const {
    std::int64_t v = 0;
    try {
      v = n.as<std::int64_t>();
    } catch (const YAML::Exception&) {
      fail(n.Mark(), what + " must be an integer");
    }
    if (v < 1 || v > most)
      fail(n.Mark(), what + " = " + std::to_string(v) + " must be from 1 to " + std::to_string(most));
    return v;
  }
  // A mapping key or a name: a scalar, else a fault at its position.
  std::string name(const YAML::Node& n, const std::string& what) const {
    if (!n.IsScalar()) fail(n.Mark(), what + " must be a plain name");
    return n.Scalar();
  }
  std::vector<std::int64_t> positive_list(const YAML::Node& n, const std::string& what,
                                          std::int64_t most = kMaxDimension) const {
    if (!n.IsSequence() || n.size() == 0) fail(n.Mark(), what + " must be a non-empty list of integers");
    std::vector<std::int64_t> out;
    for (const YAML::Node& item : n) out.push_back(positive(item, what + " entry", most));
    return out;
  }
};

void check_block_size(const Reader& r, const YAML::Node& n, std::int64_t b) {
  if (b < 32 || b > 4096 || (b & (b - 1)) != 0)
    r.fail(n.Mark(), "block_size = " + std::to_string(b) + " must be a power of two from 32 to 4096");
}

}  // namespace

std::vector<UserShape> read_shapes(const std::string& path, const std::vector<FamilyTuning>& families) {
  return parse_shapes(read_bounded_file(path, kMaxYamlFileBytes, "shapes file"), path, families);
}

std::vector<UserShape> parse_shapes(const std::string& text, const std::string& path,
                                    const std::vector<FamilyTuning>& families) {
  const Reader r{path};
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    r.fail(e.mark, "malformed YAML: " + e.msg);
  }
  if (!root || !root.IsMap())
    r.fail(root ? root.Mark() : YAML::Mark(), "a shapes file must be a mapping with 'model' and/or 'shapes'");
  for (const auto& kv : root) {
    const std::string key = r.name(kv.first, "a key");
    if (key != "model" && key != "shapes")
      r.fail(kv.first.Mark(), "unknown key '" + key + "' (expected model, shapes)");
  }
  std::vector<UserShape> out;
  std::set<std::pair<std::string, Problem>> seen;
  auto add = [&](const FamilyTuning& f, Problem p, const std::string& origin) {
    if (!seen.insert({f.family->name, p}).second) return;
    out.push_back({&f, f.class_of(p), std::move(p), origin});
  };

  if (const YAML::Node model = root["model"]) {
    if (!model.IsMap()) r.fail(model.Mark(), "'model' must be a mapping");
    ModelDescription m;
    for (const auto& kv : model) {
      const std::string key = r.name(kv.first, "a model key");
      const YAML::Node& v = kv.second;
      if (key == "hidden") {
        m.hidden = r.positive(v, "model.hidden");
      } else if (key == "intermediate") {
        m.intermediate = r.positive(v, "model.intermediate");
      } else if (key == "experts") {
        m.experts = r.positive(v, "model.experts", kMaxExperts);
      } else if (key == "top_k") {
        m.top_k = r.positive(v, "model.top_k", kMaxExperts);
      } else if (key == "block_size") {
        m.block_size = r.positive(v, "model.block_size");
        check_block_size(r, v, m.block_size);
      } else if (key == "lora_ranks") {
        m.lora_ranks = r.positive_list(v, "model.lora_ranks");
      } else if (key == "tokens") {
        m.tokens = r.positive_list(v, "model.tokens", kMaxRows);
      } else {
        r.fail(kv.first.Mark(),
               "unknown model key '" + key +
                   "' (expected hidden, intermediate, experts, top_k, block_size, lora_ranks, tokens)");
      }
    }
    if (m.hidden == 0) r.fail(model.Mark(), "model needs 'hidden'");
    for (const std::int64_t t : m.tokens)
      if (m.experts > 0 && t * std::min(m.top_k, m.experts) > kMaxRows)
        r.fail(model.Mark(), "model.tokens entry " + std::to_string(t) +
                                 " routed to top_k = " + std::to_string(std::min(m.top_k, m.experts)) +
                                 " experts makes more than " + std::to_string(kMaxRows) + " rows");
    std::size_t derived = 0;
    for (const FamilyTuning& f : families) {
      if (!f.derive) continue;
      for (Problem& p : f.derive(m)) {
        add(f, std::move(p), "model");
        ++derived;
      }
    }
    if (derived == 0)
      r.fail(model.Mark(),
             "the model implies no problem: give lora_ranks (LoRA) and/or experts and intermediate (NF4)");
  }

  if (const YAML::Node shapes = root["shapes"]) {
    if (!shapes.IsSequence()) r.fail(shapes.Mark(), "'shapes' must be a list of problems");
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const YAML::Node s = shapes[i];
      const std::string origin = "shapes[" + std::to_string(i) + "]";
      if (!s.IsMap() || !s["kernel"]) r.fail(s.Mark(), origin + " must be a mapping with 'kernel'");
      const std::string kernel = r.name(s["kernel"], origin + ".kernel");
      const FamilyTuning* f = nullptr;
      for (const FamilyTuning& candidate : families)
        if (candidate.family->name == kernel) f = &candidate;
      if (f == nullptr || !f->make_for) r.fail(s["kernel"].Mark(), "no tunable kernel named '" + kernel + "'");
      Problem p;
      for (const auto& kv : s) {
        const std::string key = r.name(kv.first, origin + " key");
        if (key == "kernel") continue;
        if (std::find(f->problem_keys.begin(), f->problem_keys.end(), key) == f->problem_keys.end()) {
          std::string keys;
          for (const std::string& k : f->problem_keys) keys += (keys.empty() ? "" : ", ") + k;
          r.fail(kv.first.Mark(),
                 "kernel " + kernel + " has no problem dimension '" + key + "' (expected " + keys + ")");
        }
        p[key] = r.positive(kv.second, origin + "." + key,
                            key == "experts" || key == "top_k" ? kMaxExperts
                            : key == "rows"                    ? kMaxRows
                                                               : kMaxDimension);
        if (key == "block_size") check_block_size(r, kv.second, p[key]);
        if (key == "input_bits") {
          if (p[key] != 16 && p[key] != 32)
            r.fail(kv.second.Mark(),
                   origin + ".input_bits = " + std::to_string(p[key]) + " must be 32 (f32 input) or 16 (bf16 input)");
          if (p[key] == 32) p.erase(key);  // the default: stored as before, without it
        }
      }
      if (std::find(f->problem_keys.begin(), f->problem_keys.end(), "block_size") != f->problem_keys.end() &&
          !p.count("block_size"))
        p["block_size"] = 64;
      for (const std::string& k : f->problem_keys)
        if (!p.count(k) && k != "input_bits" && k != "top_k")
          r.fail(s.Mark(), origin + " (" + kernel + ") needs '" + k + "'");
      if (const auto top_k = p.find("top_k"); top_k != p.end()) {  // nf4: rows / top_k tokens, routed
        if (top_k->second > p.at("experts"))
          r.fail(s["top_k"].Mark(), origin + ".top_k = " + std::to_string(top_k->second) + " exceeds the experts (" +
                                        std::to_string(p.at("experts")) + ")");
        if (p.at("rows") % top_k->second != 0)
          r.fail(s["rows"].Mark(), origin + ".rows = " + std::to_string(p.at("rows")) +
                                       " must be a multiple of top_k (" + std::to_string(top_k->second) +
                                       "): rows / top_k tokens each send a row to top_k experts");
      }
      add(*f, std::move(p), origin);
    }
  }
  if (out.empty()) r.fail(root.Mark(), "the file lists no problem to tune");
  return out;
}

}  // namespace ocltk::tuner
