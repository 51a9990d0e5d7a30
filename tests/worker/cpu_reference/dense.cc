#include "tests/worker/cpu_reference/dense.h"

#include <cblas.h>

namespace sieve::cpu_reference {

void DenseForward(const float* x, int batch, int in, const float* w, const float* bias, int out,
                  float* y) {
  for (int b = 0; b < batch; ++b) {
    for (int o = 0; o < out; ++o) y[b * out + o] = bias[o];
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x, in, w, in, 1.0f, y,
              out);
}

void DenseBackward(const float* x, int batch, int in, const float* w, int out, const float* dy,
                   float* dw, float* dbias, float* dx) {
  // dw = dy^T x
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dy, out, x, in, 0.0f,
              dw, in);
  for (int o = 0; o < out; ++o) dbias[o] = 0.0f;
  for (int b = 0; b < batch; ++b) {
    for (int o = 0; o < out; ++o) dbias[o] += dy[b * out + o];
  }
  // dx = dy w
  if (dx != nullptr) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dy, out, w, in,
                0.0f, dx, in);
  }
}

}  // namespace sieve::cpu_reference
