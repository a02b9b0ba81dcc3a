//===- CpuGemm.cpp - oneDNN's sgemm (reached by dlopen), else CBLAS -------===//
//
// Every GEMM is cut into tiles of C chosen from its shape alone, and each
// tile is one library call on one thread of the OpenMP team. The libraries'
// own threading makes a sum's order depend on the thread count (OpenBLAS
// 0.3.21 on AMD Zen gives other bits for a 128x64x128 product on 2 threads
// than on 1; oneDNN's sgemm splits K across threads for some shapes), so
// results would too; with the tiles fixed by the shape, each element of C is
// computed by one call whose operands do not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "CpuGemm.h"
#include "CpuDnnl.h"

#include <algorithm>
#include <cblas.h>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace loomrt {

namespace {

/// A tile's multiply-adds at least, unless the GEMM is smaller: below this
/// a library call's packing and start-up outweigh what a split gains.
constexpr int64_t kMinTileWork = int64_t(1) << 22;

/// Tiles per GEMM at most: two per core of the machine (online CPUs, not
/// the thread count nor the process's affinity, which mpirun narrows per
/// rank: the tiling, and so every bit of C, is the machine's). On 2 AMD
/// EPYC cores with oneDNN, 2 to 4 tiles ran GPT-2-shaped GEMMs
/// (1024x256x1024 A^T, 512x2048x256) as fast as oneDNN's own threading,
/// within this machine's noise, 64 tiles 10-25% slower; deep products
/// (64x256x8192 A^T) lose a third, as oneDNN splits their K.
int64_t maxTilesPerGemm() {
  long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  return std::clamp<int64_t>(2 * int64_t(cores), 4, 256);
}

/// Tile sides are multiples of this (the register blocks of both
/// libraries' f32 kernels divide it).
constexpr int64_t kTileAlign = 16;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Tiling {
  int64_t rows, cols;       ///< a tile's extent in C (the last may be less)
  int64_t rowTiles, colTiles;
  int64_t count() const { return rowTiles * colTiles; }
};

/// Halves the tile's rows (in row-major C a tile of whole rows is one
/// block), or its columns where they are over twice as long, while a tile
/// keeps kMinTileWork and
/// the tiles of all `batch` products stay within maxTilesPerGemm(). A
/// function of the shape and the machine only.
Tiling tiling(int64_t m, int64_t n, int64_t k, int64_t batch) {
  static const int64_t maxTiles = maxTilesPerGemm();
  const int64_t limit = std::max<int64_t>(1, maxTiles / std::max<int64_t>(batch, 1));
  int64_t rows = m, cols = n;
  auto halved = [](int64_t side) {
    return ceilDiv(ceilDiv(side, 2), kTileAlign) * kTileAlign;
  };
  for (;;) {
    bool splitRows = rows * 2 >= cols && rows >= 2 * kTileAlign;
    int64_t side = splitRows ? rows : cols;
    if (side < 2 * kTileAlign)
      break;
    int64_t next = halved(side);
    int64_t r = splitRows ? next : rows, c = splitRows ? cols : next;
    if (double(r) * double(c) * double(std::max<int64_t>(k, 1)) <
            double(kMinTileWork) ||
        ceilDiv(m, r) * ceilDiv(n, c) > limit)
      break;
    rows = r, cols = c;
  }
  return {rows, cols, ceilDiv(m, rows), ceilDiv(n, cols)};
}

/// OpenBLAS (where it is the CBLAS; looked up, so that another CBLAS still
/// links) runs each call on its caller's thread, the tile's: once, before
/// the first tile.
void pinBlasToOneThread() {
  static const bool pinned = [] {
    using SetThreads = void (*)(int);
    if (void *f = ::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))
      reinterpret_cast<SetThreads>(f)(1);
    return true;
  }();
  (void)pinned;
}

/// Calls tile(p, i0, r, j0, c) for each tile of each of the batch's m x n x
/// k products: on the OpenMP team where there is one, else in order. The
/// team has at least two threads even for one tile: a library called
/// inside a parallel region runs on its caller's thread alone (nested
/// regions are serialized, and oneDNN asks omp_in_parallel), so no call's
/// sums depend on the thread count. A GEMM issued inside a parallel region
/// runs its tiles on the calling thread.
template <class TileFn>
void forEachTile(int64_t m, int64_t n, int64_t k, int64_t batch,
                 TileFn &&tile) {
  if (m <= 0 || n <= 0 || batch <= 0)
    return;
  pinBlasToOneThread();
  const Tiling t = tiling(m, n, k, batch);
  const int64_t total = batch * t.count();
  auto run = [&](int64_t index) {
    int64_t p = index / t.count(), local = index % t.count();
    int64_t i0 = (local / t.colTiles) * t.rows;
    int64_t j0 = (local % t.colTiles) * t.cols;
    tile(p, i0, std::min(t.rows, m - i0), j0, std::min(t.cols, n - j0));
  };
#ifdef _OPENMP
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads > 1) {
    const int team = static_cast<int>(
        std::max<int64_t>(2, std::min<int64_t>(threads, total)));
#pragma omp parallel for schedule(dynamic, 1) num_threads(team)
    for (int64_t index = 0; index < total; ++index)
      run(index);
    return;
  }
#endif
  for (int64_t index = 0; index < total; ++index)
    run(index);
}

/// The tile's corner in each operand, row-major as stored.
template <class T> struct TileOperands {
  const T *a, *b;
  T *c;
};
template <class T>
TileOperands<T> tileOperands(bool transA, bool transB, const T *a,
                             int64_t lda, const T *b, int64_t ldb, T *c,
                             int64_t ldc, int64_t i0, int64_t j0) {
  return {transA ? a + i0 : a + i0 * lda, transB ? b + j0 * ldb : b + j0,
          c + i0 * ldc + j0};
}

CBLAS_TRANSPOSE cblasTranspose(bool t) {
  return t ? CblasTrans : CblasNoTrans;
}

} // namespace

void DnnlGemm::open() noexcept {
  if (opened)
    return;
  opened = true;
  const char *choice = std::getenv("LOOMRT_CPU_GEMM");
  if (choice && std::strcmp(choice, "openblas") == 0)
    return;
  if (void *lib = dnnlLibrary())
    sgemm = reinterpret_cast<Sgemm>(::dlsym(lib, "dnnl_sgemm"));
}

bool DnnlGemm::run(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                   const float *a, int64_t lda, const float *b, int64_t ldb,
                   float *c, int64_t ldc, float beta) const noexcept {
  if (!sgemm)
    return false;
  // dnnl_sgemm is row-major, as the plan's GEMM steps are. 0: dnnl_success.
  return sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, 1.0f, a, lda, b,
               ldb, beta, c, ldc) == 0;
}

void cpuSgemm(const DnnlGemm &dnnl, bool transA, bool transB, int64_t m,
              int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
              int64_t ldb, float beta, float *c, int64_t ldc,
              GemmBatch batch) noexcept {
  forEachTile(m, n, k, batch.count,
              [&](int64_t p, int64_t i0, int64_t r, int64_t j0, int64_t cols) {
    TileOperands<float> t = tileOperands(
        transA, transB, a + p * batch.strideA, lda, b + p * batch.strideB, ldb,
        c + p * batch.strideC, ldc, i0, j0);
    if (dnnl.run(transA, transB, r, cols, k, t.a, lda, t.b, ldb, t.c, ldc,
                 beta))
      return;
    // Plain int: OpenBLAS's blasint is int unless built for ILP64.
    cblas_sgemm(CblasRowMajor, cblasTranspose(transA), cblasTranspose(transB),
                int(r), int(cols), int(k), 1.0f, t.a, int(lda), t.b, int(ldb),
                beta, t.c, int(ldc));
  });
}

void cpuDgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
              const double *a, int64_t lda, const double *b, int64_t ldb,
              double *c, int64_t ldc, GemmBatch batch) noexcept {
  forEachTile(m, n, k, batch.count,
              [&](int64_t p, int64_t i0, int64_t r, int64_t j0, int64_t cols) {
    TileOperands<double> t = tileOperands(
        transA, transB, a + p * batch.strideA, lda, b + p * batch.strideB, ldb,
        c + p * batch.strideC, ldc, i0, j0);
    cblas_dgemm(CblasRowMajor, cblasTranspose(transA), cblasTranspose(transB),
                int(r), int(cols), int(k), 1.0, t.a, int(lda), t.b, int(ldb),
                0.0, t.c, int(ldc));
  });
}

const char *cpuGemmLibrary(const DnnlGemm &dnnl) noexcept {
  return dnnl.available() ? "onednn" : "openblas";
}

} // namespace loomrt
