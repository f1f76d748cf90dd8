/* The C API's gemm_nt in the 16-bit types and its LoRA operations (apply, shrink, expand, the
 * segments built from unsorted rows, the choices) from C, against a double reference on fresh
 * random data, and their refusals. Part of test_capi (test_capi.c holds main and the helpers).
 *
 * Inputs are exact_value()s, exact in every type, so the reference sees what the device reads.
 * The problems sit in few shape classes (decode, multi_decode, small_batch) so that PoCL builds
 * few programs; test_python and example_rust use the same ones from the same kernel cache. */
#include <math.h>

#include "capi_test.h"

/* ---- Error bounds (docs/verification.md, docs/lora.md) ---------------------------------- */

static const double kU = 5.9604644775390625e-8; /* 2^-24 */

static double gamma_of(long n) { return (double)n * kU / (1.0 - (double)n * kU); }

/* One rounding of a result to `type` on top of an f32 bound (none for f32). */
static double rounded(double f32_bound, double ref, ocltk_dtype type) {
  if (type == OCLTK_F32) return f32_bound;
  return f32_bound + (type == OCLTK_F16 ? 1.0 / 2048 : 1.0 / 256) * (fabs(ref) + f32_bound) +
         (type == OCLTK_F16 ? 2.98023223876953125e-8 : 0.0); /* f16: half its smallest subnormal */
}

/* gemm_nt_error_bound: a dot of length k, the accumulate add, the store's rounding. */
static double gemm_bound(long k, double abs_dot, double c_old, double ref, ocltk_dtype out) {
  return rounded(gamma_of(k) * abs_dot + kU * fabs(c_old) + 1e-30, ref, out);
}

/* lora_error_bound: the shrink's dot of length k carried through |B|, the expand's of length
 * rank, the scale, the accumulate add, the store's rounding. k 0: T given exactly (expand). */
static double lora_bound(long k, long rank, double y_abs, double y_old, double ref, ocltk_dtype out) {
  const double f32 = (gamma_of(k) + gamma_of(rank + 2) * (1 + gamma_of(k))) * y_abs + 2 * kU * fabs(y_old) + 1e-30;
  return rounded(f32, ref, out);
}

static int within(double got, double want, double bound) { return fabs(got - want) <= bound * 1.0000001; }

/* A host array of n elements of `type`, each exact_value(). */
static void* random_elements(ocltk_dtype type, size_t n) {
  void* v = malloc(n * ocltk_dtype_size(type) + 4);
  size_t i;
  for (i = 0; i < n; ++i) put_element(type, v, i, exact_value());
  return v;
}

static void* copy_of(const void* v, size_t bytes) {
  void* c = malloc(bytes + 4);
  memcpy(c, v, bytes);
  return c;
}

/* ---- gemm_nt in 16-bit types ------------------------------------------------------------ */

typedef struct {
  ocltk_dtype in, out;
  long m, n, k;
  size_t a_off, lda, b_off, ldb, c_off, ldc; /* ld 0: packed */
  float alpha;
  int accumulate;
} HalfGemmCase;

static void check_gemm_half(ocltk_runtime* rt, const Cl* cl, const HalfGemmCase* t) {
  const size_t lda = t->lda ? t->lda : (size_t)t->k, ldb = t->ldb ? t->ldb : (size_t)t->k,
               ldc = t->ldc ? t->ldc : (size_t)t->n;
  const size_t na = t->a_off + (size_t)(t->m - 1) * lda + (size_t)t->k + 2,
               nb = t->b_off + (size_t)(t->n - 1) * ldb + (size_t)t->k + 2,
               nc = t->c_off + (size_t)(t->m - 1) * ldc + (size_t)t->n + 2;
  const size_t in_size = ocltk_dtype_size(t->in), out_size = ocltk_dtype_size(t->out);
  void *a = random_elements(t->in, na), *b = random_elements(t->in, nb), *c0 = random_elements(t->out, nc),
       *c = malloc(nc * out_size);
  cl_mem da, db, dc;
  cl_event done = NULL;
  long i, j, kk;
  size_t x;
  int bad = 0, outside = 0;
  if (!t->accumulate)
    for (i = 0; i < t->m; ++i)
      for (j = 0; j < t->n; ++j) poison_element(t->out, c0, t->c_off + (size_t)i * ldc + (size_t)j);
  da = buffer(cl->context, na * in_size, a);
  db = buffer(cl->context, nb * in_size, b);
  dc = buffer(cl->context, nc * out_size, c0);
  EXPECT_STATUS((t->accumulate ? ocltk_gemm_nt_accum : ocltk_gemm_nt)(rt, t->in, t->out, t->m, t->n, t->k, t->alpha, da,
                                                                      t->a_off, t->lda, db, t->b_off, t->ldb, dc,
                                                                      t->c_off, t->ldc, NULL, 0, NULL, &done),
                OCLTK_SUCCESS, "");
  CHECK(done != NULL, "no out-event");
  finish_event(&done);
  download(cl->queue, dc, nc * out_size, c);
  for (x = 0; x < nc; ++x) {
    const size_t r = x < t->c_off ? (size_t)-1 : (x - t->c_off) / ldc, col = x < t->c_off ? 0 : (x - t->c_off) % ldc;
    if (r < (size_t)t->m && col < (size_t)t->n) continue;
    outside += !same_element(t->out, c, c0, x);
  }
  CHECK(outside == 0, "gemm_nt %s->%s: %d elements outside C written", ocltk_dtype_name(t->in),
        ocltk_dtype_name(t->out), outside);
  for (i = 0; i < t->m; ++i)
    for (j = 0; j < t->n; ++j) {
      const size_t at = t->c_off + (size_t)i * ldc + (size_t)j;
      const double old = t->accumulate ? get_element(t->out, c0, at) : 0;
      double dot = 0, abs_dot = 0, want;
      for (kk = 0; kk < t->k; ++kk) {
        const double p = (double)get_element(t->in, a, t->a_off + (size_t)i * lda + (size_t)kk) *
                         get_element(t->in, b, t->b_off + (size_t)j * ldb + (size_t)kk);
        dot += p;
        abs_dot += fabs(p);
      }
      want = t->alpha * dot + old;
      if (!within(get_element(t->out, c, at), want, gemm_bound(t->k, fabs(t->alpha) * abs_dot, old, want, t->out)) &&
          bad++ < 3)
        fprintf(stderr, "  C[%ld,%ld] = %.9g, reference %.9g\n", i, j, get_element(t->out, c, at), want);
    }
  CHECK(bad == 0, "gemm_nt %s->%s %ldx%ldx%ld (accumulate %d): %d elements off", ocltk_dtype_name(t->in),
        ocltk_dtype_name(t->out), t->m, t->n, t->k, t->accumulate, bad);
  clReleaseMemObject(da);
  clReleaseMemObject(db);
  clReleaseMemObject(dc);
  free(a);
  free(b);
  free(c0);
  free(c);
}

void test_gemm_half(ocltk_runtime* rt, const Cl* cl) {
  /* Each pair of types the C++ API adds (f16 and bf16 into their own type, a 16-bit A and B
   * into f32), in the gemv and LoRA expand classes, odd sizes, offsets and padded leading
   * dimensions, overwrite and accumulate. Their built-in choices are points test_gemm_nt
   * builds in the same types, so in a ctest run PoCL's cache has them. */
  const HalfGemmCase cases[] = {
      {OCLTK_F16, OCLTK_F16, 1, 37, 40, 0, 0, 0, 0, 0, 0, 1.0f, 0},
      {OCLTK_F16, OCLTK_F16, 1, 20, 33, 3, 0, 1, 35, 2, 0, -2.0f, 1},
      {OCLTK_BF16, OCLTK_BF16, 5, 65, 16, 3, 19, 1, 17, 2, 70, -0.5f, 1},
      {OCLTK_BF16, OCLTK_BF16, 3, 70, 9, 0, 0, 0, 0, 0, 0, 0.25f, 0},
      {OCLTK_BF16, OCLTK_F32, 1, 16, 33, 5, 40, 3, 0, 2, 19, 0.75f, 0},
      {OCLTK_BF16, OCLTK_F32, 1, 12, 40, 0, 0, 0, 0, 0, 0, 2.0f, 1},
  };
  ocltk_choice* choice = NULL;
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) check_gemm_half(rt, cl, &cases[i]);
  EXPECT_STATUS(ocltk_last_choice(rt, &choice), OCLTK_SUCCESS, "");
  CHECK(choice && strcmp(ocltk_choice_kernel(choice), "gemm_nt") == 0 &&
            strcmp(ocltk_choice_shape_class(choice), "gemv_half") == 0,
        "last choice after a 16-bit gemm_nt: %s", choice ? ocltk_choice_describe(choice) : "NULL");
  ocltk_choice_release(choice);
  choice = NULL;
  EXPECT_STATUS(ocltk_choose_gemm_nt(rt, OCLTK_BF16, OCLTK_BF16, 1, 4096, 4096, &choice), OCLTK_SUCCESS, "");
  CHECK(choice && strcmp(ocltk_choice_shape_class(choice), "gemv_half") == 0, "choose bf16 gemv: %s",
        choice ? ocltk_choice_describe(choice) : "NULL");
  ocltk_choice_release(choice);
  choice = NULL;
  EXPECT_STATUS(ocltk_choose_gemm_nt(rt, OCLTK_F16, OCLTK_F32, 64, 4096, 16, &choice), OCLTK_SUCCESS, "");
  CHECK(choice && strcmp(ocltk_choice_shape_class(choice), "lora_expand_half") == 0, "choose f16 expand: %s",
        choice ? ocltk_choice_describe(choice) : "NULL");
  ocltk_choice_release(choice);
}

/* ---- LoRA ------------------------------------------------------------------------------ */

/* A problem with its segments and the layout of its operands. pad: elements added to every
 * leading dimension, before every operand (offset) and between adapters (stride). */
typedef struct {
  long m, n, k, adapters, max_rank;
  int segments; /* S; 0: no segment buffers (all rows on adapter 0) */
  const cl_uint* offsets;
  const int* segment_adapters;
  const int* ranks;    /* NULL: all R */
  const float* scales; /* NULL: none */
  float scale;
  int accumulate, validate;
  size_t pad;
  ocltk_dtype type;
} LoraCase;

/* The operands of one case on the host and the device, in the case's layout. */
typedef struct {
  size_t ldx, lda, a_stride, ldb, b_stride, ldy, ldt;
  size_t nx, na, nb, ny, nt;
  void *x, *a, *b, *y0;
  float* t0;
  cl_mem dx, da, db, dy, dt, d_offsets, d_segs, d_ranks, d_scales;
  ocltk_lora_adapters adapters;
  ocltk_lora_segments segments;
} LoraData;

static void lora_data(const Cl* cl, const LoraCase* c, LoraData* d) {
  const size_t pad = c->pad, es = ocltk_dtype_size(c->type);
  size_t i;
  d->ldx = (size_t)c->k + pad;
  d->lda = (size_t)c->k + pad;
  d->a_stride = (size_t)c->max_rank * d->lda + pad;
  d->ldb = (size_t)c->max_rank + pad;
  d->b_stride = (size_t)c->n * d->ldb + pad;
  d->ldy = (size_t)c->n + pad;
  d->ldt = (size_t)c->max_rank + pad;
  d->nx = pad + (size_t)c->m * d->ldx + 1;
  d->na = pad + (size_t)c->adapters * d->a_stride;
  d->nb = pad + (size_t)c->adapters * d->b_stride;
  d->ny = pad + (size_t)c->m * d->ldy + 1;
  d->nt = pad + (size_t)c->m * d->ldt + 1;
  d->x = random_elements(c->type, d->nx);
  d->a = random_elements(c->type, d->na);
  d->b = random_elements(c->type, d->nb);
  d->y0 = random_elements(c->type, d->ny);
  d->t0 = malloc(d->nt * sizeof *d->t0);
  for (i = 0; i < d->nt; ++i) d->t0[i] = 12345.0f;
  d->dx = buffer(cl->context, d->nx * es, d->x);
  d->da = buffer(cl->context, d->na * es, d->a);
  d->db = buffer(cl->context, d->nb * es, d->b);
  d->dy = NULL; /* per launch: lora_poisoned_y */
  d->dt = NULL;
  d->d_offsets = c->segments ? buffer(cl->context, (size_t)(c->segments + 1) * 4, c->offsets) : NULL;
  d->d_segs = c->segments ? buffer(cl->context, (size_t)c->segments * 4, c->segment_adapters) : NULL;
  d->d_ranks = c->ranks ? buffer(cl->context, (size_t)c->adapters * 4, c->ranks) : NULL;
  d->d_scales = c->scales ? buffer(cl->context, (size_t)c->adapters * 4, c->scales) : NULL;
  d->adapters.adapters = c->adapters;
  d->adapters.max_rank = c->max_rank;
  d->adapters.a = d->da;
  d->adapters.a_offset = pad;
  d->adapters.lda = d->lda;
  d->adapters.a_stride = d->a_stride;
  d->adapters.b = d->db;
  d->adapters.b_offset = pad;
  d->adapters.ldb = d->ldb;
  d->adapters.b_stride = d->b_stride;
  d->adapters.ranks = d->d_ranks;
  d->adapters.scales = d->d_scales;
  d->segments.count = c->segments;
  d->segments.offsets = d->d_offsets;
  d->segments.segment_adapters = d->d_segs;
}

static void release_mem(cl_mem* m) {
  if (*m) clReleaseMemObject(*m);
  *m = NULL;
}

static void lora_release(LoraData* d) {
  release_mem(&d->dx);
  release_mem(&d->da);
  release_mem(&d->db);
  release_mem(&d->dy);
  release_mem(&d->dt);
  release_mem(&d->d_offsets);
  release_mem(&d->d_segs);
  release_mem(&d->d_ranks);
  release_mem(&d->d_scales);
  free(d->x);
  free(d->a);
  free(d->b);
  free(d->y0);
  free(d->t0);
}

/* Each row's adapter (-1: none) from the case's segments. */
static void row_adapters_of(const LoraCase* c, int* out) {
  long r;
  int s;
  for (r = 0; r < c->m; ++r) out[r] = c->segments ? -1 : 0;
  for (s = 0; s < c->segments; ++s)
    for (r = (long)c->offsets[s]; r < (long)c->offsets[s + 1]; ++r) out[r] = c->segment_adapters[s];
}

static long rank_of(const LoraCase* c, int adapter) { return c->ranks ? c->ranks[adapter] : c->max_rank; }

/* T in double and |T|'s magnitude (Σ_k |x·a|) for row r, j < its rank. */
static void shrink_row(const LoraCase* c, const LoraData* d, long r, int adapter, double* t, double* t_abs) {
  long j, kk;
  for (j = 0; j < rank_of(c, adapter); ++j) {
    double sum = 0, abs = 0;
    for (kk = 0; kk < c->k; ++kk) {
      const double p =
          (double)get_element(c->type, d->x, c->pad + (size_t)r * d->ldx + (size_t)kk) *
          get_element(c->type, d->a, c->pad + (size_t)adapter * d->a_stride + (size_t)j * d->lda + (size_t)kk);
      sum += p;
      abs += fabs(p);
    }
    t[j] = sum;
    t_abs[j] = abs;
  }
}

/* Checks Y (y, downloaded) after an apply (k > 0: T from X and A) or an expand (k = 0: T from
 * t_given, f32 M x ldt at offset pad) against the reference; every element outside Y's M x N
 * unchanged. Returns the number of bad elements. */
static int check_lora_y(const LoraCase* c, const LoraData* d, const void* y, const float* t_given, const char* what) {
  int* row_adapter = malloc((size_t)c->m * sizeof *row_adapter);
  double *t = malloc((size_t)c->max_rank * sizeof *t), *t_abs = malloc((size_t)c->max_rank * sizeof *t_abs);
  long r, n, j;
  size_t x;
  int bad = 0;
  row_adapters_of(c, row_adapter);
  for (x = 0; x < d->ny; ++x) {
    const size_t row = x < c->pad ? (size_t)-1 : (x - c->pad) / d->ldy, col = x < c->pad ? 0 : (x - c->pad) % d->ldy;
    if (row < (size_t)c->m && col < (size_t)c->n) continue;
    if (!same_element(c->type, y, d->y0, x) && bad++ < 3) fprintf(stderr, "  %s: Y's element %zu written\n", what, x);
  }
  for (r = 0; r < c->m; ++r) {
    const int ad = row_adapter[r];
    const long rank = ad < 0 ? 0 : rank_of(c, ad);
    const double s = ad < 0 ? 0 : (double)c->scale * (c->scales ? c->scales[ad] : 1.0);
    if (ad >= 0) {
      if (t_given)
        for (j = 0; j < rank; ++j) {
          t[j] = t_given[c->pad + (size_t)r * d->ldt + (size_t)j];
          t_abs[j] = fabs(t[j]);
        }
      else
        shrink_row(c, d, r, ad, t, t_abs);
    }
    for (n = 0; n < c->n; ++n) {
      const size_t at = c->pad + (size_t)r * d->ldy + (size_t)n;
      const double old = c->accumulate ? get_element(c->type, d->y0, at) : 0;
      double sum = 0, abs = 0, want;
      for (j = 0; j < rank; ++j) {
        const double bv =
            get_element(c->type, d->b, c->pad + (size_t)ad * d->b_stride + (size_t)n * d->ldb + (size_t)j);
        sum += t[j] * bv;
        abs += t_abs[j] * fabs(bv);
      }
      want = s * sum + old;
      if (!within(get_element(c->type, y, at), want,
                  lora_bound(t_given ? 0 : c->k, rank, fabs(s) * abs, old, want, c->type)) &&
          bad++ < 3)
        fprintf(stderr, "  %s: Y[%ld,%ld] = %.9g, reference %.9g (adapter %d)\n", what, r, n,
                get_element(c->type, y, at), want, ad);
    }
  }
  free(row_adapter);
  free(t);
  free(t_abs);
  return bad;
}

/* Y on the device: the case's y0 with Y's M x N poisoned (an element left unwritten fails)
 * unless accumulating. */
static cl_mem poisoned_y(const Cl* cl, const LoraCase* c, const LoraData* d) {
  const size_t es = ocltk_dtype_size(c->type);
  void* y0 = copy_of(d->y0, d->ny * es);
  cl_mem dy;
  long r, n;
  if (!c->accumulate)
    for (r = 0; r < c->m; ++r)
      for (n = 0; n < c->n; ++n) poison_element(c->type, y0, c->pad + (size_t)r * d->ldy + (size_t)n);
  dy = buffer(cl->context, d->ny * es, y0);
  free(y0);
  return dy;
}

/* One apply: on `queue` (NULL: the runtime's), gated behind a user event when `gated` (it must
 * not run before the event is set), through a caller's intermediate when `with_t`. */
static void check_lora_apply(ocltk_runtime* rt, const Cl* cl, const LoraCase* c, cl_command_queue queue, int gated,
                             int with_t) {
  LoraData d;
  void* y;
  cl_event done = NULL, gate = NULL;
  cl_int err;
  ocltk_choice* choice = NULL;
  int bad;
  char what[160];
  lora_data(cl, c, &d);
  d.dy = poisoned_y(cl, c, &d);
  if (with_t) d.dt = buffer(cl->context, d.nt * 4, d.t0);
  if (gated) {
    gate = clCreateUserEvent(cl->context, &err);
    CL_OK(err);
  }
  sprintf(what, "lora_apply %s M=%ld N=%ld K=%ld L=%ld R=%ld S=%d%s%s%s pad %zu", ocltk_dtype_name(c->type), c->m, c->n,
          c->k, c->adapters, c->max_rank, c->segments, c->accumulate ? " accumulate" : "",
          c->validate ? " validate" : "", with_t ? " T given" : "", c->pad);
  EXPECT_STATUS(ocltk_lora_apply(rt, c->type, c->m, c->n, c->k, d.dx, c->pad, d.ldx, &d.adapters,
                                 c->segments ? &d.segments : NULL, c->scale, c->accumulate, d.dy, c->pad, d.ldy,
                                 with_t ? d.dt : NULL, c->pad, d.ldt, c->validate, queue, gated ? 1 : 0,
                                 gated ? &gate : NULL, &done),
                OCLTK_SUCCESS, "");
  CHECK(done != NULL, "%s: no out-event", what);
  if (gated && done) {
    cl_int state = CL_COMPLETE;
    CL_OK(clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL));
    CHECK(state != CL_COMPLETE, "%s: the launch completed before its wait list's user event was set", what);
    CL_OK(clSetUserEventStatus(gate, CL_COMPLETE));
  }
  finish_event(&done);
  y = malloc(d.ny * ocltk_dtype_size(c->type) + 4);
  download(cl->queue, d.dy, d.ny * ocltk_dtype_size(c->type), y);
  bad = check_lora_y(c, &d, y, NULL, what);
  CHECK(bad == 0, "%s: %d elements off", what, bad);
  EXPECT_STATUS(ocltk_last_choice(rt, &choice), OCLTK_SUCCESS, "");
  CHECK(choice && strcmp(ocltk_choice_kernel(choice), "lora_apply") == 0, "%s: last choice %s", what,
        choice ? ocltk_choice_describe(choice) : "NULL");
  if (with_t && choice && strcmp(ocltk_choice_algorithm(choice), "split") == 0) {
    /* The split algorithm ran through the caller's T: its rows of adapters hold X·Aᵀ. */
    float* t = malloc(d.nt * sizeof *t);
    int* row_adapter = malloc((size_t)c->m * sizeof *row_adapter);
    double ref[64], ref_abs[64];
    long r, j;
    int t_bad = 0;
    download(cl->queue, d.dt, d.nt * 4, t);
    row_adapters_of(c, row_adapter);
    for (r = 0; r < c->m; ++r) {
      if (row_adapter[r] < 0) continue;
      shrink_row(c, &d, r, row_adapter[r], ref, ref_abs);
      for (j = 0; j < rank_of(c, row_adapter[r]); ++j)
        t_bad +=
            !within(t[c->pad + (size_t)r * d.ldt + (size_t)j], ref[j], gemm_bound(c->k, ref_abs[j], 0, 0, OCLTK_F32));
    }
    CHECK(t_bad == 0, "%s: %d elements of the caller's intermediate off", what, t_bad);
    free(t);
    free(row_adapter);
  }
  ocltk_choice_release(choice);
  if (gate) clReleaseEvent(gate);
  free(y);
  lora_release(&d);
}

/* Shrink into a T with padding (columns past a rank and rows of -1 segments left alone), then
 * expand from a T of fresh values, each against the reference. */
static void check_lora_shrink_expand(ocltk_runtime* rt, const Cl* cl, const LoraCase* c) {
  LoraData d;
  float* t = NULL;
  void* y;
  int* row_adapter = malloc((size_t)c->m * sizeof *row_adapter);
  double ref[64], ref_abs[64];
  cl_event shrunk = NULL, expanded = NULL;
  long r, j;
  size_t x;
  int bad = 0;
  char what[128];
  lora_data(cl, c, &d);
  row_adapters_of(c, row_adapter);
  for (r = 0; r < c->m; ++r)
    if (row_adapter[r] >= 0)
      for (j = 0; j < rank_of(c, row_adapter[r]); ++j) d.t0[c->pad + (size_t)r * d.ldt + (size_t)j] = (float)NAN;
  d.dt = buffer(cl->context, d.nt * 4, d.t0);
  EXPECT_STATUS(
      ocltk_lora_shrink(rt, c->type, c->m, c->k, d.dx, c->pad, d.ldx, &d.adapters, c->segments ? &d.segments : NULL,
                        d.dt, c->pad, d.ldt, c->validate, NULL, 0, NULL, &shrunk),
      OCLTK_SUCCESS, "");
  CHECK(shrunk != NULL, "shrink: no out-event");
  finish_event(&shrunk);
  t = malloc(d.nt * sizeof *t);
  download(cl->queue, d.dt, d.nt * 4, t);
  for (x = 0; x < d.nt; ++x) { /* the elements the shrink writes are NaN in t0; the rest must survive */
    if (d.t0[x] == d.t0[x] && bits_of(t[x]) != bits_of(d.t0[x]) && bad++ < 3)
      fprintf(stderr, "  shrink: T's element %zu written (%g)\n", x, t[x]);
  }
  for (r = 0; r < c->m; ++r) {
    if (row_adapter[r] < 0) continue;
    shrink_row(c, &d, r, row_adapter[r], ref, ref_abs);
    for (j = 0; j < rank_of(c, row_adapter[r]); ++j)
      if (!within(t[c->pad + (size_t)r * d.ldt + (size_t)j], ref[j], gemm_bound(c->k, ref_abs[j], 0, 0, OCLTK_F32)) &&
          bad++ < 3)
        fprintf(stderr, "  shrink: T[%ld,%ld] = %.9g, reference %.9g\n", r, j, t[c->pad + (size_t)r * d.ldt + j],
                ref[j]);
  }
  CHECK(bad == 0, "lora_shrink %s M=%ld K=%ld L=%ld R=%ld S=%d: %d elements off", ocltk_dtype_name(c->type), c->m, c->k,
        c->adapters, c->max_rank, c->segments, bad);

  /* Expand from fresh f32 values of T (the whole buffer: rows and columns it must not read
   * included), waiting on an event of the caller's. */
  for (x = 0; x < d.nt; ++x) t[x] = (float)uniform();
  release_mem(&d.dt);
  d.dt = buffer(cl->context, d.nt * 4, t);
  CL_OK(clEnqueueMarkerWithWaitList(cl->queue, 0, NULL, &shrunk));
  d.dy = poisoned_y(cl, c, &d);
  EXPECT_STATUS(
      ocltk_lora_expand(rt, c->type, c->m, c->n, d.dt, c->pad, d.ldt, &d.adapters, c->segments ? &d.segments : NULL,
                        c->scale, c->accumulate, d.dy, c->pad, d.ldy, c->validate, NULL, 1, &shrunk, &expanded),
      OCLTK_SUCCESS, "");
  CHECK(expanded != NULL, "expand: no out-event");
  finish_event(&expanded);
  clReleaseEvent(shrunk);
  y = malloc(d.ny * ocltk_dtype_size(c->type) + 4);
  download(cl->queue, d.dy, d.ny * ocltk_dtype_size(c->type), y);
  sprintf(what, "lora_expand %s M=%ld N=%ld L=%ld R=%ld S=%d", ocltk_dtype_name(c->type), c->m, c->n, c->adapters,
          c->max_rank, c->segments);
  bad = check_lora_y(c, &d, y, t, what);
  CHECK(bad == 0, "%s: %d elements off", what, bad);
  free(y);
  free(t);
  free(row_adapter);
  lora_release(&d);
}

/* Unsorted rows with per-row adapter ids grouped on the device, X gathered from a slice of a
 * wider matrix, Y gathered, applied on the grouped rows, and Y scattered back into its slice:
 * each step waiting on the one before through the wait lists. */
static void check_lora_grouped(ocltk_runtime* rt, const Cl* cl, ocltk_dtype type) {
  enum { M = 11, L = 3, K = 24, N = 20, R = 5, PAD = 3 };
  const int ids[M] = {2, -1, 0, 2, 7 /* outside [0, L): none */, 1, 0, -1, 2, 1, 0};
  const int ranks[L] = {5, 2, 4};
  const float scales[L] = {0.5f, -1.25f, 2.0f};
  const size_t es = ocltk_dtype_size(type), ldx = K + PAD, ldy = N + PAD;
  cl_uint offsets[L + 2], want_offsets[L + 2] = {0}, row_index[M], want_index[M];
  int segs[L + 1], r, s, bad = 0;
  void *x = random_elements(type, PAD + M * ldx), *y0 = random_elements(type, PAD + M * ldy),
       *y = malloc((PAD + M * ldy) * es);
  cl_mem d_ids = buffer(cl->context, sizeof ids, ids), d_off = buffer(cl->context, sizeof offsets, NULL),
         d_segs = buffer(cl->context, sizeof segs, NULL), d_index = buffer(cl->context, sizeof row_index, NULL),
         dx = buffer(cl->context, (PAD + M * ldx) * es, x), dy = buffer(cl->context, (PAD + M * ldy) * es, y0),
         dxg = buffer(cl->context, M * K * es, NULL), dyg = buffer(cl->context, M * N * es, NULL);
  cl_event grouped = NULL, gathered[2] = {NULL, NULL}, applied = NULL, scattered = NULL;
  LoraCase c;
  LoraData d;
  cl_uint next[L + 1];

  /* The grouping on the host: adapters 0 .. L-1 in order, then the rows of none. */
  for (r = 0; r < M; ++r) ++want_offsets[(ids[r] >= 0 && ids[r] < L ? ids[r] : L) + 1];
  for (s = 0; s <= L; ++s) want_offsets[s + 1] += want_offsets[s];
  for (s = 0; s <= L; ++s) next[s] = want_offsets[s];
  for (r = 0; r < M; ++r) want_index[next[ids[r] >= 0 && ids[r] < L ? ids[r] : L]++] = (cl_uint)r;

  EXPECT_STATUS(ocltk_lora_group_rows(rt, M, L, d_ids, d_off, d_segs, d_index, NULL, 0, NULL, &grouped), OCLTK_SUCCESS,
                "");
  CHECK(grouped != NULL, "group: no out-event");
  EXPECT_STATUS(
      ocltk_lora_gather_rows(rt, type, M, K, d_index, dx, PAD, ldx, dxg, 0, 0, NULL, 1, &grouped, &gathered[0]),
      OCLTK_SUCCESS, "");
  EXPECT_STATUS(
      ocltk_lora_gather_rows(rt, type, M, N, d_index, dy, PAD, ldy, dyg, 0, 0, NULL, 1, &grouped, &gathered[1]),
      OCLTK_SUCCESS, "");
  CHECK(gathered[0] != NULL && gathered[1] != NULL, "gather: no out-event");
  download(cl->queue, d_off, sizeof offsets, offsets);
  download(cl->queue, d_segs, sizeof segs, segs);
  download(cl->queue, d_index, sizeof row_index, row_index);
  for (s = 0; s < L + 2; ++s) bad += offsets[s] != want_offsets[s];
  for (s = 0; s <= L; ++s) bad += segs[s] != (s < L ? s : -1);
  for (r = 0; r < M; ++r) bad += row_index[r] != want_index[r];
  CHECK(bad == 0, "lora_group_rows: %d entries differ from the host's grouping", bad);

  /* The apply on the grouped rows: a case whose data are the grouped X and Y (host copies). */
  memset(&c, 0, sizeof c);
  c.m = M;
  c.n = N;
  c.k = K;
  c.adapters = L;
  c.max_rank = R;
  c.segments = L + 1;
  c.offsets = want_offsets;
  c.segment_adapters = segs;
  c.ranks = ranks;
  c.scales = scales;
  c.scale = 0.75f;
  c.accumulate = 1;
  c.type = type;
  lora_data(cl, &c, &d);
  for (r = 0; r < M; ++r) { /* the reference's grouped X and Y */
    memcpy((char*)d.x + (size_t)r * d.ldx * es, (char*)x + (PAD + want_index[r] * ldx) * es, K * es);
    memcpy((char*)d.y0 + (size_t)r * d.ldy * es, (char*)y0 + (PAD + want_index[r] * ldy) * es, N * es);
  }
  EXPECT_STATUS(ocltk_lora_apply(rt, type, M, N, K, dxg, 0, 0, &d.adapters, &d.segments, c.scale, 1, dyg, 0, 0, NULL, 0,
                                 0, 0, NULL, 2, gathered, &applied),
                OCLTK_SUCCESS, "");
  EXPECT_STATUS(
      ocltk_lora_scatter_rows(rt, type, M, N, d_index, dyg, 0, 0, dy, PAD, ldy, NULL, 1, &applied, &scattered),
      OCLTK_SUCCESS, "");
  CHECK(scattered != NULL, "scatter: no out-event");
  finish_event(&scattered);
  download(cl->queue, dy, (PAD + M * ldy) * es, y);
  {
    /* Back in the caller's order: the grouped result's row q is the caller's row want_index[q]. */
    void* yg = copy_of(d.y0, d.ny * es);
    size_t x_at;
    for (r = 0; r < M; ++r) memcpy((char*)yg + (size_t)r * N * es, (char*)y + (PAD + want_index[r] * ldy) * es, N * es);
    bad = check_lora_y(&c, &d, yg, NULL, "grouped lora_apply");
    CHECK(bad == 0, "grouped lora_apply %s: %d elements off", ocltk_dtype_name(type), bad);
    bad = 0;
    for (x_at = 0; x_at < PAD + M * ldy; ++x_at) /* the slice's padding */
      if ((x_at < PAD || (x_at - PAD) % ldy >= N) && !same_element(type, y, y0, x_at)) ++bad;
    CHECK(bad == 0, "scatter wrote %d elements outside Y's slice", bad);
    free(yg);
  }
  {
    /* No rows: nothing to move, still an event when asked. */
    cl_event none = NULL;
    EXPECT_STATUS(ocltk_lora_gather_rows(rt, type, 0, K, NULL, NULL, 0, 0, NULL, 0, 0, NULL, 0, NULL, &none),
                  OCLTK_SUCCESS, "");
    CHECK(none != NULL, "an empty gather gave no event");
    finish_event(&none);
  }
  finish_event(&grouped);
  finish_event(&gathered[0]);
  finish_event(&gathered[1]);
  finish_event(&applied);
  lora_release(&d);
  release_mem(&d_ids);
  release_mem(&d_off);
  release_mem(&d_segs);
  release_mem(&d_index);
  release_mem(&dx);
  release_mem(&dy);
  release_mem(&dxg);
  release_mem(&dyg);
  free(x);
  free(y0);
  free(y);
}

static void check_choice(ocltk_runtime* rt, ocltk_lora_operation op, ocltk_dtype type, long m, long adapters,
                         long segments, const char* kernel, const char* shape_class) {
  ocltk_choice* choice = NULL;
  EXPECT_STATUS(ocltk_choose_lora(rt, op, type, m, 4096, 4096, adapters, 16, segments, &choice), OCLTK_SUCCESS, "");
  CHECK(choice && strcmp(ocltk_choice_kernel(choice), kernel) == 0 &&
            strcmp(ocltk_choice_shape_class(choice), shape_class) == 0 && ocltk_choice_algorithm(choice)[0] != '\0' &&
            ocltk_choice_param_count(choice) > 0,
        "choose_lora %s M=%ld S=%ld: %s (expected %s/%s)", kernel, m, segments,
        choice ? ocltk_choice_describe(choice) : "NULL", kernel, shape_class);
  ocltk_choice_release(choice);
}

void test_lora(ocltk_runtime* rt, const Cl* cl) {
  /* 13 rows in 6 segments: an empty one, a -1 one, adapter 1 on two segments; mixed ranks
   * below R and per-adapter scales (multi_decode). */
  static const cl_uint offsets[] = {0, 3, 3, 6, 8, 11, 13};
  static const int segs[] = {1, 0, -1, 2, 1, 0};
  static const int ranks[] = {7, 3, 1};
  static const float scales[] = {0.5f, -1.5f, 0.25f};
  static const cl_uint offsets2[] = {0, 1, 2};
  static const int segs2[] = {0, -1};
  const LoraCase multi = {13, 37, 33, 3, 7, 6, offsets, segs, ranks, scales, -0.75f, 0, 1, 2, OCLTK_F32};
  const LoraCase single = {3, 40, 65, 1, 9, 0, NULL, NULL, NULL, NULL, 1.25f, 1, 0, 0, OCLTK_F32};
  const LoraCase batch = {37, 24, 20, 1, 16, 0, NULL, NULL, NULL, NULL, 0.5f, 1, 0, 1, OCLTK_F32};
  const LoraCase two = {2, 17, 9, 2, 3, 2, offsets2, segs2, NULL, NULL, 2.0f, 1, 1, 0, OCLTK_F32};
  LoraCase c;
  cl_int err;
  cl_command_queue other = clCreateCommandQueue(cl->context, cl->device, 0, &err);
  int type;
  CL_OK(err);

  /* Many adapters in every element type, overwrite and accumulate, validated and not. */
  for (type = OCLTK_F32; type <= OCLTK_BF16; ++type) {
    c = multi;
    c.type = (ocltk_dtype)type;
    check_lora_apply(rt, cl, &c, NULL, 0, 0);
    c.accumulate = 1;
    c.validate = type != OCLTK_F16;
    check_lora_apply(rt, cl, &c, NULL, 0, 0);
  }
  /* One adapter without segment buffers (decode), on another queue behind a user event. */
  check_lora_apply(rt, cl, &single, NULL, 0, 0);
  check_lora_apply(rt, cl, &single, other, 1, 0);
  check_lora_apply(rt, cl, &two, NULL, 1, 0);
  /* A batch (small_batch): the caller's intermediate. */
  check_lora_apply(rt, cl, &batch, NULL, 0, 1);
  /* Shrink then expand, alone, with segments (f32, and bf16). */
  check_lora_shrink_expand(rt, cl, &multi);
  c = multi;
  c.type = OCLTK_BF16;
  c.accumulate = 1;
  check_lora_shrink_expand(rt, cl, &c);
  check_lora_grouped(rt, cl, OCLTK_F32);
  check_lora_grouped(rt, cl, OCLTK_BF16);

  check_choice(rt, OCLTK_LORA_APPLY, OCLTK_BF16, 4, 1, 0, "lora_apply", "decode");
  check_choice(rt, OCLTK_LORA_APPLY, OCLTK_F32, 16, 8, 8, "lora_apply", "multi_decode");
  check_choice(rt, OCLTK_LORA_SHRINK, OCLTK_F16, 64, 1, 1, "lora_shrink", "small_batch");
  check_choice(rt, OCLTK_LORA_EXPAND, OCLTK_F32, 1024, 4, 4, "lora_expand", "multi_batch");
  check_choice(rt, OCLTK_LORA_APPLY, OCLTK_F32, 4096, 1, 0, "lora_apply", "prefill");
  clReleaseCommandQueue(other);
}

/* ---- Refusals --------------------------------------------------------------------------- */

/* Every refusal of the LoRA operations: the status, a message naming the fault, the out-event
 * NULL and Y (and T) as they were. */
void test_lora_errors(ocltk_runtime* rt, const Cl* cl) {
  enum { M = 6, N = 5, K = 7, L = 2, R = 4, S = 2 };
  const cl_uint good_offsets[] = {0, 2, 6}, from_one[] = {1, 2, 6}, short_end[] = {0, 2, 5}, decreasing[] = {0, 4, 3};
  const int good_segs[] = {1, -1}, below[] = {0, -2}, past[] = {2, 0}, good_ranks[] = {4, 1}, zero_rank[] = {4, 0},
            big_rank[] = {5, 1};
  float x[M * K], a[L * R * K], b[L * N * R], y[M * N], y_after[M * N], t[M * R], t_after[M * R];
  cl_int err;
  cl_context foreign = clCreateContext(NULL, 1, &cl->device, NULL, NULL, &err);
  cl_command_queue foreign_queue;
  cl_mem dx, da, db, dy, dt, small, other, d_off, d_segs, d_ranks, d_scales, d_from_one, d_short_end, d_decreasing,
      d_below, d_past, d_zero_rank, d_big_rank, d_ids, d_index, d_group_off, d_group_segs;
  cl_event ev = (cl_event)1;
  ocltk_lora_adapters ad, bad;
  ocltk_lora_segments sg, bad_sg;
  ocltk_choice* choice = (ocltk_choice*)1;
  size_t i;
  int untouched = 1;
  CL_OK(err);
  foreign_queue = clCreateCommandQueue(foreign, cl->device, 0, &err);
  CL_OK(err);
  for (i = 0; i < sizeof x / 4; ++i) x[i] = (float)uniform();
  for (i = 0; i < sizeof a / 4; ++i) a[i] = (float)uniform();
  for (i = 0; i < sizeof b / 4; ++i) b[i] = (float)uniform();
  for (i = 0; i < sizeof y / 4; ++i) y[i] = (float)uniform();
  for (i = 0; i < sizeof t / 4; ++i) t[i] = (float)uniform();
  dx = buffer(cl->context, sizeof x, x);
  da = buffer(cl->context, sizeof a, a);
  db = buffer(cl->context, sizeof b, b);
  dy = buffer(cl->context, sizeof y, y);
  dt = buffer(cl->context, sizeof t, t);
  small = buffer(cl->context, 16, NULL);
  other = buffer(foreign, sizeof x, x);
  d_off = buffer(cl->context, sizeof good_offsets, good_offsets);
  d_segs = buffer(cl->context, sizeof good_segs, good_segs);
  d_ranks = buffer(cl->context, sizeof good_ranks, good_ranks);
  d_scales = buffer(cl->context, 2 * sizeof(float), y);
  d_from_one = buffer(cl->context, sizeof from_one, from_one);
  d_short_end = buffer(cl->context, sizeof short_end, short_end);
  d_decreasing = buffer(cl->context, sizeof decreasing, decreasing);
  d_below = buffer(cl->context, sizeof below, below);
  d_past = buffer(cl->context, sizeof past, past);
  d_zero_rank = buffer(cl->context, sizeof zero_rank, zero_rank);
  d_big_rank = buffer(cl->context, sizeof big_rank, big_rank);
  d_ids = buffer(cl->context, M * 4, good_segs);
  d_index = buffer(cl->context, M * 4, NULL);
  d_group_off = buffer(cl->context, (L + 2) * 4, NULL);
  d_group_segs = buffer(cl->context, (L + 1) * 4, NULL);
  memset(&ad, 0, sizeof ad);
  ad.adapters = L;
  ad.max_rank = R;
  ad.a = da;
  ad.b = db;
  ad.ranks = d_ranks;
  ad.scales = d_scales;
  sg.count = S;
  sg.offsets = d_off;
  sg.segment_adapters = d_segs;

#define APPLY(rt_, type, m, X, ldx, adapters, segments, Y, validate, queue, nw, wl)                                  \
  ocltk_lora_apply(rt_, type, m, N, K, X, 0, ldx, adapters, segments, 0.5f, 1, Y, 0, 0, NULL, 0, 0, validate, queue, \
                   nw, wl, &ev)
#define REFUSED(call, want, part)                          \
  do {                                                     \
    ev = (cl_event)1;                                      \
    EXPECT_STATUS(call, want, part);                       \
    CHECK(ev == NULL, "%s: out-event not cleared", #call); \
  } while (0)

  REFUSED(APPLY(NULL, OCLTK_F32, M, dx, 0, &ad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "ocltk_lora_apply: runtime is NULL");
  REFUSED(APPLY(rt, (ocltk_dtype)5, M, dx, 0, &ad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "ocltk_lora_apply: dtype = 5 is not an ocltk_dtype");
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, NULL, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "ocltk_lora_apply: adapters is NULL");
  REFUSED(APPLY(rt, OCLTK_F32, 0, dx, 0, &ad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: M = 0 must be at least 1");
  REFUSED(APPLY(rt, OCLTK_F32, M, NULL, 0, &ad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: buffer X is null");
  REFUSED(APPLY(rt, OCLTK_F32, M, other, 0, &ad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: buffer X belongs to another OpenCL context");
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 5, &ad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: the leading dimension of X (5) is smaller than its row length 7");
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 8, &ad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: buffer X holds 168 bytes but needs 188");
  /* 16-bit operands are sized as such: Y of 6 x 5 bf16 fits in 16 bytes no more than in f32. */
  REFUSED(APPLY(rt, OCLTK_BF16, M, dx, 0, &ad, &sg, small, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: buffer Y holds 16 bytes but needs 60");
  bad = ad;
  bad.adapters = 0;
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &bad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: L (adapters) = 0 must be at least 1");
  bad = ad;
  bad.a_stride = R * K - 1;
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &bad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: the stride of A between adapters (27) is smaller than one adapter's 4 rows of 7");
  bad = ad;
  bad.b = small;
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &bad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: buffer B holds 16 bytes but needs 160");
  bad = ad;
  bad.ldb = 3;
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &bad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: the leading dimension of B (3) is smaller than its row length 4");
  bad = ad;
  bad.ranks = d_zero_rank;
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &bad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: ranks[1] = 0 is outside 1 .. R = 4");
  bad.ranks = d_big_rank;
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &bad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: ranks[0] = 5 is outside 1 .. R = 4");
  bad = ad;
  bad.adapters = 5;
  bad.ranks = small;
  bad.a = buffer(cl->context, 5 * R * K * 4, NULL);
  bad.b = buffer(cl->context, 5 * N * R * 4, NULL);
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &bad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: buffer ranks holds 16 bytes but needs 20");
  bad.ranks = NULL;
  bad.scales = small;
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &bad, &sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: buffer scales holds 16 bytes but needs 20");
  clReleaseMemObject(bad.a);
  clReleaseMemObject(bad.b);

  /* Segments. */
  bad_sg = sg;
  bad_sg.offsets = d_from_one;
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &ad, &bad_sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: offsets[0] = 1 but must be 0");
  bad_sg.offsets = d_short_end;
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &ad, &bad_sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: offsets[2] = 5 but must be M = 6 (the rows)");
  bad_sg.offsets = d_decreasing;
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &ad, &bad_sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: offsets decrease at entry 2 (4 then 3)");
  bad_sg = sg;
  bad_sg.segment_adapters = d_below;
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &ad, &bad_sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: segment_adapters[1] = -2 is not an adapter index (-1 for none, or 0 to 1 for L = 2 adapters)");
  bad_sg.segment_adapters = d_past;
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &ad, &bad_sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: segment_adapters[0] = 2 is not an adapter index");
  bad_sg = sg;
  bad_sg.count = 3; /* offsets of 3 entries are one short of 3 + 1 */
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &ad, &bad_sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: buffer offsets holds 12 bytes but needs 16");
  bad_sg.count = 0;
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &ad, &bad_sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: offsets or segment_adapters given with segments = 0");
  bad_sg = sg;
  bad_sg.segment_adapters = NULL;
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &ad, &bad_sg, dy, 1, NULL, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "lora_apply: buffer segment_adapters is null");

  /* Queue and wait list. */
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &ad, &sg, dy, 1, foreign_queue, 0, NULL), OCLTK_INVALID_ARGUMENT,
          "ocltk_lora_apply: queue belongs to another OpenCL context than the runtime's");
  REFUSED(APPLY(rt, OCLTK_F32, M, dx, 0, &ad, &sg, dy, 1, NULL, 2, NULL), OCLTK_INVALID_ARGUMENT,
          "ocltk_lora_apply: event_wait_list is NULL but num_events_in_wait_list is 2");

  /* Shrink and expand: T. */
  REFUSED(ocltk_lora_shrink(rt, OCLTK_F32, M, K, dx, 0, 0, &ad, &sg, NULL, 0, 0, 1, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "lora_shrink: buffer T (intermediate) is null");
  REFUSED(ocltk_lora_shrink(rt, OCLTK_F32, M, K, dx, 0, 0, &ad, &sg, dt, 1, 0, 1, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "lora_shrink: buffer T (intermediate) holds 96 bytes but needs 100");
  REFUSED(ocltk_lora_shrink(rt, OCLTK_F32, M, 0, dx, 0, 0, &ad, &sg, dt, 0, 0, 1, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "lora_shrink: K = 0 must be at least 1");
  REFUSED(ocltk_lora_shrink(NULL, OCLTK_F32, M, K, dx, 0, 0, &ad, &sg, dt, 0, 0, 1, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "ocltk_lora_shrink: runtime is NULL");
  REFUSED(ocltk_lora_expand(rt, OCLTK_F32, M, N, dt, 0, 3, &ad, &sg, 1.0f, 0, dy, 0, 0, 1, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "lora_expand: the leading dimension of T (intermediate) (3) is smaller");
  REFUSED(ocltk_lora_expand(rt, OCLTK_F16, -1, N, dt, 0, 0, &ad, &sg, 1.0f, 0, dy, 0, 0, 1, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "lora_expand: M = -1 must be at least 1");
  REFUSED(ocltk_lora_expand(rt, OCLTK_F32, M, N, dt, 0, 0, NULL, &sg, 1.0f, 0, dy, 0, 0, 1, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "ocltk_lora_expand: adapters is NULL");
  download(cl->queue, dy, sizeof y_after, y_after);
  download(cl->queue, dt, sizeof t_after, t_after);
  for (i = 0; i < sizeof y / 4; ++i) untouched &= bits_of(y[i]) == bits_of(y_after[i]);
  for (i = 0; i < sizeof t / 4; ++i) untouched &= bits_of(t[i]) == bits_of(t_after[i]);
  CHECK(untouched, "a refused LoRA launch wrote Y or T");

  /* The segment helper. */
  REFUSED(ocltk_lora_group_rows(rt, M, 0, d_ids, d_group_off, d_group_segs, d_index, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "lora_group_rows: adapters = 0 must be at least 1");
  REFUSED(ocltk_lora_group_rows(rt, -3, L, d_ids, d_group_off, d_group_segs, d_index, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "lora_group_rows: rows = -3 is out of range");
  REFUSED(ocltk_lora_group_rows(rt, M, L, d_ids, d_group_off, d_group_segs, small, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "lora_group_rows: buffer row_index holds 16 bytes but needs 24");
  REFUSED(ocltk_lora_group_rows(rt, M, L, NULL, d_group_off, d_group_segs, d_index, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "lora_group_rows: buffer row_adapters is null");
  REFUSED(ocltk_lora_group_rows(NULL, M, L, d_ids, d_group_off, d_group_segs, d_index, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "ocltk_lora_group_rows: runtime is NULL");
  REFUSED(ocltk_lora_gather_rows(rt, OCLTK_F32, M, K, d_index, dx, 0, 0, dx, 0, 0, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "lora_gather_rows: input and output are the same buffer");
  REFUSED(ocltk_lora_gather_rows(rt, OCLTK_F32, M, K, d_index, dx, 0, 6, dy, 0, 0, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT,
          "lora_gather_rows: the leading dimension of input (6) is smaller than its row length, features = 7");
  REFUSED(ocltk_lora_scatter_rows(rt, OCLTK_F32, M, K, d_index, dx, 0, 0, dy, 2, 0, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "lora_scatter_rows: buffer output holds 120 bytes but needs 176");
  REFUSED(ocltk_lora_scatter_rows(rt, OCLTK_F32, M, 0, d_index, dx, 0, 0, dy, 0, 0, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "lora_scatter_rows: features = 0 must be from 1 to 2^31 - 2");
  REFUSED(ocltk_lora_scatter_rows(rt, (ocltk_dtype)3, M, K, d_index, dx, 0, 0, dy, 0, 0, NULL, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "ocltk_lora_scatter_rows: dtype = 3 is not an ocltk_dtype");
  REFUSED(ocltk_lora_scatter_rows(rt, OCLTK_F32, M, K, small, dx, 0, 0, dy, 0, 0, foreign_queue, 0, NULL, &ev),
          OCLTK_INVALID_ARGUMENT, "ocltk_lora_scatter_rows: queue belongs to another OpenCL context");
  download(cl->queue, dy, sizeof y_after, y_after);
  untouched = 1;
  for (i = 0; i < sizeof y / 4; ++i) untouched &= bits_of(y[i]) == bits_of(y_after[i]);
  CHECK(untouched, "a refused scatter wrote its output");

  /* Choices. */
  EXPECT_STATUS(ocltk_choose_lora(rt, (ocltk_lora_operation)3, OCLTK_F32, 4, 8, 8, 1, 4, 0, &choice),
                OCLTK_INVALID_ARGUMENT, "ocltk_choose_lora: operation = 3 is not an ocltk_lora_operation");
  CHECK(choice == NULL, "a failed choose left its result set");
  EXPECT_STATUS(ocltk_choose_lora(rt, OCLTK_LORA_APPLY, OCLTK_F32, 4, 8, 8, 1, 0, 0, &choice), OCLTK_INVALID_ARGUMENT,
                "ocltk_choose_lora: R (max_rank) = 0 must be at least 1");
  EXPECT_STATUS(ocltk_choose_lora(rt, OCLTK_LORA_APPLY, OCLTK_F32, 4, 8, 8, 1, 4, -1, &choice), OCLTK_INVALID_ARGUMENT,
                "ocltk_choose_lora: segments = -1 must be 0 (one) or more");
  EXPECT_STATUS(ocltk_choose_lora(rt, OCLTK_LORA_APPLY, (ocltk_dtype)9, 4, 8, 8, 1, 4, 0, &choice),
                OCLTK_INVALID_ARGUMENT, "ocltk_choose_lora: dtype = 9 is not an ocltk_dtype");
  EXPECT_STATUS(ocltk_choose_lora(NULL, OCLTK_LORA_APPLY, OCLTK_F32, 4, 8, 8, 1, 4, 0, &choice), OCLTK_INVALID_ARGUMENT,
                "ocltk_choose_lora: runtime is NULL");
  EXPECT_STATUS(ocltk_choose_lora(rt, OCLTK_LORA_APPLY, OCLTK_F32, 4, 8, 8, 1, 4, 0, NULL), OCLTK_INVALID_ARGUMENT,
                "ocltk_choose_lora: choice (the result) is NULL");
#undef APPLY
#undef REFUSED

  release_mem(&dx);
  release_mem(&da);
  release_mem(&db);
  release_mem(&dy);
  release_mem(&dt);
  release_mem(&small);
  release_mem(&other);
  release_mem(&d_off);
  release_mem(&d_segs);
  release_mem(&d_ranks);
  release_mem(&d_scales);
  release_mem(&d_from_one);
  release_mem(&d_short_end);
  release_mem(&d_decreasing);
  release_mem(&d_below);
  release_mem(&d_past);
  release_mem(&d_zero_rank);
  release_mem(&d_big_rank);
  release_mem(&d_ids);
  release_mem(&d_index);
  release_mem(&d_group_off);
  release_mem(&d_group_segs);
  clReleaseCommandQueue(foreign_queue);
  clReleaseContext(foreign);
}
