// kernels.cu - The GPU test's kernels, in the CUDA kernel ABI of plan.json
// (one .u64 device pointer per buffer). kernels.ptx is generated from this
// file and checked in, so that building the GPU test needs no CUDA compiler:
//
//   clang++-22 -x cuda --cuda-gpu-arch=sm_80 --cuda-device-only -S -O2 \
//     -nocudainc -nocudalib kernels.cu -o kernels.ptx
//   sed -i 's/^\.version .*/.version 7.0/' kernels.ptx   # any driver >= 11.0
//   ptxas -arch=sm_90 kernels.ptx -o /dev/null            # still valid
//
// The regression kernels compute what tests/kernels.c computes on the CPU
// (batch 8, 4 features), on one thread; loom_add_relu is a grid-stride
// pointwise kernel over N elements.

#define GLOBAL extern "C" __attribute__((global))
#define TID (__nvvm_read_ptx_sreg_tid_x())
#define GID                                                                    \
  (__nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +           \
   __nvvm_read_ptx_sreg_tid_x())
#define STRIDE (__nvvm_read_ptx_sreg_nctaid_x() * __nvvm_read_ptx_sreg_ntid_x())

enum { B = 8, D = 4, N = 5120 };

// y[N] = max(c[N] + bias[N], 0)
GLOBAL void loom_add_relu(const float *c, const float *bias, float *y) {
  for (int i = GID; i < N; i += STRIDE) {
    float v = c[i] + bias[i];
    y[i] = v > 0 ? v : 0;
  }
}

GLOBAL void lr_add_bias(float *pred, const float *bias) {
  if (GID != 0)
    return;
  for (int i = 0; i < B; ++i)
    pred[i] += bias[0];
}

GLOBAL void lr_mse(const float *pred, const float *y, float *loss,
                   float *dpred) {
  if (GID != 0)
    return;
  float sum = 0;
  for (int i = 0; i < B; ++i) {
    float e = pred[i] - y[i];
    sum += e * e;
    dpred[i] = 2.0f * e / B;
  }
  *loss = sum / B;
}

GLOBAL void lr_sum(const float *in, float *out) {
  if (GID != 0)
    return;
  float s = 0;
  for (int i = 0; i < B; ++i)
    s += in[i];
  out[0] = s;
}

__attribute__((device)) static void momentum(float *w, float *m,
                                             const float *g, int n) {
  for (int i = 0; i < n; ++i) {
    m[i] = 0.9f * m[i] + g[i];
    w[i] -= 0.05f * m[i];
  }
}
GLOBAL void lr_momentum_w(float *w, float *m, const float *g) {
  if (GID == 0)
    momentum(w, m, g, D);
}
GLOBAL void lr_momentum_b(float *w, float *m, const float *g) {
  if (GID == 0)
    momentum(w, m, g, 1);
}

GLOBAL void inc_step(const long long *in, long long *out) {
  if (GID == 0)
    *out = *in + 1;
}

GLOBAL void lr_const(float *lr) {
  if (GID == 0)
    *lr = 0.05f;
}
