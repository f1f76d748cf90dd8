/* ocltk's C API: what engines in C, Rust, Python and other languages bind (docs/c-api.md).
 *
 * Plain C99, also includable from C++. Link libocltk.so.0 (`pkg-config --libs ocltk`, or
 * CMake's ocltk::ocltk_c). Every function that can fail returns an ocltk_status; on failure
 * ocltk_last_error() holds one sentence naming what is at fault, for the calling thread.
 * Nothing throws across this boundary and nothing aborts on bad input; an operation that
 * refuses its arguments enqueues nothing and writes nothing.
 *
 * Conventions of every operation:
 *   - matrices are row-major; offsets and leading dimensions count elements (not bytes);
 *     a leading dimension of 0 means packed (the row length);
 *   - buffers must belong to the runtime's OpenCL context;
 *   - `queue` NULL enqueues on the runtime's own queue; the wait list is waited for by the
 *     first command the operation enqueues (as in clEnqueueNDRangeKernel);
 *   - `event`, when not NULL, receives the event of the operation's last command, which the
 *     caller releases (clReleaseEvent); an operation with nothing to compute enqueues a marker
 *     behind the wait list, so that a successful call always gives an event. A failed call
 *     leaves *event NULL.
 */
#ifndef OCLTK_OCLTK_H_
#define OCLTK_OCLTK_H_

#include <stddef.h>
#include <stdint.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

/* The version of this header; ocltk_version() gives the library's. Versions of one major
 * number (0 while the API settles: of one minor number) are compatible. */
#define OCLTK_VERSION_MAJOR 0
#define OCLTK_VERSION_MINOR 1
#define OCLTK_VERSION_PATCH 0
#define OCLTK_MAKE_VERSION(major, minor, patch) ((major)*10000 + (minor)*100 + (patch))
#define OCLTK_VERSION_NUMBER OCLTK_MAKE_VERSION(OCLTK_VERSION_MAJOR, OCLTK_VERSION_MINOR, OCLTK_VERSION_PATCH)

#if defined(OCLTK_C_API_BUILD) && defined(__GNUC__)
#define OCLTK_API __attribute__((visibility("default")))
#else
#define OCLTK_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status ---------------------------------------------------------------------------- */

typedef enum ocltk_status {
  OCLTK_SUCCESS = 0,
  OCLTK_INVALID_ARGUMENT = 1, /* a shape, buffer, offset or option the caller got wrong */
  OCLTK_NOT_FOUND = 2,        /* no such device, file or profile entry */
  OCLTK_PROFILE_ERROR = 3,    /* a profile that cannot be read or does not fit the kernels */
  OCLTK_BUILD_ERROR = 4,      /* an OpenCL program failed to build */
  OCLTK_DEVICE_ERROR = 5,     /* an OpenCL call failed at run time */
  OCLTK_IO_ERROR = 6,         /* a file could not be read or written */
  OCLTK_UNSUPPORTED = 7,      /* a combination this version does not implement (an element type) */
  OCLTK_OUT_OF_HOST_MEMORY = 8
} ocltk_status;

/* The message of the most recent call on this thread that returned a status: one sentence
 * naming what is at fault, or "" after a success. Valid until this thread's next call. */
OCLTK_API const char* ocltk_last_error(void);
/* The OpenCL status behind the most recent failure on this thread (0 where none). */
OCLTK_API cl_int ocltk_last_cl_error(void);
/* "success", "invalid argument", ...: a status's name. */
OCLTK_API const char* ocltk_status_string(ocltk_status status);

/* The library's version: OCLTK_MAKE_VERSION(major, minor, patch), and as "MAJOR.MINOR.PATCH". */
OCLTK_API int ocltk_version(void);
OCLTK_API const char* ocltk_version_string(void);

/* ---- Element types --------------------------------------------------------------------- */

/* How an operand is stored. Halves are 16-bit patterns (bf16: the top half of an f32). */
typedef enum ocltk_dtype { OCLTK_F32 = 0, OCLTK_F16 = 1, OCLTK_BF16 = 2 } ocltk_dtype;
/* "f32", "f16", "bf16"; NULL for a value that is none of them. */
OCLTK_API const char* ocltk_dtype_name(ocltk_dtype dtype);
/* Bytes of one element; 0 for a value that is none of them. */
OCLTK_API size_t ocltk_dtype_size(ocltk_dtype dtype);

/* ---- Runtime ----------------------------------------------------------------------------- */

/* A device, its context and queue, the profiles that fit it and the compiled programs. One
 * runtime may be used from several threads (launches are serialised inside). */
typedef struct ocltk_runtime ocltk_runtime;

/* Opens a device. `device`: an index into the platforms' devices or a case-insensitive
 * substring of "platform / device / vendor"; NULL or "" reads OCLTK_DEVICE, else the first
 * GPU, else the first device. `profile_path`: a profile file searched before everything
 * else; NULL or "" searches OCLTK_PROFILE_PATH, the user folder and the installed configs. */
OCLTK_API ocltk_status ocltk_runtime_open(const char* device, const char* profile_path, ocltk_runtime** runtime);
/* Wraps an engine's own context, device and queue: retained (and released by
 * ocltk_runtime_release), never copied; the queue becomes the runtime's own queue. */
OCLTK_API ocltk_status ocltk_runtime_wrap(cl_context context, cl_device_id device, cl_command_queue queue,
                                          const char* profile_path, ocltk_runtime** runtime);
/* Releases the runtime and what it retained. NULL is ignored. Commands already enqueued
 * still run. */
OCLTK_API void ocltk_runtime_release(ocltk_runtime* runtime);
/* The runtime's objects, owned by it (retain them to keep them past its release). */
OCLTK_API cl_context ocltk_runtime_context(const ocltk_runtime* runtime);
OCLTK_API cl_device_id ocltk_runtime_device(const ocltk_runtime* runtime);
OCLTK_API cl_command_queue ocltk_runtime_queue(const ocltk_runtime* runtime);
/* The device's name, as OpenCL reports it; valid as long as the runtime. */
OCLTK_API const char* ocltk_runtime_device_name(const ocltk_runtime* runtime);

/* ---- gemm_nt: C = alpha * A * B^T and C += alpha * A * B^T ------------------------------- */

/* A is M x K (lda >= K), B is N x K (ldb >= K), C is M x N (ldc >= N). `dtype` is the type
 * of A and B, `c_dtype` that of C; this version implements f32 for both (others return
 * OCLTK_UNSUPPORTED before anything is checked further or enqueued). */
OCLTK_API ocltk_status ocltk_gemm_nt(ocltk_runtime* runtime, ocltk_dtype dtype, ocltk_dtype c_dtype, int64_t m,
                                     int64_t n, int64_t k, float alpha, cl_mem a, size_t a_offset, size_t lda, cl_mem b,
                                     size_t b_offset, size_t ldb, cl_mem c, size_t c_offset, size_t ldc,
                                     cl_command_queue queue, cl_uint num_events_in_wait_list,
                                     const cl_event* event_wait_list, cl_event* event);
OCLTK_API ocltk_status ocltk_gemm_nt_accum(ocltk_runtime* runtime, ocltk_dtype dtype, ocltk_dtype c_dtype, int64_t m,
                                           int64_t n, int64_t k, float alpha, cl_mem a, size_t a_offset, size_t lda,
                                           cl_mem b, size_t b_offset, size_t ldb, cl_mem c, size_t c_offset, size_t ldc,
                                           cl_command_queue queue, cl_uint num_events_in_wait_list,
                                           const cl_event* event_wait_list, cl_event* event);

/* ---- NF4 expert weights (docs/nf4.md) ---------------------------------------------------- */

/* A window of a packed NF4 payload in bitsandbytes' layout: logical W[E, N, K] flattened
 * c = (e*N + n)*K + k, two codes per byte (coefficient 2j in bits 7..4), one f32 absmax per
 * flat block of block_size coefficients; the window starts element_offset coefficients into
 * its first stored block. */
typedef struct ocltk_nf4_weights {
  int64_t experts, out_features /* N */, in_features /* K */, block_size, element_offset;
  cl_mem packed;        /* u8 */
  size_t packed_offset; /* bytes */
  cl_mem scales;        /* f32 */
  size_t scales_offset; /* elements */
  cl_mem codebook;      /* 16 f32, always required (ocltk_nf4_codebook gives NF4's) */
} ocltk_nf4_weights;

/* Rows are grouped by expert: offsets (u32, experts + 1 entries, 0 .. rows, never decreasing)
 * give expert e the rows offsets[e] .. offsets[e+1]-1. Activations are packed rows from the
 * buffer's start. `validate_offsets` non-zero reads the offsets back (a small blocking read
 * on the runtime's queue) and refuses bad ones; zero skips that (bad offsets then give wrong
 * rows, never an out-of-bounds access). `active_experts` (experts with rows) and
 * `max_expert_rows` (the longest segment) steer the profile's choice where the offsets are
 * not read back; -1 where unknown (nf4.hpp, Nf4ForwardArgs).
 *
 * Forward: y[r, n] = sum_k x[r, k] * W[e, n, k]; x rows x K and y rows x N, both `dtype`. */
OCLTK_API ocltk_status ocltk_nf4_forward(ocltk_runtime* runtime, const ocltk_nf4_weights* weights, ocltk_dtype dtype,
                                         int64_t rows, cl_mem input, cl_mem offsets, cl_mem output,
                                         int validate_offsets, int64_t active_experts, int64_t max_expert_rows,
                                         cl_command_queue queue, cl_uint num_events_in_wait_list,
                                         const cl_event* event_wait_list, cl_event* event);
/* Input gradient: dx[r, k] = sum_n g[r, n] * W[e, n, k]; g rows x N of `dtype`, dx rows x K f32. */
OCLTK_API ocltk_status ocltk_nf4_backward(ocltk_runtime* runtime, const ocltk_nf4_weights* weights, ocltk_dtype dtype,
                                          int64_t rows, cl_mem grad, cl_mem offsets, cl_mem grad_input,
                                          int validate_offsets, int64_t active_experts, int64_t max_expert_rows,
                                          cl_command_queue queue, cl_uint num_events_in_wait_list,
                                          const cl_event* event_wait_list, cl_event* event);

/* Routing on the device, from top-k choices (expert_ids u32, tokens x top_k): writes
 * offsets (u32, experts + 1), pair_row (u32, tokens x top_k: each pair's grouped row, or
 * 0xFFFFFFFF for an expert id >= experts, dropped), row_token (u32, tokens x top_k: the token
 * of each grouped row) and gathered (tokens*top_k x features of `dtype`: input rows in grouped
 * order). Within an expert rows keep token order. */
OCLTK_API ocltk_status ocltk_nf4_route(ocltk_runtime* runtime, int64_t tokens, int64_t top_k, int64_t experts,
                                       int64_t features, ocltk_dtype dtype, cl_mem expert_ids, cl_mem input,
                                       cl_mem offsets, cl_mem pair_row, cl_mem row_token, cl_mem gathered,
                                       cl_command_queue queue, cl_uint num_events_in_wait_list,
                                       const cl_event* event_wait_list, cl_event* event);
/* The way back: output[t, n] = sum_s weights[t, s] * y[pair_row[t, s], n] (dropped pairs add
 * nothing), accumulated in f32, written in `dtype`. y has y_rows x features elements. */
OCLTK_API ocltk_status ocltk_nf4_scatter(ocltk_runtime* runtime, int64_t tokens, int64_t top_k, int64_t features,
                                         ocltk_dtype dtype, cl_mem y, int64_t y_rows, cl_mem pair_row, cl_mem weights,
                                         cl_mem output, cl_command_queue queue, cl_uint num_events_in_wait_list,
                                         const cl_event* event_wait_list, cl_event* event);

/* ---- NF4 on the host --------------------------------------------------------------------- */

/* NF4's 16 levels (bitsandbytes' table), into codebook[16]. */
OCLTK_API void ocltk_nf4_codebook(float* codebook);
/* Quantizes `count` coefficients in flat order (dtype f32, f16 or bf16 bits), bit-identical
 * to bitsandbytes' quantize_4bit(quant_type="nf4"): packed needs (count + 1) / 2 bytes and
 * scales ceil(count / block_size) floats; `packed_bytes` and `scale_count` say what the
 * caller has (more is fine; less is refused). block_size: a power of two, 32 .. 4096. */
OCLTK_API ocltk_status ocltk_nf4_quantize(const void* weights, ocltk_dtype dtype, size_t count, int64_t block_size,
                                          uint8_t* packed, size_t packed_bytes, float* scales, size_t scale_count);
/* Dequantizes window coefficients 0 .. count-1 (stream positions element_offset + j) into
 * f32 `out`. `packed_bytes` and `scale_count` say what the arrays hold (checked); codebook
 * NULL is NF4's. */
OCLTK_API ocltk_status ocltk_nf4_dequantize(const uint8_t* packed, size_t packed_bytes, const float* scales,
                                            size_t scale_count, const float* codebook, int64_t element_offset,
                                            int64_t block_size, size_t count, float* out);

/* ---- Which profile entry serves a launch ------------------------------------------------- */

/* What a launch would run: the algorithm and parameters and where they come from. An opaque
 * handle; its strings live as long as it. */
typedef struct ocltk_choice ocltk_choice;

/* The choice that would serve ocltk_gemm_nt / ocltk_gemm_nt_accum of this problem. */
OCLTK_API ocltk_status ocltk_choose_gemm_nt(ocltk_runtime* runtime, ocltk_dtype dtype, ocltk_dtype c_dtype, int64_t m,
                                            int64_t n, int64_t k, ocltk_choice** choice);
/* The choice that would serve ocltk_nf4_forward (backward non-zero: ocltk_nf4_backward) of
 * `rows` rows over these weights (only their geometry is read) with the given counts (-1:
 * unknown, taken as a launch without a read-back takes them). */
OCLTK_API ocltk_status ocltk_choose_nf4(ocltk_runtime* runtime, int backward, const ocltk_nf4_weights* weights,
                                        ocltk_dtype dtype, int64_t rows, int64_t active_experts,
                                        int64_t max_expert_rows, ocltk_choice** choice);
/* The choice behind the runtime's most recent launch (kernel "" before any). */
OCLTK_API ocltk_status ocltk_last_choice(ocltk_runtime* runtime, ocltk_choice** choice);
OCLTK_API void ocltk_choice_release(ocltk_choice* choice);

/* "gemm_nt", "nf4_forward", ... */
OCLTK_API const char* ocltk_choice_kernel(const ocltk_choice* choice);
/* The shape class ("gemv", "lora_shrink", "decode", ...). */
OCLTK_API const char* ocltk_choice_shape_class(const ocltk_choice* choice);
OCLTK_API const char* ocltk_choice_algorithm(const ocltk_choice* choice);
/* The profile file, or "built-in". */
OCLTK_API const char* ocltk_choice_source(const ocltk_choice* choice);
/* How the profile matched the device: "device+driver", "device", "architecture", "vendor",
 * or "none" for built-in defaults. */
OCLTK_API const char* ocltk_choice_match(const ocltk_choice* choice);
/* The parameters, in name order. */
OCLTK_API size_t ocltk_choice_param_count(const ocltk_choice* choice);
OCLTK_API const char* ocltk_choice_param_name(const ocltk_choice* choice, size_t index);
OCLTK_API int ocltk_choice_param_value(const ocltk_choice* choice, size_t index);
/* One line naming all of the above, as OCLTK_VERBOSE=1 logs it. */
OCLTK_API const char* ocltk_choice_describe(const ocltk_choice* choice);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OCLTK_OCLTK_H_ */
