// CudaStatus: a CUDA runtime result as a Status, for the CUDA sources of kernels/ (nvcc only).
// cudaSuccess is OK; anything else is Internal with `what` (the call) and cudaGetErrorString's
// message, so no CUDA failure aborts. SIEVE_CUDA_TRY returns that Status from the enclosing
// function when it is not OK. Pure; thread-safe.
#ifndef SIEVE_KERNELS_CUDA_STATUS_H_
#define SIEVE_KERNELS_CUDA_STATUS_H_

#include <cuda_runtime.h>

#include <string>

#include "base/status.h"

namespace sieve {

inline Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return InternalError(std::string("cuda: ") + what + ": " + cudaGetErrorString(err));
}

}  // namespace sieve

#define SIEVE_CUDA_TRY(expr) SIEVE_RETURN_IF_ERROR(::sieve::CudaStatus((expr), #expr))

#endif  // SIEVE_KERNELS_CUDA_STATUS_H_
