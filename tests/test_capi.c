/* The C API (ocltk.h) from C: every operation against a double reference on fresh random data,
 * a runtime wrapping the test's own context and queue, wait lists and events, and every error
 * path returning a status and a message with nothing written. Built as C99 with -pedantic
 * -Werror (tests/CMakeLists.txt), so it is also the header's check as plain C.
 *
 *   test_capi [SEED]     (default: from the clock; printed either way)
 *
 * gemm_nt in the 16-bit types and the LoRA operations are in test_capi_lora.c.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <time.h>

#include "capi_test.h"

int g_checks, g_failures;

void check_at(int ok, const char* file, int line, const char* what, const char* fmt, ...) {
  va_list args;
  ++g_checks;
  if (ok) return;
  ++g_failures;
  fprintf(stderr, "%s:%d: CHECK(%s) failed: ", file, line, what);
  va_start(args, fmt);
  vfprintf(stderr, fmt, args);
  va_end(args);
  fputc('\n', stderr);
}

/* ---- Host helpers ---------------------------------------------------------------------- */

static unsigned long long g_rng;
double uniform(void) { /* [-1, 1) from xorshift64* */
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return (double)((g_rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
float exact_value(void) {
  int v = (int)floor(uniform() * 128.0);
  return (float)(v == 0 ? 1 : v) / 64.0f;
}
static float* random_floats(size_t n) {
  float* v = malloc(n * sizeof *v);
  size_t i;
  for (i = 0; i < n; ++i) v[i] = (float)uniform();
  return v;
}
static void fill_float(float* v, size_t n, float value) {
  size_t i;
  for (i = 0; i < n; ++i) v[i] = value;
}
unsigned bits_of(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}
float float_of(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
unsigned short to_f16(float f) {
  const unsigned u = bits_of(f);
  const unsigned sign = (u >> 16) & 0x8000u;
  const int exponent = (int)((u >> 23) & 0xff) - 127 + 15;
  return (unsigned short)(sign | ((unsigned)exponent << 10) | ((u >> 13) & 0x3ffu));
}
float from_f16(unsigned short h) {
  const unsigned sign = (unsigned)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) return (sign ? -1.0f : 1.0f) * (float)mantissa * 5.9604644775390625e-8f;
  if (exponent == 31) return float_of(sign | 0x7f800000u | (mantissa << 13));
  return float_of(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}
unsigned short to_bf16(float f) { return (unsigned short)(bits_of(f) >> 16); }
float from_bf16(unsigned short b) { return float_of((unsigned)b << 16); }

void put_element(ocltk_dtype type, void* base, size_t i, float value) {
  if (type == OCLTK_F32)
    ((float*)base)[i] = value;
  else
    ((unsigned short*)base)[i] = type == OCLTK_F16 ? to_f16(value) : to_bf16(value);
}
float get_element(ocltk_dtype type, const void* base, size_t i) {
  if (type == OCLTK_F32) return ((const float*)base)[i];
  return type == OCLTK_F16 ? from_f16(((const unsigned short*)base)[i]) : from_bf16(((const unsigned short*)base)[i]);
}
void poison_element(ocltk_dtype type, void* base, size_t i) {
  if (type == OCLTK_F32)
    ((float*)base)[i] = (float)NAN;
  else
    ((unsigned short*)base)[i] = type == OCLTK_F16 ? 0x7E00u : 0x7FC0u;
}
int same_element(ocltk_dtype type, const void* a, const void* b, size_t i) {
  const size_t size = ocltk_dtype_size(type);
  return memcmp((const char*)a + i * size, (const char*)b + i * size, size) == 0;
}

/* |got - want| within the forward bound of a float dot product of length k (docs/verification.md)
 * plus, for a half result, one rounding of it. */
static int near(double got, double want, double abs_dot, long k, double c_old, double half_ulp) {
  const double u = 5.9604644775390625e-8, gamma = (double)k * u / (1.0 - (double)k * u);
  const double bound = gamma * abs_dot + u * fabs(c_old) + half_ulp * fabs(want) + 1e-30;
  return fabs(got - want) <= bound * 1.0000001 + (half_ulp > 0 ? half_ulp * bound : 0);
}

/* ---- OpenCL setup --------------------------------------------------------------------- */

cl_mem buffer(cl_context context, size_t bytes, const void* host) {
  cl_int err;
  cl_mem m = clCreateBuffer(context, CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0), bytes, (void*)host, &err);
  CL_OK(err);
  return m;
}
void download(cl_command_queue q, cl_mem m, size_t bytes, void* host) {
  CL_OK(clEnqueueReadBuffer(q, m, CL_TRUE, 0, bytes, host, 0, NULL, NULL));
}
void finish_event(cl_event* event) {
  if (*event == NULL) return;
  CL_OK(clWaitForEvents(1, event));
  clReleaseEvent(*event);
  *event = NULL;
}

/* ---- gemm_nt ------------------------------------------------------------------------ */

typedef struct {
  long m, n, k;
  size_t a_off, lda, b_off, ldb, c_off, ldc; /* ld 0: packed */
  float alpha;
  int accumulate;
} GemmCase;

static const float kPad = 12345.0f; /* beside every operand: must survive */

/* Runs one case through `rt` on `queue` (NULL: the runtime's), checks every element of C and
 * that nothing outside C's rows was written. With `gate` the launch waits for a user event,
 * and must not have run before it is set. */
static void check_gemm(ocltk_runtime* rt, cl_context context, cl_command_queue queue, const GemmCase* t, int gated) {
  const size_t lda = t->lda ? t->lda : (size_t)t->k, ldb = t->ldb ? t->ldb : (size_t)t->k,
               ldc = t->ldc ? t->ldc : (size_t)t->n;
  const size_t na = t->a_off + (size_t)(t->m - 1) * lda + (size_t)t->k + 3,
               nb = t->b_off + (size_t)(t->n - 1) * ldb + (size_t)t->k + 3,
               nc = t->c_off + (size_t)(t->m - 1) * ldc + (size_t)t->n + 3;
  float *a = random_floats(na), *b = random_floats(nb), *c = malloc(nc * sizeof *c), *c0 = malloc(nc * sizeof *c0);
  cl_command_queue q = queue ? queue : ocltk_runtime_queue(rt);
  cl_mem da, db, dc;
  cl_event done = NULL, gate = NULL;
  cl_int err;
  long i, j, kk;
  size_t x;
  int bad = 0;
  for (x = 0; x < nc; ++x) c0[x] = t->accumulate ? (float)uniform() : kPad;
  for (i = 0; i < t->m; ++i) /* non-accumulating: poison C so an unwritten element fails */
    for (j = 0; j < t->n; ++j)
      if (!t->accumulate) c0[t->c_off + (size_t)i * ldc + (size_t)j] = (float)NAN;
  da = buffer(context, na * 4, a);
  db = buffer(context, nb * 4, b);
  dc = buffer(context, nc * 4, c0);
  if (gated) {
    gate = clCreateUserEvent(context, &err);
    CL_OK(err);
  }
  EXPECT_STATUS((t->accumulate ? ocltk_gemm_nt_accum : ocltk_gemm_nt)(
                    rt, OCLTK_F32, OCLTK_F32, t->m, t->n, t->k, t->alpha, da, t->a_off, t->lda, db, t->b_off, t->ldb,
                    dc, t->c_off, t->ldc, queue, gated ? 1 : 0, gated ? &gate : NULL, &done),
                OCLTK_SUCCESS, "");
  CHECK(done != NULL, "no out-event");
  if (gated && done) {
    cl_int state = CL_COMPLETE;
    CL_OK(clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL));
    CHECK(state != CL_COMPLETE, "the launch completed before its wait list's user event was set");
    CL_OK(clSetUserEventStatus(gate, CL_COMPLETE));
  }
  if (done) {
    CL_OK(clWaitForEvents(1, &done));
    clReleaseEvent(done);
  }
  download(q, dc, nc * 4, c);
  for (x = 0; x < nc; ++x) { /* outside C's rows: untouched */
    const size_t r = x < t->c_off ? (size_t)-1 : (x - t->c_off) / ldc, col = x < t->c_off ? 0 : (x - t->c_off) % ldc;
    if (r < (size_t)t->m && col < (size_t)t->n) continue;
    if (bits_of(c[x]) != bits_of(c0[x])) ++bad;
  }
  CHECK(bad == 0, "%d elements outside C (%ldx%ld, offset %zu, ldc %zu) were written", bad, t->m, t->n, t->c_off, ldc);
  bad = 0;
  for (i = 0; i < t->m; ++i)
    for (j = 0; j < t->n; ++j) {
      double dot = 0, abs_dot = 0, old = t->accumulate ? c0[t->c_off + (size_t)i * ldc + (size_t)j] : 0, want;
      for (kk = 0; kk < t->k; ++kk) {
        const double p =
            (double)a[t->a_off + (size_t)i * lda + (size_t)kk] * b[t->b_off + (size_t)j * ldb + (size_t)kk];
        dot += p;
        abs_dot += fabs(p);
      }
      want = t->alpha * dot + old;
      if (!near(c[t->c_off + (size_t)i * ldc + (size_t)j], want, fabs(t->alpha) * abs_dot, t->k, old, 0)) {
        if (bad++ < 3)
          fprintf(stderr, "  C[%ld,%ld] = %.9g, reference %.9g\n", i, j, c[t->c_off + (size_t)i * ldc + (size_t)j],
                  want);
      }
    }
  CHECK(bad == 0, "gemm_nt %ldx%ldx%ld (alpha %g, accumulate %d): %d elements off", t->m, t->n, t->k, t->alpha,
        t->accumulate, bad);
  if (gate) clReleaseEvent(gate);
  clReleaseMemObject(da);
  clReleaseMemObject(db);
  clReleaseMemObject(dc);
  free(a);
  free(b);
  free(c);
  free(c0);
}

static void test_gemm(ocltk_runtime* rt, const Cl* cl) {
  /* gemv, LoRA shrink and expand shapes, odd sizes with offsets and padded leading dimensions. */
  const GemmCase cases[] = {
      {1, 37, 96, 0, 0, 0, 0, 0, 0, 1.0f, 0},
      {7, 16, 33, 5, 40, 3, 0, 2, 19, -0.5f, 0},
      {5, 65, 16, 0, 17, 9, 20, 11, 70, 0.25f, 1},
      {33, 24, 17, 0, 0, 0, 0, 0, 0, 2.0f, 1},
  };
  cl_int err;
  cl_command_queue other = clCreateCommandQueue(cl->context, cl->device, 0, &err);
  size_t i;
  CL_OK(err);
  for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) check_gemm(rt, cl->context, NULL, &cases[i], 0);
  /* Another queue of the same context, and a wait list holding a user event. */
  check_gemm(rt, cl->context, other, &cases[1], 0);
  check_gemm(rt, cl->context, NULL, &cases[2], 1);
  check_gemm(rt, cl->context, other, &cases[0], 1);
  clReleaseCommandQueue(other);
}

/* ---- NF4 ------------------------------------------------------------------------------ */

typedef struct {
  long experts, n, k, block, element_offset;
  size_t packed_offset, scales_offset;
} Nf4Case;

/* Forward and backward over one window in all three element types, validated offsets and
 * not, against the dequantized weights in double. */
static void test_nf4(ocltk_runtime* rt, const Cl* cl, const Nf4Case* t) {
  const long rows = 9;
  const cl_uint offsets[] = {0, 4, 4, 9}; /* expert 1 has no rows */
  const size_t count = (size_t)(t->experts * t->n * t->k), stream = count + (size_t)t->element_offset;
  const size_t packed_bytes = (stream + 1) / 2, scale_count = (stream + (size_t)t->block - 1) / (size_t)t->block;
  float *w_stream = random_floats(stream), *w = malloc(count * sizeof *w), codebook[16];
  unsigned char* packed = malloc(packed_bytes + t->packed_offset);
  float* scales = malloc((scale_count + t->scales_offset) * sizeof *scales);
  cl_mem dpacked, dscales, dcodebook, doffsets, dx, dy;
  ocltk_nf4_weights weights;
  int type, validate, backward;
  ocltk_choice* choice = NULL;

  memset(packed, 0xA5, t->packed_offset);
  fill_float(scales, t->scales_offset, -7.0f);
  EXPECT_STATUS(ocltk_nf4_quantize(w_stream, OCLTK_F32, stream, t->block, packed + t->packed_offset, packed_bytes,
                                   scales + t->scales_offset, scale_count),
                OCLTK_SUCCESS, "");
  EXPECT_STATUS(ocltk_nf4_dequantize(packed + t->packed_offset, packed_bytes, scales + t->scales_offset, scale_count,
                                     NULL, t->element_offset, t->block, count, w),
                OCLTK_SUCCESS, "");
  ocltk_nf4_codebook(codebook);
  CHECK(codebook[0] == -1.0f && codebook[7] == 0.0f && codebook[15] == 1.0f, "not NF4's codebook");
  dpacked = buffer(cl->context, packed_bytes + t->packed_offset, packed);
  dscales = buffer(cl->context, (scale_count + t->scales_offset) * 4, scales);
  dcodebook = buffer(cl->context, sizeof codebook, codebook);
  doffsets = buffer(cl->context, sizeof offsets, offsets);
  weights.experts = t->experts;
  weights.out_features = t->n;
  weights.in_features = t->k;
  weights.block_size = t->block;
  weights.element_offset = t->element_offset;
  weights.packed = dpacked;
  weights.packed_offset = t->packed_offset;
  weights.scales = dscales;
  weights.scales_offset = t->scales_offset;
  weights.codebook = dcodebook;

  for (backward = 0; backward < 2; ++backward)
    for (type = OCLTK_F32; type <= OCLTK_BF16; ++type)
      for (validate = 0; validate < 2; ++validate) {
        const long in_width = backward ? t->n : t->k, out_width = backward ? t->k : t->n;
        const size_t in_size = ocltk_dtype_size((ocltk_dtype)type),
                     out_size = backward ? 4 : ocltk_dtype_size((ocltk_dtype)type);
        const double half_ulp = backward || type == OCLTK_F32 ? 0 : (type == OCLTK_F16 ? 4.9e-4 : 3.9e-3);
        float* x = malloc((size_t)(rows * in_width) * sizeof *x);
        void* x_bits = malloc((size_t)(rows * in_width) * in_size);
        unsigned char* y = malloc((size_t)(rows * out_width) * out_size);
        cl_event done = NULL;
        long r, i, j;
        int bad = 0;
        for (i = 0; i < rows * in_width; ++i) {
          x[i] = exact_value();
          if (type == OCLTK_F32)
            ((float*)x_bits)[i] = x[i];
          else
            ((unsigned short*)x_bits)[i] = type == OCLTK_F16 ? to_f16(x[i]) : to_bf16(x[i]);
        }
        memset(y, 0xFF, (size_t)(rows * out_width) * out_size); /* NaN in every type */
        dx = buffer(cl->context, (size_t)(rows * in_width) * in_size, x_bits);
        dy = buffer(cl->context, (size_t)(rows * out_width) * out_size, y);
        EXPECT_STATUS((backward ? ocltk_nf4_backward : ocltk_nf4_forward)(rt, &weights, (ocltk_dtype)type, rows, dx,
                                                                          doffsets, dy, validate, validate ? -1 : 2,
                                                                          validate ? -1 : 5, NULL, 0, NULL, &done),
                      OCLTK_SUCCESS, "");
        CHECK(done != NULL, "no out-event");
        if (done) {
          CL_OK(clWaitForEvents(1, &done));
          clReleaseEvent(done);
        }
        download(cl->queue, dy, (size_t)(rows * out_width) * out_size, y);
        for (r = 0; r < rows; ++r) {
          const long e = r < 4 ? 0 : 2;
          for (j = 0; j < out_width; ++j) {
            double dot = 0, abs_dot = 0, got;
            for (i = 0; i < in_width; ++i) {
              const long n = backward ? i : j, k = backward ? j : i;
              const double p = (double)x[r * in_width + i] * w[(size_t)((e * t->n + n) * t->k + k)];
              dot += p;
              abs_dot += fabs(p);
            }
            if (out_size == 4)
              got = ((float*)y)[r * out_width + j];
            else
              got = type == OCLTK_F16 ? from_f16(((unsigned short*)y)[r * out_width + j])
                                      : from_bf16(((unsigned short*)y)[r * out_width + j]);
            if (!near(got, dot, abs_dot, in_width, 0, half_ulp) && bad++ < 3)
              fprintf(stderr, "  row %ld col %ld: %.9g, reference %.9g\n", r, j, got, dot);
          }
        }
        CHECK(bad == 0, "nf4 %s %s (validate %d, E=%ld N=%ld K=%ld block %ld offset %ld): %d elements off",
              backward ? "backward" : "forward", ocltk_dtype_name((ocltk_dtype)type), validate, t->experts, t->n, t->k,
              t->block, t->element_offset, bad);
        EXPECT_STATUS(ocltk_last_choice(rt, &choice), OCLTK_SUCCESS, "");
        CHECK(choice && strcmp(ocltk_choice_kernel(choice), backward ? "nf4_backward" : "nf4_forward") == 0,
              "last choice is %s", choice ? ocltk_choice_kernel(choice) : "NULL");
        ocltk_choice_release(choice);
        clReleaseMemObject(dx);
        clReleaseMemObject(dy);
        free(x);
        free(x_bits);
        free(y);
      }
  {
    /* No rows: nothing to compute, still an event (a marker) when asked. */
    const cl_uint none[] = {0, 0, 0, 0};
    cl_mem dnone = buffer(cl->context, sizeof none, none);
    cl_event done = NULL;
    EXPECT_STATUS(ocltk_nf4_forward(rt, &weights, OCLTK_F32, 0, NULL, dnone, NULL, 1, -1, -1, NULL, 0, NULL, &done),
                  OCLTK_SUCCESS, "");
    CHECK(done != NULL, "a forward of no rows gave no event");
    if (done) {
      CL_OK(clWaitForEvents(1, &done));
      clReleaseEvent(done);
    }
    clReleaseMemObject(dnone);
  }
  EXPECT_STATUS(ocltk_choose_nf4(rt, 0, &weights, OCLTK_BF16, rows, 2, 5, &choice), OCLTK_SUCCESS, "");
  CHECK(choice && strcmp(ocltk_choice_kernel(choice), "nf4_forward") == 0 &&
            strcmp(ocltk_choice_shape_class(choice), "decode") == 0 && ocltk_choice_algorithm(choice)[0] != '\0',
        "choose_nf4: %s", choice ? ocltk_choice_describe(choice) : "NULL");
  ocltk_choice_release(choice);
  clReleaseMemObject(dpacked);
  clReleaseMemObject(dscales);
  clReleaseMemObject(dcodebook);
  clReleaseMemObject(doffsets);
  free(w_stream);
  free(w);
  free(packed);
  free(scales);
}

/* quantize: every code is the nearest level (bitsandbytes' decision tree, up to its f32
 * midpoints) and every scale its block's absmax; dequantize inverts it exactly. */
static void test_quantize(void) {
  const size_t count = 1000; /* not a multiple of the block: a short last block */
  const long block = 64;
  float *w = random_floats(count), scales[16], out[1000], codebook[16];
  unsigned char packed[500];
  size_t i, bad = 0;
  ocltk_nf4_codebook(codebook);
  EXPECT_STATUS(ocltk_nf4_quantize(w, OCLTK_F32, count, block, packed, sizeof packed, scales, 16), OCLTK_SUCCESS, "");
  EXPECT_STATUS(ocltk_nf4_dequantize(packed, sizeof packed, scales, 16, codebook, 0, block, count, out), OCLTK_SUCCESS,
                "");
  for (i = 0; i < count; ++i) {
    const size_t b = i / (size_t)block;
    float absmax = 0;
    size_t j;
    const unsigned code = (packed[i / 2] >> (i % 2 ? 0 : 4)) & 15u;
    double best = 1e30;
    for (j = b * (size_t)block; j < (b + 1) * (size_t)block && j < count; ++j)
      absmax = fabsf(w[j]) > absmax ? fabsf(w[j]) : absmax;
    if (scales[b] != absmax) ++bad;
    for (j = 0; j < 16; ++j) best = fmin(best, fabs(w[i] / absmax - codebook[j]));
    if (fabs(w[i] / absmax - codebook[code]) > best + 1e-6) ++bad;
    if (out[i] != codebook[code] * scales[b]) ++bad;
  }
  CHECK(bad == 0, "quantize/dequantize: %zu mismatches", bad);
  free(w);
}

/* ---- Routing ----------------------------------------------------------------------------- */

static void test_route(ocltk_runtime* rt, const Cl* cl) {
  enum { T = 5, TOP_K = 2, E = 3, K = 6, P = T * TOP_K };
  const cl_uint ids[P] = {2, 0, 1, 2, 0, 7 /* dropped */, 2, 1, 0, 1};
  float input[T * K], gathered[P * K], scatter_w[P], y[P * K], out[T * K];
  cl_uint offsets[E + 1], pair_row[P], row_token[P], want_offsets[E + 1] = {0}, want_pair[P];
  cl_mem d_ids, d_in, d_off, d_pair, d_tok, d_gat, d_y, d_w, d_out;
  cl_event routed = NULL, scattered = NULL;
  int p, e, k, t, bad = 0;
  cl_uint next[E];
  for (p = 0; p < T * K; ++p) input[p] = (float)uniform();
  for (p = 0; p < P; ++p) {
    scatter_w[p] = (float)uniform();
    if (ids[p] < E) ++want_offsets[ids[p] + 1];
  }
  for (e = 0; e < E; ++e) want_offsets[e + 1] += want_offsets[e];
  for (e = 0; e < E; ++e) next[e] = want_offsets[e];
  for (p = 0; p < P; ++p) want_pair[p] = ids[p] < E ? next[ids[p]]++ : 0xFFFFFFFFu; /* token order per expert */
  d_ids = buffer(cl->context, sizeof ids, ids);
  d_in = buffer(cl->context, sizeof input, input);
  d_off = buffer(cl->context, sizeof offsets, NULL);
  d_pair = buffer(cl->context, sizeof pair_row, NULL);
  d_tok = buffer(cl->context, sizeof row_token, NULL);
  d_gat = buffer(cl->context, sizeof gathered, NULL);
  EXPECT_STATUS(
      ocltk_nf4_route(rt, T, TOP_K, E, K, OCLTK_F32, d_ids, d_in, d_off, d_pair, d_tok, d_gat, NULL, 0, NULL, &routed),
      OCLTK_SUCCESS, "");
  CHECK(routed != NULL, "route gave no event");
  download(cl->queue, d_off, sizeof offsets, offsets);
  download(cl->queue, d_pair, sizeof pair_row, pair_row);
  download(cl->queue, d_tok, sizeof row_token, row_token);
  download(cl->queue, d_gat, sizeof gathered, gathered);
  for (e = 0; e <= E; ++e) bad += offsets[e] != want_offsets[e];
  for (p = 0; p < P; ++p) {
    bad += pair_row[p] != want_pair[p];
    if (want_pair[p] == 0xFFFFFFFFu) continue;
    bad += row_token[want_pair[p]] != (cl_uint)(p / TOP_K);
    for (k = 0; k < K; ++k) bad += gathered[want_pair[p] * K + k] != input[(p / TOP_K) * K + k];
  }
  CHECK(bad == 0, "route: %d mismatches", bad);

  /* Scatter back what the routed rows would give, waiting on the route's event. */
  for (p = 0; p < P * K; ++p) y[p] = (float)uniform();
  d_y = buffer(cl->context, sizeof y, y);
  d_w = buffer(cl->context, sizeof scatter_w, scatter_w);
  d_out = buffer(cl->context, sizeof out, NULL);
  EXPECT_STATUS(ocltk_nf4_scatter(rt, T, TOP_K, K, OCLTK_F32, d_y, (long)want_offsets[E], d_pair, d_w, d_out, NULL, 1,
                                  &routed, &scattered),
                OCLTK_SUCCESS, "");
  CHECK(scattered != NULL, "scatter gave no event");
  if (scattered) CL_OK(clWaitForEvents(1, &scattered));
  download(cl->queue, d_out, sizeof out, out);
  bad = 0;
  for (t = 0; t < T; ++t)
    for (k = 0; k < K; ++k) {
      double want = 0, abs_sum = 0;
      int s;
      for (s = 0; s < TOP_K; ++s) {
        const int q = t * TOP_K + s;
        if (want_pair[q] == 0xFFFFFFFFu) continue;
        want += (double)scatter_w[q] * y[want_pair[q] * K + k];
        abs_sum += fabs((double)scatter_w[q] * y[want_pair[q] * K + k]);
      }
      bad += !near(out[t * K + k], want, abs_sum, TOP_K, 0, 0);
    }
  CHECK(bad == 0, "scatter: %d elements off", bad);
  /* Nothing to scatter: still an event when asked. */
  if (scattered) clReleaseEvent(scattered);
  scattered = NULL;
  EXPECT_STATUS(ocltk_nf4_scatter(rt, 0, TOP_K, K, OCLTK_F32, d_y, 0, d_pair, d_w, d_out, NULL, 0, NULL, &scattered),
                OCLTK_SUCCESS, "");
  CHECK(scattered != NULL, "an empty scatter gave no event");
  if (scattered) {
    CL_OK(clWaitForEvents(1, &scattered));
    clReleaseEvent(scattered);
  }
  if (routed) clReleaseEvent(routed);
  clReleaseMemObject(d_ids);
  clReleaseMemObject(d_in);
  clReleaseMemObject(d_off);
  clReleaseMemObject(d_pair);
  clReleaseMemObject(d_tok);
  clReleaseMemObject(d_gat);
  clReleaseMemObject(d_y);
  clReleaseMemObject(d_w);
  clReleaseMemObject(d_out);
}

/* ---- Errors ----------------------------------------------------------------------------- */

/* Every refusal: the status, a message naming the fault, the out-event NULL and C as it was. */
static void test_errors(ocltk_runtime* rt, const Cl* cl) {
  const long M = 3, N = 5, K = 7;
  float a[3 * 7], b[5 * 7], c[5 * 5], c_after[5 * 5], y[9 * 4], y_after[9 * 4];
  cl_int err;
  cl_context foreign = clCreateContext(NULL, 1, &cl->device, NULL, NULL, &err);
  cl_command_queue foreign_queue;
  cl_mem da, db, dc, small, other, dpacked, dscales, dcodebook, doffsets, dx, dy;
  cl_event ev = (cl_event)1, user, foreign_event;
  ocltk_runtime* none = NULL;
  ocltk_choice* choice = (ocltk_choice*)1;
  ocltk_nf4_weights w;
  unsigned char packed[64];
  float scales[4], deq[8];
  const cl_uint bad_offsets[] = {0, 6, 4, 9};
  size_t i;
  int untouched = 1;
  CL_OK(err);
  foreign_queue = clCreateCommandQueue(foreign, cl->device, 0, &err);
  CL_OK(err);
  foreign_event = clCreateUserEvent(foreign, &err);
  CL_OK(err);
  user = clCreateUserEvent(cl->context, &err);
  CL_OK(err);
  for (i = 0; i < sizeof a / 4; ++i) a[i] = (float)uniform();
  for (i = 0; i < sizeof b / 4; ++i) b[i] = (float)uniform();
  for (i = 0; i < sizeof c / 4; ++i) c[i] = (float)uniform();
  for (i = 0; i < sizeof y / 4; ++i) y[i] = (float)uniform();
  da = buffer(cl->context, sizeof a, a);
  db = buffer(cl->context, sizeof b, b);
  dc = buffer(cl->context, sizeof c, c);
  small = buffer(cl->context, 16, NULL);
  other = buffer(foreign, sizeof a, a);

#define GEMM(rt_, dtype, c_dtype, m, n, k, A, lda, B, C, queue, nw, wl) \
  ocltk_gemm_nt(rt_, dtype, c_dtype, m, n, k, 1.0f, A, 0, lda, B, 0, 0, C, 0, 0, queue, nw, wl, &ev)
#define REFUSED(call, want, part)                          \
  do {                                                     \
    ev = (cl_event)1;                                      \
    EXPECT_STATUS(call, want, part);                       \
    CHECK(ev == NULL, "%s: out-event not cleared", #call); \
  } while (0)

  REFUSED(GEMM(NULL, OCLTK_F32, OCLTK_F32, M, N, K, da, 0, db, dc, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "runtime is NULL");
  REFUSED(GEMM(rt, OCLTK_F16, OCLTK_BF16, M, N, K, da, 0, db, dc, NULL, 0, NULL), OCLTK_UNSUPPORTED,
          "ocltk_gemm_nt: A and B of type f16 with C of type bf16 is not implemented (C takes A and B's type, or f32)");
  REFUSED(GEMM(rt, OCLTK_F32, OCLTK_F16, M, N, K, da, 0, db, dc, NULL, 0, NULL), OCLTK_UNSUPPORTED,
          "A and B of type f32 with C of type f16 is not implemented");
  REFUSED(GEMM(rt, OCLTK_F32, (ocltk_dtype)-1, M, N, K, da, 0, db, dc, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "c_dtype = -1 is not an ocltk_dtype");
  /* 16-bit types are sized as such: three f32 elements of A are six f16 ones. */
  REFUSED(GEMM(rt, OCLTK_BF16, OCLTK_F32, 2 * M, N, K, da, 0, small, dc, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "buffer B holds 16 bytes but 5x7 bf16 elements at offset 0 with leading dimension 7 need 70");
  REFUSED(GEMM(rt, (ocltk_dtype)7, OCLTK_F32, M, N, K, da, 0, db, dc, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "dtype = 7 is not an ocltk_dtype");
  REFUSED(GEMM(rt, OCLTK_F32, OCLTK_F32, 0, N, K, da, 0, db, dc, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "M = 0 must be at least 1");
  REFUSED(GEMM(rt, OCLTK_F32, OCLTK_F32, M, -2, K, da, 0, db, dc, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "N = -2 must be at least 1");
  REFUSED(GEMM(rt, OCLTK_F32, OCLTK_F32, M, N, K, NULL, 0, db, dc, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "buffer A is null");
  REFUSED(GEMM(rt, OCLTK_F32, OCLTK_F32, M, N, K, da, 0, small, dc, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "buffer B holds 16 bytes");
  REFUSED(GEMM(rt, OCLTK_F32, OCLTK_F32, M, N, K, da, 6, db, dc, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "leading dimension lda = 6 is smaller than the row length of A (7)");
  REFUSED(GEMM(rt, OCLTK_F32, OCLTK_F32, M, N, K, other, 0, db, dc, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "buffer A belongs to another OpenCL context");
  REFUSED(GEMM(rt, OCLTK_F32, OCLTK_F32, M, N, K, da, 0, db, dc, NULL, 1, NULL), OCLTK_INVALID_ARGUMENT,
          "event_wait_list is NULL but num_events_in_wait_list is 1");
  REFUSED(GEMM(rt, OCLTK_F32, OCLTK_F32, M, N, K, da, 0, db, dc, NULL, 0, &user), OCLTK_INVALID_ARGUMENT,
          "num_events_in_wait_list is 0");
  {
    cl_event list[2];
    list[0] = user;
    list[1] = NULL;
    REFUSED(GEMM(rt, OCLTK_F32, OCLTK_F32, M, N, K, da, 0, db, dc, NULL, 2, list), OCLTK_INVALID_ARGUMENT,
            "event_wait_list[1] is NULL");
  }
  REFUSED(GEMM(rt, OCLTK_F32, OCLTK_F32, M, N, K, da, 0, db, dc, NULL, 1, &foreign_event), OCLTK_INVALID_ARGUMENT,
          "event_wait_list[0] belongs to another OpenCL context");
  REFUSED(GEMM(rt, OCLTK_F32, OCLTK_F32, M, N, K, da, 0, db, dc, foreign_queue, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "queue belongs to another OpenCL context");
  REFUSED(
      ocltk_gemm_nt_accum(rt, OCLTK_F32, OCLTK_F32, M, N, K, 1.0f, da, 0, 0, db, 0, 0, dc, 12, 0, NULL, 0, NULL, &ev),
      OCLTK_INVALID_ARGUMENT,
      "buffer C holds 100 bytes but 3x5 f32 elements at offset 12 with leading dimension 5 need 108");
  download(cl->queue, dc, sizeof c_after, c_after);
  for (i = 0; i < sizeof c / 4; ++i) untouched &= bits_of(c[i]) == bits_of(c_after[i]);
  CHECK(untouched, "a refused gemm_nt wrote C");

  /* A success clears the message; the next failure sets it again. */
  EXPECT_STATUS(ocltk_choose_gemm_nt(rt, OCLTK_F32, OCLTK_F32, M, N, K, &choice), OCLTK_SUCCESS, "");
  ocltk_choice_release(choice);
  choice = (ocltk_choice*)1;
  EXPECT_STATUS(ocltk_choose_gemm_nt(rt, OCLTK_F32, OCLTK_F32, M, 0, K, &choice), OCLTK_INVALID_ARGUMENT,
                "M, N and K must be at least 1");
  CHECK(choice == NULL, "a failed choose left its result set");
  EXPECT_STATUS(ocltk_choose_gemm_nt(rt, OCLTK_F32, OCLTK_BF16, M, N, K, &choice), OCLTK_UNSUPPORTED,
                "ocltk_choose_gemm_nt: A and B of type f32 with C of type bf16 is not implemented");
  CHECK(choice == NULL, "a failed choose left its result set");
  EXPECT_STATUS(ocltk_choose_gemm_nt(rt, OCLTK_F32, OCLTK_F32, M, N, K, NULL), OCLTK_INVALID_ARGUMENT,
                "choice (the result) is NULL");
  EXPECT_STATUS(ocltk_last_choice(NULL, &choice), OCLTK_INVALID_ARGUMENT, "runtime is NULL");

  /* Runtimes. */
  EXPECT_STATUS(ocltk_runtime_open("no-such-device-anywhere", NULL, &none), OCLTK_NOT_FOUND, "no-such-device-anywhere");
  CHECK(none == NULL, "a failed open left a runtime");
  EXPECT_STATUS(ocltk_runtime_open(NULL, "/nonexistent/profile.yaml", &none), OCLTK_NOT_FOUND,
                "/nonexistent/profile.yaml");
  EXPECT_STATUS(ocltk_runtime_open(NULL, NULL, NULL), OCLTK_INVALID_ARGUMENT, "runtime (the result) is NULL");
  EXPECT_STATUS(ocltk_runtime_wrap(NULL, cl->device, cl->queue, NULL, &none), OCLTK_INVALID_ARGUMENT,
                "context is NULL");
  EXPECT_STATUS(ocltk_runtime_wrap(cl->context, cl->device, NULL, NULL, &none), OCLTK_INVALID_ARGUMENT,
                "queue is NULL");
  EXPECT_STATUS(ocltk_runtime_wrap(cl->context, cl->device, foreign_queue, NULL, &none), OCLTK_INVALID_ARGUMENT,
                "queue belongs to another context than the one given");
  CHECK(none == NULL, "a failed wrap left a runtime");

  /* NF4: bad geometry, offsets, counts and buffers. */
  memset(packed, 0x37, sizeof packed);
  fill_float(scales, 4, 0.5f);
  dpacked = buffer(cl->context, sizeof packed, packed);
  dscales = buffer(cl->context, sizeof scales, scales);
  ocltk_nf4_codebook(deq);
  dcodebook = buffer(cl->context, 64, NULL);
  doffsets = buffer(cl->context, sizeof bad_offsets, bad_offsets);
  dx = buffer(cl->context, 9 * 8 * 4, NULL);
  dy = buffer(cl->context, sizeof y, y);
  w.experts = 3;
  w.out_features = 4;
  w.in_features = 8;
  w.block_size = 32;
  w.element_offset = 0;
  w.packed = dpacked;
  w.packed_offset = 0;
  w.scales = dscales;
  w.scales_offset = 0;
  w.codebook = dcodebook;
#define FWD(weights, rows, offsets, validate, active, longest) \
  ocltk_nf4_forward(rt, weights, OCLTK_F32, rows, dx, offsets, dy, validate, active, longest, NULL, 0, NULL, &ev)
  REFUSED(FWD(NULL, 9, doffsets, 1, -1, -1), OCLTK_INVALID_ARGUMENT, "weights is NULL");
  REFUSED(FWD(&w, 9, doffsets, 1, -1, -1), OCLTK_INVALID_ARGUMENT, "offsets decrease at entry 2 (6 then 4)");
  REFUSED(FWD(&w, -1, doffsets, 0, -1, -1), OCLTK_INVALID_ARGUMENT, "rows = -1 is negative");
  REFUSED(FWD(&w, 9, doffsets, 0, 4, -1), OCLTK_INVALID_ARGUMENT, "active_experts = 4 is neither -1");
  REFUSED(FWD(&w, 9, NULL, 0, -1, -1), OCLTK_INVALID_ARGUMENT, "buffer offsets is null");
  REFUSED(FWD(&w, 10, doffsets, 0, -1, -1), OCLTK_INVALID_ARGUMENT, "buffer input holds 288 bytes");
  REFUSED(ocltk_nf4_forward(rt, &w, (ocltk_dtype)3, 9, dx, doffsets, dy, 0, -1, -1, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "dtype = 3 is not an ocltk_dtype");
  REFUSED(ocltk_nf4_backward(rt, &w, OCLTK_F32, 9, dy, doffsets, dx, 1, -1, -1, foreign_queue, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "queue belongs to another OpenCL context");
  w.block_size = 48;
  REFUSED(FWD(&w, 9, doffsets, 0, -1, -1), OCLTK_INVALID_ARGUMENT, "block size 48 is not a power of two");
  w.block_size = 32;
  w.codebook = NULL;
  REFUSED(FWD(&w, 9, doffsets, 0, -1, -1), OCLTK_INVALID_ARGUMENT, "buffer codebook is null");
  w.codebook = dcodebook;
  w.packed = small;
  REFUSED(FWD(&w, 9, doffsets, 0, -1, -1), OCLTK_INVALID_ARGUMENT, "buffer packed holds 16 bytes");
  w.packed = dpacked;
  EXPECT_STATUS(ocltk_choose_nf4(rt, 1, &w, OCLTK_F32, 9, 0, -1, &choice), OCLTK_INVALID_ARGUMENT,
                "active_experts = 0 is neither -1");
  download(cl->queue, dy, sizeof y_after, y_after);
  untouched = 1;
  for (i = 0; i < sizeof y / 4; ++i) untouched &= bits_of(y[i]) == bits_of(y_after[i]);
  CHECK(untouched, "a refused nf4 launch wrote its output");

  /* Routing and host NF4. */
  REFUSED(ocltk_nf4_route(rt, 4, 0, 3, 8, OCLTK_F32, dx, dx, dx, dx, dx, dx, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "need tokens >= 0, top_k >= 1");
  REFUSED(ocltk_nf4_route(rt, 4, 2, 3, 8, OCLTK_F32, small, dx, dx, dx, dx, dx, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "buffer expert_ids holds 16 bytes");
  REFUSED(ocltk_nf4_scatter(rt, 4, 2, 8, OCLTK_F32, NULL, 8, dx, dx, dx, NULL, 0, NULL, &ev), OCLTK_INVALID_ARGUMENT,
          "buffer y is null");
  REFUSED(ocltk_nf4_scatter(NULL, 4, 2, 8, OCLTK_F32, dx, 8, dx, dx, dx, NULL, 0, NULL, &ev), OCLTK_INVALID_ARGUMENT,
          "runtime is NULL");
  EXPECT_STATUS(ocltk_nf4_quantize(a, OCLTK_F32, 21, 48, packed, 11, scales, 1), OCLTK_INVALID_ARGUMENT,
                "block_size 48 is not a power of two");
  EXPECT_STATUS(ocltk_nf4_quantize(a, OCLTK_F32, 21, 32, packed, 10, scales, 1), OCLTK_INVALID_ARGUMENT,
                "packed holds 10 bytes but 21 coefficients need 11");
  EXPECT_STATUS(ocltk_nf4_quantize(a, OCLTK_F32, 65, 32, packed, 64, scales, 2), OCLTK_INVALID_ARGUMENT,
                "scales holds 2 floats but 65 coefficients in blocks of 32 need 3");
  EXPECT_STATUS(ocltk_nf4_quantize(NULL, OCLTK_F32, 21, 32, packed, 11, scales, 1), OCLTK_INVALID_ARGUMENT,
                "weights is NULL");
  EXPECT_STATUS(ocltk_nf4_dequantize(packed, 4, scales, 4, NULL, 0, 32, 9, deq), OCLTK_INVALID_ARGUMENT,
                "packed holds 4 bytes but 9 coefficients from element offset 0 need 5");
  EXPECT_STATUS(ocltk_nf4_dequantize(packed, 64, scales, 1, NULL, 30, 32, 8, deq), OCLTK_INVALID_ARGUMENT,
                "scales holds 1 floats but 8 coefficients from element offset 30 in blocks of 32 need 2");
  EXPECT_STATUS(ocltk_nf4_dequantize(packed, 64, scales, 4, NULL, 32, 32, 8, deq), OCLTK_INVALID_ARGUMENT,
                "element_offset 32 is not in [0, block_size = 32)");

  clReleaseMemObject(da);
  clReleaseMemObject(db);
  clReleaseMemObject(dc);
  clReleaseMemObject(small);
  clReleaseMemObject(other);
  clReleaseMemObject(dpacked);
  clReleaseMemObject(dscales);
  clReleaseMemObject(dcodebook);
  clReleaseMemObject(doffsets);
  clReleaseMemObject(dx);
  clReleaseMemObject(dy);
  clReleaseEvent(user);
  clReleaseEvent(foreign_event);
  clReleaseCommandQueue(foreign_queue);
  clReleaseContext(foreign);
}

int capi_from_cxx(void); /* capi_cxx.cpp: the header compiled as C++ */

/* The last error is the calling thread's own. */
static void* fail_in_thread(void* message) {
  ocltk_runtime* none = NULL;
  ocltk_runtime_open("another-missing-device", NULL, &none);
  strncpy((char*)message, ocltk_last_error(), 255);
  return NULL;
}

static void test_thread_local_error(void) {
  char theirs[256] = {0};
  pthread_t thread;
  ocltk_runtime* none = NULL;
  ocltk_runtime_open("missing-device-here", NULL, &none);
  pthread_create(&thread, NULL, fail_in_thread, theirs);
  pthread_join(thread, NULL);
  CHECK(strstr(ocltk_last_error(), "missing-device-here") != NULL, "this thread's message changed: %s",
        ocltk_last_error());
  CHECK(strstr(theirs, "another-missing-device") != NULL, "the other thread's message: %s", theirs);
}

int main(int argc, char** argv) {
  ocltk_runtime *opened = NULL, *wrapped = NULL;
  ocltk_choice* choice = NULL;
  Cl cl;
  cl_int err;
  char version[32];
  const unsigned long long seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (unsigned long long)time(NULL);
  g_rng = seed * 2654435761ULL + 88172645463325252ULL;
  printf("test_capi: seed %llu\n", seed);

  CHECK(ocltk_version() == OCLTK_VERSION_NUMBER, "library %d, header %d", ocltk_version(), OCLTK_VERSION_NUMBER);
  sprintf(version, "%d.%d.%d", OCLTK_VERSION_MAJOR, OCLTK_VERSION_MINOR, OCLTK_VERSION_PATCH);
  CHECK(strcmp(ocltk_version_string(), version) == 0, "version string %s, header %s", ocltk_version_string(), version);
  CHECK(strcmp(ocltk_dtype_name(OCLTK_BF16), "bf16") == 0 && ocltk_dtype_size(OCLTK_F16) == 2 &&
            ocltk_dtype_name((ocltk_dtype)9) == NULL && ocltk_dtype_size((ocltk_dtype)9) == 0,
        "dtype names and sizes");
  CHECK(strcmp(ocltk_status_string(OCLTK_UNSUPPORTED), "unsupported") == 0, "status names");
  CHECK(capi_from_cxx(), "the C API called from C++: %s", ocltk_last_error());

  EXPECT_STATUS(ocltk_runtime_open(NULL, NULL, &opened), OCLTK_SUCCESS, "");
  if (!opened) return 1;
  printf("test_capi: device %s\n", ocltk_runtime_device_name(opened));

  /* The test's own context and queue on the same device, wrapped: shared, not copied. */
  cl.device = ocltk_runtime_device(opened);
  cl.context = clCreateContext(NULL, 1, &cl.device, NULL, NULL, &err);
  CL_OK(err);
  cl.queue = clCreateCommandQueue(cl.context, cl.device, 0, &err);
  CL_OK(err);
  EXPECT_STATUS(ocltk_runtime_wrap(cl.context, cl.device, cl.queue, NULL, &wrapped), OCLTK_SUCCESS, "");
  if (!wrapped) return 1;
  CHECK(ocltk_runtime_context(wrapped) == cl.context && ocltk_runtime_queue(wrapped) == cl.queue &&
            ocltk_runtime_device(wrapped) == cl.device,
        "the wrapped runtime does not hold the caller's objects");

  test_gemm(wrapped, &cl);
  {
    /* The opened runtime, its own context, one case. */
    Cl own;
    const GemmCase t = {9, 12, 40, 1, 41, 0, 0, 0, 0, 1.5f, 0};
    own.context = ocltk_runtime_context(opened);
    own.device = cl.device;
    own.queue = ocltk_runtime_queue(opened);
    check_gemm(opened, own.context, NULL, &t, 0);
  }
  EXPECT_STATUS(ocltk_last_choice(wrapped, &choice), OCLTK_SUCCESS, "");
  CHECK(choice && strcmp(ocltk_choice_kernel(choice), "gemm_nt") == 0, "last choice %s",
        choice ? ocltk_choice_describe(choice) : "NULL");
  ocltk_choice_release(choice);
  EXPECT_STATUS(ocltk_choose_gemm_nt(wrapped, OCLTK_F32, OCLTK_F32, 1, 4096, 4096, &choice), OCLTK_SUCCESS, "");
  if (choice) {
    size_t i;
    CHECK(strcmp(ocltk_choice_shape_class(choice), "gemv") == 0 && ocltk_choice_algorithm(choice)[0] &&
              strstr(ocltk_choice_describe(choice), "gemm_nt/gemv") != NULL && ocltk_choice_source(choice)[0] &&
              ocltk_choice_match(choice)[0],
          "choose_gemm_nt: %s", ocltk_choice_describe(choice));
    for (i = 0; i < ocltk_choice_param_count(choice); ++i)
      CHECK(ocltk_choice_param_name(choice, i) != NULL &&
                strstr(ocltk_choice_describe(choice), ocltk_choice_param_name(choice, i)) != NULL,
            "parameter %zu", i);
    CHECK(ocltk_choice_param_name(choice, ocltk_choice_param_count(choice)) == NULL, "a parameter past the end");
    ocltk_choice_release(choice);
  }
  {
    const Nf4Case plain = {3, 24, 64, 64, 0, 0, 0}, window = {3, 10, 40, 32, 5, 3, 2};
    test_nf4(wrapped, &cl, &plain);
    test_nf4(wrapped, &cl, &window);
  }
  test_quantize();
  test_route(wrapped, &cl);
  test_gemm_half(wrapped, &cl);
  test_lora(wrapped, &cl);
  test_errors(wrapped, &cl);
  test_lora_errors(wrapped, &cl);
  test_thread_local_error();

  ocltk_runtime_release(wrapped);
  ocltk_runtime_release(opened);
  ocltk_runtime_release(NULL);
  /* The caller's objects outlive the runtime that wrapped them. */
  CHECK(clFinish(cl.queue) == CL_SUCCESS, "the caller's queue died with the runtime");
  clReleaseCommandQueue(cl.queue);
  clReleaseContext(cl.context);
  printf("test_capi: %d checks, %d failed\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
