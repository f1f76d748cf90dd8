// The YAML codec of one device's profile, shared by the two file kinds that hold one:
// a profile file (schema 1) and a profile database (schema 2, profile_db.cpp).
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "ocltk/profile.hpp"
#include "ocltk/status.hpp"

namespace ocltk::detail {

// Decoding by hand, so that every fault names FILE:LINE:COLUMN.
class Decoder {
 public:
  explicit Decoder(std::string name) : name_(std::move(name)) {}

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& message) const {
    throw Error(ErrorCode::kProfile,
                name_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ": " + message);
  }
  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const { fail(node.Mark(), message); }

  YAML::Node child(const YAML::Node& parent, const char* key, bool required) const {
    if (!parent.IsMap()) fail(parent, "expected a mapping");
    const YAML::Node n = parent[key];
    if (!n && required) fail(parent, std::string("missing key '") + key + "'");
    return n;
  }

  // A mapping key as text: kernel, class, parameter and problem names, each an identifier
  // ([A-Za-z_][A-Za-z0-9_]*). A key that is a sequence or mapping is a fault, and so is one
  // with other characters: a problem's names are not checked against a table, and one with
  // control bytes or invalid UTF-8 would not even survive the profile's own emit and parse.
  // Letters, digits and '_' only, and at least one.
  static bool plain_characters(const std::string& name) {
    const auto plain = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    };
    return !name.empty() && std::all_of(name.begin(), name.end(), plain);
  }

  std::string key(const YAML::Node& k) const {
    if (!k.IsScalar()) fail(k, "expected a plain name as key");
    const std::string& name = k.Scalar();
    if (!plain_characters(name) || (name[0] >= '0' && name[0] <= '9'))
      fail(k, "expected a plain name as key (letters, digits and '_')");
    return name;
  }

  template <class T>
  T scalar(const YAML::Node& parent, const char* key, bool required, T fallback = T()) const {
    const YAML::Node n = child(parent, key, required);
    if (!n) return fallback;
    if (!n.IsScalar()) fail(n, std::string("'") + key + "' must be a scalar");
    try {
      return n.as<T>();
    } catch (const YAML::Exception&) {
      fail(n, std::string("'") + key + "' has the wrong type: '" + n.Scalar() + "'");
    }
  }

  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

// The document's root mapping and its schema number; malformed YAML is a positioned fault.
YAML::Node load_document(const Decoder& d, const std::string& text, int* schema, YAML::Node* schema_node);

// `device`, `tuner` and `kernels` of one profile (the body of a schema-1 file, or one
// item of a database's `profiles` list). Does not set `path`.
Profile decode_profile_body(const Decoder& d, const YAML::Node& n);
// A `kernels` mapping: kernel -> class -> entry. `each` (may be null) sees every entry
// with its node, for readers of extra keys (a database's derived entries).
std::vector<ProfileEntry> decode_kernels(
    const Decoder& d, const YAML::Node& kernels,
    const std::function<void(const ProfileEntry&, const YAML::Node&)>& each = nullptr);

YAML::Node encode_device(const ProfileDevice& device);
YAML::Node encode_params(const Params& params);
YAML::Node encode_entry(const ProfileEntry& e);  // choice, then measurements where known
// `device`, `tuner` and `kernels`, in that order.
YAML::Node encode_profile_body(const Profile& profile);

// Temporary file in the same directory, then rename. `what` names the file kind in errors.
void write_text_atomically(const std::string& path, const std::string& text, const std::string& what);

std::string lower(std::string s);
// Six significant digits: measured times carry no more, and the file stays readable.
std::string short_number(double v);

}  // namespace ocltk::detail
