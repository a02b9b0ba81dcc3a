/* kernels.c - Hand-written kernels (ABI 1: void name(void **buffers)) that
 * stand in for compiled ones in the runtime tests. Shapes are compiled in,
 * as in generated kernels: the linear-regression model has batch 8 and 4
 * features. */

#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

enum { B = 8, D = 4 };

/* --- the gemm + kernel + copy test --------------------------------------- */

/* y[4] = max(c[4] + bias[4], 0) */
EXPORT void add_relu4(void **b) {
  const float *c = b[0], *bias = b[1];
  float *y = b[2];
  for (int i = 0; i < 4; ++i) {
    float v = c[i] + bias[i];
    y[i] = v > 0 ? v : 0;
  }
}

/* --- linear regression: pred = x w + bias, loss = mean((pred - y)^2) ----- */

/* pred[B] += bias[0] */
EXPORT void lr_add_bias(void **b) {
  float *pred = b[0];
  const float *bias = b[1];
  for (int i = 0; i < B; ++i)
    pred[i] += bias[0];
}

/* loss = mean((pred - y)^2); dpred = 2 (pred - y) / B */
EXPORT void lr_mse(void **b) {
  const float *pred = b[0], *y = b[1];
  float *loss = b[2], *dpred = b[3];
  float sum = 0;
  for (int i = 0; i < B; ++i) {
    float e = pred[i] - y[i];
    sum += e * e;
    dpred[i] = 2.0f * e / B;
  }
  *loss = sum / B;
}

/* out[0] = sum(in[B]) */
EXPORT void lr_sum(void **b) {
  const float *in = b[0];
  float *out = b[1];
  float s = 0;
  for (int i = 0; i < B; ++i)
    s += in[i];
  out[0] = s;
}

/* out[0] = a[0] + b[0] (the pipeline fixtures' tied param: the stages'
 * gradients added per micro-batch in the one-artifact reference). */
EXPORT void add_f32_1(void **b) {
  *(float *)b[2] = *(const float *)b[0] + *(const float *)b[1];
}

/* Momentum SGD, in place: m = 0.9 m + g; w -= 0.05 m. */
static void momentum(float *w, float *m, const float *g, int n) {
  for (int i = 0; i < n; ++i) {
    m[i] = 0.9f * m[i] + g[i];
    w[i] -= 0.05f * m[i];
  }
}
EXPORT void lr_momentum_w(void **b) { momentum(b[0], b[1], b[2], D); }
EXPORT void lr_momentum_b(void **b) { momentum(b[0], b[1], b[2], 1); }
/* A rank's half of w (mesh dp=2: shards of 2 elements). */
EXPORT void lr_momentum_2(void **b) { momentum(b[0], b[1], b[2], 2); }

/* out = in + 1 (i64 step counter) */
EXPORT void inc_step(void **b) {
  *(int64_t *)b[1] = *(const int64_t *)b[0] + 1;
}

/* The learning rate as an output, as an in-graph schedule would report it. */
EXPORT void lr_const(void **b) { *(float *)b[0] = 0.05f; }

/* --- matrix regression (gradient compression): pred = x W + b ----------- */
/* x [B, 8], W [8, 8], b [8], y [B, 8]; loss = sum((pred - y)^2) / B. */

enum { MO = 8 };

/* pred[B][8] += b[8] */
EXPORT void mr_add_bias(void **b) {
  float *pred = b[0];
  const float *bias = b[1];
  for (int i = 0; i < B; ++i)
    for (int j = 0; j < MO; ++j)
      pred[i * MO + j] += bias[j];
}

/* loss = sum((pred - y)^2) / B; dpred = 2 (pred - y) / B */
EXPORT void mr_mse(void **b) {
  const float *pred = b[0], *y = b[1];
  float *loss = b[2], *dpred = b[3];
  float sum = 0;
  for (int i = 0; i < B * MO; ++i) {
    float e = pred[i] - y[i];
    sum += e * e;
    dpred[i] = 2.0f * e / B;
  }
  *loss = sum / B;
}

/* db[j] = sum_i dpred[i][j] */
EXPORT void mr_colsum(void **b) {
  const float *dpred = b[0];
  float *db = b[1];
  for (int j = 0; j < MO; ++j) {
    float s = 0;
    for (int i = 0; i < B; ++i)
      s += dpred[i * MO + j];
    db[j] = s;
  }
}

/* Momentum SGD on W (64), a shard of it over 2 or 4 ranks, and b (8). */
EXPORT void mr_momentum64(void **b) { momentum(b[0], b[1], b[2], 64); }
EXPORT void mr_momentum32(void **b) { momentum(b[0], b[1], b[2], 32); }
EXPORT void mr_momentum16(void **b) { momentum(b[0], b[1], b[2], 16); }
EXPORT void mr_momentum8(void **b) { momentum(b[0], b[1], b[2], 8); }

/* --- classifier for evaluation: predict = x, loss = x[0][0] -------------- */

EXPORT void first_elem(void **b) { *(float *)b[1] = *(const float *)b[0]; }

/* A kernel that writes a distinctive value to check ordering. */
EXPORT void fill_seven(void **b) { *(float *)b[0] = 7.0f; }
