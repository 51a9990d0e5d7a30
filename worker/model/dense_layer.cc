#include "worker/model/dense_layer.h"

namespace sieve {

Status DenseForward(NnOps& nn, const float* x, int batch, int in, const float* w, const float* bias,
                    int out, float* y) {
  SIEVE_RETURN_IF_ERROR(nn.BiasFill(bias, batch, out, y));
  // y += x·wᵀ
  return nn.Gemm(false, true, batch, out, in, 1.0f, x, w, 1.0f, y);
}

Status DenseBackward(NnOps& nn, const float* x, int batch, int in, const float* w, int out,
                     const float* dy, float* dw, float* dbias, float* dx) {
  // dw = dyᵀ·x
  SIEVE_RETURN_IF_ERROR(nn.Gemm(true, false, out, in, batch, 1.0f, dy, x, 0.0f, dw));
  SIEVE_RETURN_IF_ERROR(nn.BiasGrad(dy, batch, out, dbias));
  // dx = dy·w
  if (dx == nullptr) return Status::Ok();
  return nn.Gemm(false, false, batch, in, out, 1.0f, dy, w, 0.0f, dx);
}

}  // namespace sieve
