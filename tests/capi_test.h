/* What the C API's test files share (test_capi.c defines it): the check macros and counters,
 * random values exact in every element type, element conversions, buffers. C99. */
#ifndef OCLTK_TESTS_CAPI_TEST_H_
#define OCLTK_TESTS_CAPI_TEST_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocltk/ocltk.h"

extern int g_checks, g_failures;
void check_at(int ok, const char* file, int line, const char* what, const char* fmt, ...);
#define CHECK(cond, ...) check_at((cond) != 0, __FILE__, __LINE__, #cond, __VA_ARGS__)

/* A call must return `want` and leave a message holding `part` (or "" on success). */
#define EXPECT_STATUS(call, want, part)                                                                         \
  do {                                                                                                          \
    const ocltk_status got_ = (call);                                                                           \
    CHECK(got_ == (want), "%s returned %s, expected %s (message: %s)", #call, ocltk_status_string(got_),        \
          ocltk_status_string(want), ocltk_last_error());                                                       \
    CHECK(strstr(ocltk_last_error(), (part)) != NULL, "%s: message '%s' lacks '%s'", #call, ocltk_last_error(), \
          (part));                                                                                              \
    if ((want) == OCLTK_SUCCESS)                                                                                \
      CHECK(ocltk_last_error()[0] == '\0', "message after success: %s", ocltk_last_error());                    \
  } while (0)

#define CL_OK(call)                                                                 \
  do {                                                                              \
    const cl_int e_ = (call);                                                       \
    if (e_ != CL_SUCCESS) {                                                         \
      fprintf(stderr, "%s:%d: %s failed with %d\n", __FILE__, __LINE__, #call, e_); \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

/* [-1, 1) from the test's seeded generator. */
double uniform(void);
/* Multiples of 1/64 in [-2, 2), never zero: exact in f32, f16 and bf16, so inputs convert
 * exactly and the reference sees what the device sees. */
float exact_value(void);
unsigned bits_of(float f);
float float_of(unsigned u);
/* f16 and bf16 bit patterns of exact_value()'s values (normal halves, no rounding needed), and
 * any pattern back to f32. */
unsigned short to_f16(float f);
float from_f16(unsigned short h);
unsigned short to_bf16(float f);
float from_bf16(unsigned short b);
/* Element i of a host array of `type`, written from / read as f32. */
void put_element(ocltk_dtype type, void* base, size_t i, float value);
float get_element(ocltk_dtype type, const void* base, size_t i);
/* A NaN of `type` at element i (poison: an element the device must write). */
void poison_element(ocltk_dtype type, void* base, size_t i);
/* Whether element i of two arrays of `type` holds the same bits. */
int same_element(ocltk_dtype type, const void* a, const void* b, size_t i);

typedef struct {
  cl_context context;
  cl_device_id device;
  cl_command_queue queue;
} Cl;

/* A buffer of `bytes`, filled from `host` where not NULL. */
cl_mem buffer(cl_context context, size_t bytes, const void* host);
/* A blocking read of the whole of `bytes`. */
void download(cl_command_queue q, cl_mem m, size_t bytes, void* host);
/* Waits for and releases an event where there is one. */
void finish_event(cl_event* event);

/* test_capi_lora.c: gemm_nt in the 16-bit types, the LoRA operations, their choices and
 * refusals. */
void test_gemm_half(ocltk_runtime* rt, const Cl* cl);
void test_lora(ocltk_runtime* rt, const Cl* cl);
void test_lora_errors(ocltk_runtime* rt, const Cl* cl);

#endif /* OCLTK_TESTS_CAPI_TEST_H_ */
