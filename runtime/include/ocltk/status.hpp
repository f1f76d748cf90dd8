// Errors inside the library are exceptions of one type; the public entry points turn
// them into a Status (or a Result<T>) so an engine never has to catch anything.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace ocltk {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // a shape, buffer, offset or option the caller got wrong
  kNotFound,         // no such device, file, kernel or profile entry
  kProfile,          // a profile that cannot be read or does not fit the kernels
  kBuild,            // an OpenCL program failed to build (the message holds the log)
  kDevice,           // an OpenCL call failed at run time
  kIo,               // a file could not be read or written
};

const char* to_string(ErrorCode code);

// The one exception type of the library: a code, the OpenCL status where there is one
// (0 otherwise) and one sentence naming what is at fault.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message, int cl_status = 0)
      : std::runtime_error(message), code_(code), cl_status_(cl_status) {}
  ErrorCode code() const { return code_; }
  int cl_status() const { return cl_status_; }

 private:
  ErrorCode code_;
  int cl_status_;
};

// A build failure also carries the compiler's log.
class BuildError : public Error {
 public:
  BuildError(const std::string& message, std::string log, int cl_status)
      : Error(ErrorCode::kBuild, message, cl_status), log_(std::move(log)) {}
  const std::string& log() const { return log_; }

 private:
  std::string log_;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message, int cl_status = 0)
      : code_(code), message_(std::move(message)), cl_status_(cl_status) {}
  static Status from(const Error& e) { return Status(e.code(), e.what(), e.cl_status()); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  int cl_status() const { return cl_status_; }
  // Throws the equivalent Error when not ok; for callers that prefer exceptions.
  void throw_if_error() const {
    if (!ok()) throw Error(code_, message_, cl_status_);
  }

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
  int cl_status_ = 0;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : state_(std::move(status)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(state_);
  }
  T& value() {
    if (!ok()) std::get<Status>(state_).throw_if_error();
    return std::get<T>(state_);
  }
  const T& value() const {
    if (!ok()) std::get<Status>(state_).throw_if_error();
    return std::get<T>(state_);
  }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> state_;
};

// Runs `body` and turns any exception into a Status: the library's public boundary.
template <class F>
Status guard(F&& body) {
  try {
    body();
    return Status();
  } catch (const Error& e) {
    return Status::from(e);
  } catch (const std::exception& e) {
    return Status(ErrorCode::kDevice, e.what());
  }
}

}  // namespace ocltk
