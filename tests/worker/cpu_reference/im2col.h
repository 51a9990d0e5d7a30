// Part of the CPU reference model (tests/worker/cpu_reference/model.h): the worker's model math as
// it was before it moved onto kernels/nn, kept as an independent second implementation.
// Patch extraction for a k x k, stride-1, "valid" convolution over NHWC tensors, so that the
// convolution becomes one GEMM (see dense.h): with patches of shape
// (batch * oh * ow) x (k * k * c), columns ordered (ky, kx, channel), and weights
// [out_c][k][k][c], conv(x) = DenseForward(patches, w, bias) in NHWC layout.
//   oh = h - k + 1, ow = w - k + 1.
// Im2Col overwrites `patches`; Col2Im is its adjoint: it *overwrites* dx (batch x h x w x c) with
// the sum of every patch gradient at its source position. Buffers are owned by the caller.
// Thread-safety: no shared state.
#ifndef SIEVE_TESTS_WORKER_CPU_REFERENCE_IM2COL_H_
#define SIEVE_TESTS_WORKER_CPU_REFERENCE_IM2COL_H_

namespace sieve::cpu_reference {

void Im2Col(const float* x, int batch, int h, int w, int c, int k, float* patches);
void Col2Im(const float* dpatches, int batch, int h, int w, int c, int k, float* dx);

}  // namespace sieve::cpu_reference

#endif  // SIEVE_TESTS_WORKER_CPU_REFERENCE_IM2COL_H_
