// The C API (ocltk.h) over the C++ runtime: argument checks the C++ types cannot make (null
// handles, element types, queues and wait lists), then the C++ call, whose Status becomes the
// thread's last error. Every entry point catches everything: nothing throws into C.
#define OCLTK_C_API_BUILD
#include <array>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "ocltk/ocltk.h"
#include "ocltk/ocltk.hpp"

struct ocltk_runtime {
  ocltk::Runtime rt;
};

struct ocltk_choice {
  ocltk::Choice choice;
  std::string describe;
  std::vector<std::string> names;
  std::vector<int> values;
};

namespace {

using ocltk::ErrorCode;

thread_local std::string t_message;
thread_local cl_int t_cl_status = 0;

ocltk_status status_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return OCLTK_SUCCESS;
    case ErrorCode::kInvalidArgument:
      return OCLTK_INVALID_ARGUMENT;
    case ErrorCode::kNotFound:
      return OCLTK_NOT_FOUND;
    case ErrorCode::kProfile:
      return OCLTK_PROFILE_ERROR;
    case ErrorCode::kBuild:
      return OCLTK_BUILD_ERROR;
    case ErrorCode::kDevice:
      return OCLTK_DEVICE_ERROR;
    case ErrorCode::kIo:
      return OCLTK_IO_ERROR;
  }
  return OCLTK_DEVICE_ERROR;
}

ocltk_status fail(ocltk_status status, const char* message, cl_int cl_status = 0) noexcept {
  try {
    t_message = message;
  } catch (...) {
    t_message.clear();  // no room for the message; the status still says what happened
  }
  t_cl_status = cl_status;
  return status;
}

ocltk_status fail(ocltk_status status, const std::string& message, cl_int cl_status = 0) noexcept {
  return fail(status, message.c_str(), cl_status);
}

ocltk_status succeed() noexcept {
  t_message.clear();
  t_cl_status = 0;
  return OCLTK_SUCCESS;
}

ocltk_status from(const ocltk::Status& s) noexcept {
  return s.ok() ? succeed() : fail(status_of(s.code()), s.message(), s.cl_status());
}

// The boundary: `body` returns a status; any exception becomes one.
template <class F>
ocltk_status boundary(F&& body) noexcept {
  try {
    return body();
  } catch (const ocltk::Error& e) {
    return fail(status_of(e.code()), e.what(), e.cl_status());
  } catch (const boost::compute::opencl_error& e) {
    return fail(OCLTK_DEVICE_ERROR, std::string("OpenCL failure: ") + e.what(), e.error_code());
  } catch (const std::bad_alloc&) {
    return fail(OCLTK_OUT_OF_HOST_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return fail(OCLTK_DEVICE_ERROR, std::string("OpenCL failure: ") + e.what());
  } catch (...) {
    return fail(OCLTK_DEVICE_ERROR, "an unknown failure inside ocltk");
  }
}

ocltk::Error invalid(const std::string& message) { return ocltk::Error(ErrorCode::kInvalidArgument, message); }

bool dtype_known(ocltk_dtype t) { return t == OCLTK_F32 || t == OCLTK_F16 || t == OCLTK_BF16; }

ocltk::ElementType element_type(const char* who, const char* what, ocltk_dtype t) {
  if (!dtype_known(t))
    throw invalid(std::string(who) + ": " + what + " = " + std::to_string(int(t)) +
                  " is not an ocltk_dtype (OCLTK_F32, OCLTK_F16 or OCLTK_BF16)");
  return ocltk::ElementType(int(t));
}

void need_runtime(const char* who, const ocltk_runtime* runtime) {
  if (runtime == nullptr) throw invalid(std::string(who) + ": runtime is NULL");
}

// The launch options of an operation: the queue (checked against the runtime's context and
// device, since programs are built for them), the wait list (as OpenCL checks it) and the
// out-event, cleared first so that a failed call leaves NULL there.
ocltk::Launch launch_of(const char* who, ocltk_runtime* runtime, cl_command_queue queue, cl_uint num_events,
                        const cl_event* events, cl_event* event) {
  if (event) *event = nullptr;
  const std::string w = who;
  if (num_events > 0 && events == nullptr)
    throw invalid(w + ": event_wait_list is NULL but num_events_in_wait_list is " + std::to_string(num_events));
  if (num_events == 0 && events != nullptr)
    throw invalid(w + ": event_wait_list is given but num_events_in_wait_list is 0");
  ocltk::Launch launch;
  cl_context context = runtime->rt.context().get();
  if (queue != nullptr && queue != runtime->rt.queue().get()) {
    cl_context queue_context = nullptr;
    cl_device_id queue_device = nullptr;
    if (clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof queue_context, &queue_context, nullptr) != CL_SUCCESS ||
        clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof queue_device, &queue_device, nullptr) != CL_SUCCESS)
      throw invalid(w + ": queue is not a valid OpenCL command queue");
    if (queue_context != context) throw invalid(w + ": queue belongs to another OpenCL context than the runtime's");
    if (queue_device != runtime->rt.device().handle.id())
      throw invalid(w + ": queue is on another device than the runtime's");
  }
  launch.queue = queue;
  launch.wait_for.reserve(num_events);
  for (cl_uint i = 0; i < num_events; ++i) {
    cl_context event_context = nullptr;
    if (events[i] == nullptr) throw invalid(w + ": event_wait_list[" + std::to_string(i) + "] is NULL");
    if (clGetEventInfo(events[i], CL_EVENT_CONTEXT, sizeof event_context, &event_context, nullptr) != CL_SUCCESS)
      throw invalid(w + ": event_wait_list[" + std::to_string(i) + "] is not a valid OpenCL event");
    if (event_context != context)
      throw invalid(w + ": event_wait_list[" + std::to_string(i) + "] belongs to another OpenCL context");
    launch.wait_for.push_back(events[i]);
  }
  launch.event = event;
  return launch;
}

// Where an operation asked for an event and enqueued no command, a marker behind the wait list
// gives one, so that every successful call with `event` set returns an event.
void give_event(ocltk_runtime* runtime, const ocltk::Launch& launch) {
  if (launch.event == nullptr || *launch.event != nullptr) return;
  cl_command_queue queue = launch.queue ? launch.queue : runtime->rt.queue().get();
  const cl_int status = clEnqueueMarkerWithWaitList(
      queue, cl_uint(launch.wait_for.size()), launch.wait_for.empty() ? nullptr : launch.wait_for.data(), launch.event);
  if (status != CL_SUCCESS)
    throw ocltk::Error(ErrorCode::kDevice,
                       "clEnqueueMarkerWithWaitList failed with OpenCL status " + std::to_string(status), status);
}

ocltk_status gemm(const char* who, bool accumulate, ocltk_runtime* runtime, ocltk_dtype dtype, ocltk_dtype c_dtype,
                  int64_t m, int64_t n, int64_t k, float alpha, cl_mem a, size_t a_offset, size_t lda, cl_mem b,
                  size_t b_offset, size_t ldb, cl_mem c, size_t c_offset, size_t ldc, cl_command_queue queue,
                  cl_uint num_events, const cl_event* events, cl_event* event) noexcept {
  return boundary([&] {
    if (event) *event = nullptr;
    need_runtime(who, runtime);
    element_type(who, "dtype", dtype);
    element_type(who, "c_dtype", c_dtype);
    if (dtype != OCLTK_F32 || c_dtype != OCLTK_F32)
      return fail(OCLTK_UNSUPPORTED, std::string(who) + ": A and B of type " + ocltk_dtype_name(dtype) +
                                         " with C of type " + ocltk_dtype_name(c_dtype) +
                                         " is not implemented (this version takes f32 for all three)");
    const ocltk::Launch launch = launch_of(who, runtime, queue, num_events, events, event);
    ocltk::GemmNtArgs args;
    args.problem = {m, n, k};
    args.alpha = alpha;
    args.a = {a, a_offset, lda};
    args.b = {b, b_offset, ldb};
    args.c = {c, c_offset, ldc};
    return from(accumulate ? runtime->rt.gemm_nt_accum(args, launch) : runtime->rt.gemm_nt(args, launch));
  });
}

ocltk::Nf4Weights weights_of(const char* who, const ocltk_nf4_weights* w) {
  if (w == nullptr) throw invalid(std::string(who) + ": weights is NULL");
  ocltk::Nf4Weights out;
  out.geometry = {w->experts, w->out_features, w->in_features, w->block_size, w->element_offset};
  out.packed = w->packed;
  out.packed_offset = w->packed_offset;
  out.scales = w->scales;
  out.scales_offset = w->scales_offset;
  out.codebook = w->codebook;
  return out;
}

ocltk_status hand_out(ocltk::Choice choice, ocltk_choice** out) {
  auto* c = new ocltk_choice;
  c->choice = std::move(choice);
  c->describe = c->choice.describe();
  for (const auto& [name, value] : c->choice.params) {
    c->names.push_back(name);
    c->values.push_back(value);
  }
  *out = c;
  return succeed();
}

void need_choice_out(const char* who, ocltk_choice** choice) {
  if (choice == nullptr) throw invalid(std::string(who) + ": choice (the result) is NULL");
  *choice = nullptr;
}

}  // namespace

extern "C" {

const char* ocltk_last_error(void) { return t_message.c_str(); }
cl_int ocltk_last_cl_error(void) { return t_cl_status; }

const char* ocltk_status_string(ocltk_status status) {
  switch (status) {
    case OCLTK_SUCCESS:
      return "success";
    case OCLTK_INVALID_ARGUMENT:
      return "invalid argument";
    case OCLTK_NOT_FOUND:
      return "not found";
    case OCLTK_PROFILE_ERROR:
      return "profile error";
    case OCLTK_BUILD_ERROR:
      return "build error";
    case OCLTK_DEVICE_ERROR:
      return "device error";
    case OCLTK_IO_ERROR:
      return "I/O error";
    case OCLTK_UNSUPPORTED:
      return "unsupported";
    case OCLTK_OUT_OF_HOST_MEMORY:
      return "out of host memory";
  }
  return "unknown status";
}

int ocltk_version(void) { return OCLTK_VERSION_NUMBER; }
const char* ocltk_version_string(void) { return ocltk::version(); }

const char* ocltk_dtype_name(ocltk_dtype dtype) {
  return dtype_known(dtype) ? ocltk::to_string(ocltk::ElementType(int(dtype))) : nullptr;
}
size_t ocltk_dtype_size(ocltk_dtype dtype) {
  return dtype_known(dtype) ? ocltk::element_size(ocltk::ElementType(int(dtype))) : 0;
}

ocltk_status ocltk_runtime_open(const char* device, const char* profile_path, ocltk_runtime** runtime) {
  return boundary([&] {
    if (runtime == nullptr) throw invalid("ocltk_runtime_open: runtime (the result) is NULL");
    *runtime = nullptr;
    ocltk::RuntimeOptions options;
    options.device = device ? device : "";
    options.profile_path = profile_path ? profile_path : "";
    ocltk::Result<ocltk::Runtime> opened = ocltk::Runtime::open(options);
    if (!opened) return from(opened.status());
    *runtime = new ocltk_runtime{std::move(opened.value())};
    return succeed();
  });
}

ocltk_status ocltk_runtime_wrap(cl_context context, cl_device_id device, cl_command_queue queue,
                                const char* profile_path, ocltk_runtime** runtime) {
  return boundary([&] {
    const std::string who = "ocltk_runtime_wrap";
    if (runtime == nullptr) throw invalid(who + ": runtime (the result) is NULL");
    *runtime = nullptr;
    if (context == nullptr) throw invalid(who + ": context is NULL");
    if (device == nullptr) throw invalid(who + ": device is NULL");
    if (queue == nullptr) throw invalid(who + ": queue is NULL");
    // Boost.Compute would retain invalid handles blindly; ask OpenCL first.
    cl_context queue_context = nullptr;
    cl_device_id queue_device = nullptr;
    cl_uint devices = 0;
    if (clGetContextInfo(context, CL_CONTEXT_NUM_DEVICES, sizeof devices, &devices, nullptr) != CL_SUCCESS)
      throw invalid(who + ": context is not a valid OpenCL context");
    cl_device_type type = 0;
    if (clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, nullptr) != CL_SUCCESS)
      throw invalid(who + ": device is not a valid OpenCL device");
    if (clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof queue_context, &queue_context, nullptr) != CL_SUCCESS ||
        clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof queue_device, &queue_device, nullptr) != CL_SUCCESS)
      throw invalid(who + ": queue is not a valid OpenCL command queue");
    if (queue_context != context) throw invalid(who + ": queue belongs to another context than the one given");
    if (queue_device != device) throw invalid(who + ": queue is on another device than the one given");
    ocltk::RuntimeOptions options;
    options.profile_path = profile_path ? profile_path : "";
    ocltk::Result<ocltk::Runtime> wrapped = ocltk::Runtime::wrap(context, device, queue, options);
    if (!wrapped) return from(wrapped.status());
    *runtime = new ocltk_runtime{std::move(wrapped.value())};
    return succeed();
  });
}

void ocltk_runtime_release(ocltk_runtime* runtime) {
  try {
    delete runtime;
  } catch (...) {  // destructors do not throw; this keeps C callers safe if one ever did
  }
}

cl_context ocltk_runtime_context(const ocltk_runtime* runtime) {
  return runtime ? runtime->rt.context().get() : nullptr;
}
cl_device_id ocltk_runtime_device(const ocltk_runtime* runtime) {
  return runtime ? runtime->rt.device().handle.id() : nullptr;
}
cl_command_queue ocltk_runtime_queue(const ocltk_runtime* runtime) {
  return runtime ? const_cast<ocltk_runtime*>(runtime)->rt.queue().get() : nullptr;
}
const char* ocltk_runtime_device_name(const ocltk_runtime* runtime) {
  return runtime ? runtime->rt.device().name.c_str() : "";
}

ocltk_status ocltk_gemm_nt(ocltk_runtime* runtime, ocltk_dtype dtype, ocltk_dtype c_dtype, int64_t m, int64_t n,
                           int64_t k, float alpha, cl_mem a, size_t a_offset, size_t lda, cl_mem b, size_t b_offset,
                           size_t ldb, cl_mem c, size_t c_offset, size_t ldc, cl_command_queue queue,
                           cl_uint num_events_in_wait_list, const cl_event* event_wait_list, cl_event* event) {
  return gemm("ocltk_gemm_nt", false, runtime, dtype, c_dtype, m, n, k, alpha, a, a_offset, lda, b, b_offset, ldb, c,
              c_offset, ldc, queue, num_events_in_wait_list, event_wait_list, event);
}

ocltk_status ocltk_gemm_nt_accum(ocltk_runtime* runtime, ocltk_dtype dtype, ocltk_dtype c_dtype, int64_t m, int64_t n,
                                 int64_t k, float alpha, cl_mem a, size_t a_offset, size_t lda, cl_mem b,
                                 size_t b_offset, size_t ldb, cl_mem c, size_t c_offset, size_t ldc,
                                 cl_command_queue queue, cl_uint num_events_in_wait_list,
                                 const cl_event* event_wait_list, cl_event* event) {
  return gemm("ocltk_gemm_nt_accum", true, runtime, dtype, c_dtype, m, n, k, alpha, a, a_offset, lda, b, b_offset, ldb,
              c, c_offset, ldc, queue, num_events_in_wait_list, event_wait_list, event);
}

ocltk_status ocltk_nf4_forward(ocltk_runtime* runtime, const ocltk_nf4_weights* weights, ocltk_dtype dtype,
                               int64_t rows, cl_mem input, cl_mem offsets, cl_mem output, int validate_offsets,
                               int64_t active_experts, int64_t max_expert_rows, cl_command_queue queue,
                               cl_uint num_events_in_wait_list, const cl_event* event_wait_list, cl_event* event) {
  return boundary([&] {
    const char* who = "ocltk_nf4_forward";
    if (event) *event = nullptr;
    need_runtime(who, runtime);
    ocltk::Nf4ForwardArgs args;
    args.w = weights_of(who, weights);
    args.type = element_type(who, "dtype", dtype);
    args.rows = rows;
    args.input = input;
    args.offsets = offsets;
    args.output = output;
    args.validate_offsets = validate_offsets != 0;
    args.active_experts = active_experts;
    args.max_expert_rows = max_expert_rows;
    const ocltk::Launch launch = launch_of(who, runtime, queue, num_events_in_wait_list, event_wait_list, event);
    return from(ocltk::nf4_forward_segmented(runtime->rt, args, launch));
  });
}

ocltk_status ocltk_nf4_backward(ocltk_runtime* runtime, const ocltk_nf4_weights* weights, ocltk_dtype dtype,
                                int64_t rows, cl_mem grad, cl_mem offsets, cl_mem grad_input, int validate_offsets,
                                int64_t active_experts, int64_t max_expert_rows, cl_command_queue queue,
                                cl_uint num_events_in_wait_list, const cl_event* event_wait_list, cl_event* event) {
  return boundary([&] {
    const char* who = "ocltk_nf4_backward";
    if (event) *event = nullptr;
    need_runtime(who, runtime);
    ocltk::Nf4BackwardArgs args;
    args.w = weights_of(who, weights);
    args.type = element_type(who, "dtype", dtype);
    args.rows = rows;
    args.grad = grad;
    args.offsets = offsets;
    args.grad_input = grad_input;
    args.validate_offsets = validate_offsets != 0;
    args.active_experts = active_experts;
    args.max_expert_rows = max_expert_rows;
    const ocltk::Launch launch = launch_of(who, runtime, queue, num_events_in_wait_list, event_wait_list, event);
    return from(ocltk::nf4_input_backward_segmented(runtime->rt, args, launch));
  });
}

ocltk_status ocltk_nf4_route(ocltk_runtime* runtime, int64_t tokens, int64_t top_k, int64_t experts, int64_t features,
                             ocltk_dtype dtype, cl_mem expert_ids, cl_mem input, cl_mem offsets, cl_mem pair_row,
                             cl_mem row_token, cl_mem gathered, cl_command_queue queue, cl_uint num_events_in_wait_list,
                             const cl_event* event_wait_list, cl_event* event) {
  return boundary([&] {
    const char* who = "ocltk_nf4_route";
    if (event) *event = nullptr;
    need_runtime(who, runtime);
    ocltk::RouteArgs args;
    args.tokens = tokens;
    args.top_k = top_k;
    args.experts = experts;
    args.features = features;
    args.type = element_type(who, "dtype", dtype);
    args.expert_ids = expert_ids;
    args.input = input;
    args.offsets = offsets;
    args.pair_row = pair_row;
    args.row_token = row_token;
    args.gathered = gathered;
    const ocltk::Launch launch = launch_of(who, runtime, queue, num_events_in_wait_list, event_wait_list, event);
    const ocltk::Status s = ocltk::route_tokens(runtime->rt, args, launch);
    if (s.ok()) give_event(runtime, launch);
    return from(s);
  });
}

ocltk_status ocltk_nf4_scatter(ocltk_runtime* runtime, int64_t tokens, int64_t top_k, int64_t features,
                               ocltk_dtype dtype, cl_mem y, int64_t y_rows, cl_mem pair_row, cl_mem weights,
                               cl_mem output, cl_command_queue queue, cl_uint num_events_in_wait_list,
                               const cl_event* event_wait_list, cl_event* event) {
  return boundary([&] {
    const char* who = "ocltk_nf4_scatter";
    if (event) *event = nullptr;
    need_runtime(who, runtime);
    ocltk::ScatterArgs args;
    args.tokens = tokens;
    args.top_k = top_k;
    args.features = features;
    args.type = element_type(who, "dtype", dtype);
    args.y = y;
    args.y_rows = y_rows;
    args.pair_row = pair_row;
    args.weights = weights;
    args.output = output;
    const ocltk::Launch launch = launch_of(who, runtime, queue, num_events_in_wait_list, event_wait_list, event);
    const ocltk::Status s = ocltk::scatter_rows(runtime->rt, args, launch);
    if (s.ok()) give_event(runtime, launch);
    return from(s);
  });
}

void ocltk_nf4_codebook(float* codebook) {
  if (codebook) std::memcpy(codebook, ocltk::kNf4Codebook.data(), sizeof(float) * 16);
}

ocltk_status ocltk_nf4_quantize(const void* weights, ocltk_dtype dtype, size_t count, int64_t block_size,
                                uint8_t* packed, size_t packed_bytes, float* scales, size_t scale_count) {
  return boundary([&] {
    const std::string who = "ocltk_nf4_quantize";
    const ocltk::ElementType type = element_type(who.c_str(), "dtype", dtype);
    if (!ocltk::nf4_block_size_valid(block_size))
      throw invalid(who + ": block_size " + std::to_string(block_size) + " is not a power of two from 32 to 4096");
    if (count == 0) throw invalid(who + ": count is 0; there is nothing to quantize");
    if (weights == nullptr) throw invalid(who + ": weights is NULL");
    if (packed == nullptr) throw invalid(who + ": packed is NULL");
    if (scales == nullptr) throw invalid(who + ": scales is NULL");
    const std::size_t need_packed = (count + 1) / 2;
    const std::size_t need_scales = (count + std::size_t(block_size) - 1) / std::size_t(block_size);
    if (packed_bytes < need_packed)
      throw invalid(who + ": packed holds " + std::to_string(packed_bytes) + " bytes but " + std::to_string(count) +
                    " coefficients need " + std::to_string(need_packed));
    if (scale_count < need_scales)
      throw invalid(who + ": scales holds " + std::to_string(scale_count) + " floats but " + std::to_string(count) +
                    " coefficients in blocks of " + std::to_string(block_size) + " need " +
                    std::to_string(need_scales));
    const ocltk::Nf4Packed q =
        type == ocltk::ElementType::f32
            ? ocltk::quantize_nf4(static_cast<const float*>(weights), count, block_size)
            : ocltk::quantize_nf4(static_cast<const std::uint16_t*>(weights), type, count, block_size);
    std::memcpy(packed, q.packed.data(), q.packed.size());
    std::memcpy(scales, q.scales.data(), q.scales.size() * sizeof(float));
    return succeed();
  });
}

ocltk_status ocltk_nf4_dequantize(const uint8_t* packed, size_t packed_bytes, const float* scales, size_t scale_count,
                                  const float* codebook, int64_t element_offset, int64_t block_size, size_t count,
                                  float* out) {
  return boundary([&] {
    const std::string who = "ocltk_nf4_dequantize";
    if (!ocltk::nf4_block_size_valid(block_size))
      throw invalid(who + ": block_size " + std::to_string(block_size) + " is not a power of two from 32 to 4096");
    if (element_offset < 0 || element_offset >= block_size)
      throw invalid(who + ": element_offset " + std::to_string(element_offset) +
                    " is not in [0, block_size = " + std::to_string(block_size) + ")");
    if (count == 0) return succeed();
    if (packed == nullptr) throw invalid(who + ": packed is NULL");
    if (scales == nullptr) throw invalid(who + ": scales is NULL");
    if (out == nullptr) throw invalid(who + ": out is NULL");
    const std::size_t end = std::size_t(element_offset) + count;  // stream positions [offset, end)
    const std::size_t need_packed = (end + 1) / 2;
    const std::size_t need_scales = (end + std::size_t(block_size) - 1) / std::size_t(block_size);
    if (packed_bytes < need_packed)
      throw invalid(who + ": packed holds " + std::to_string(packed_bytes) + " bytes but " + std::to_string(count) +
                    " coefficients from element offset " + std::to_string(element_offset) + " need " +
                    std::to_string(need_packed));
    if (scale_count < need_scales)
      throw invalid(who + ": scales holds " + std::to_string(scale_count) + " floats but " + std::to_string(count) +
                    " coefficients from element offset " + std::to_string(element_offset) + " in blocks of " +
                    std::to_string(block_size) + " need " + std::to_string(need_scales));
    std::array<float, 16> table = ocltk::kNf4Codebook;
    if (codebook) std::memcpy(table.data(), codebook, sizeof(float) * 16);
    ocltk::dequantize_nf4(packed, scales, table, element_offset, block_size, count, out);
    return succeed();
  });
}

ocltk_status ocltk_choose_gemm_nt(ocltk_runtime* runtime, ocltk_dtype dtype, ocltk_dtype c_dtype, int64_t m, int64_t n,
                                  int64_t k, ocltk_choice** choice) {
  return boundary([&] {
    const char* who = "ocltk_choose_gemm_nt";
    need_choice_out(who, choice);
    need_runtime(who, runtime);
    element_type(who, "dtype", dtype);
    element_type(who, "c_dtype", c_dtype);
    if (dtype != OCLTK_F32 || c_dtype != OCLTK_F32)
      return fail(OCLTK_UNSUPPORTED, std::string(who) + ": A and B of type " + ocltk_dtype_name(dtype) +
                                         " with C of type " + ocltk_dtype_name(c_dtype) +
                                         " is not implemented (this version takes f32 for all three)");
    if (m < 1 || n < 1 || k < 1)
      throw invalid(std::string(who) + ": M, N and K must be at least 1, got " + std::to_string(m) + ", " +
                    std::to_string(n) + ", " + std::to_string(k));
    return hand_out(runtime->rt.choose_gemm_nt({m, n, k}), choice);
  });
}

ocltk_status ocltk_choose_nf4(ocltk_runtime* runtime, int backward, const ocltk_nf4_weights* weights, ocltk_dtype dtype,
                              int64_t rows, int64_t active_experts, int64_t max_expert_rows, ocltk_choice** choice) {
  return boundary([&] {
    const char* who = "ocltk_choose_nf4";
    need_choice_out(who, choice);
    need_runtime(who, runtime);
    const ocltk::Nf4Weights w = weights_of(who, weights);
    const ocltk::ElementType type = element_type(who, "dtype", dtype);
    ocltk::Result<ocltk::Choice> c = ocltk::choose_nf4(runtime->rt, backward ? "nf4_backward" : "nf4_forward",
                                                       w.geometry, rows, type, active_experts, max_expert_rows);
    if (!c) return from(c.status());
    return hand_out(std::move(c.value()), choice);
  });
}

ocltk_status ocltk_last_choice(ocltk_runtime* runtime, ocltk_choice** choice) {
  return boundary([&] {
    need_choice_out("ocltk_last_choice", choice);
    need_runtime("ocltk_last_choice", runtime);
    return hand_out(runtime->rt.last_choice(), choice);
  });
}

void ocltk_choice_release(ocltk_choice* choice) { delete choice; }

const char* ocltk_choice_kernel(const ocltk_choice* c) { return c ? c->choice.kernel.c_str() : ""; }
const char* ocltk_choice_shape_class(const ocltk_choice* c) { return c ? c->choice.shape_class.c_str() : ""; }
const char* ocltk_choice_algorithm(const ocltk_choice* c) { return c ? c->choice.algorithm.c_str() : ""; }
const char* ocltk_choice_source(const ocltk_choice* c) { return c ? c->choice.source.c_str() : ""; }
const char* ocltk_choice_match(const ocltk_choice* c) { return c ? ocltk::to_string(c->choice.level) : ""; }
size_t ocltk_choice_param_count(const ocltk_choice* c) { return c ? c->names.size() : 0; }
const char* ocltk_choice_param_name(const ocltk_choice* c, size_t i) {
  return c && i < c->names.size() ? c->names[i].c_str() : nullptr;
}
int ocltk_choice_param_value(const ocltk_choice* c, size_t i) { return c && i < c->values.size() ? c->values[i] : 0; }
const char* ocltk_choice_describe(const ocltk_choice* c) { return c ? c->describe.c_str() : ""; }

}  // extern "C"
