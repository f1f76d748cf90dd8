#include "ocltk/status.hpp"

namespace ocltk {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kProfile:
      return "profile error";
    case ErrorCode::kBuild:
      return "build error";
    case ErrorCode::kDevice:
      return "device error";
    case ErrorCode::kIo:
      return "i/o error";
  }
  return "unknown error";
}

}  // namespace ocltk
