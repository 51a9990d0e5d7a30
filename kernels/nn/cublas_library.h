// CublasLibrary: the cuBLAS entry points the CUDA NnOps uses (nn_cuda.cu), resolved at run time
// from a dlopen()ed libcublas instead of linked. A binary built with CUDA then maps cuBLAS (and
// its cuBLASLt, whose zero-initialized data alone is ~84 MB of memory touched at load) only when
// it builds a model on a GPU: a CPU worker of a CUDA build stays as small as one of a CPU build.
//
// Contract: Open() loads libcublas.so.<major of the headers> from the loader's search path, else
// the library the build found (SIEVE_CUBLAS_PATH), and resolves every member; each member then
// has cuBLAS's own signature and semantics. The object owns one dlopen() reference, dropped by
// the destructor: it must outlive every handle created through it. Thread-safety: immutable
// after Open(); the functions are as thread-safe as cuBLAS's.
//
// Only for nvcc-compiled code (needs cublas_v2.h).
#ifndef SIEVE_KERNELS_NN_CUBLAS_LIBRARY_H_
#define SIEVE_KERNELS_NN_CUBLAS_LIBRARY_H_

#include <cublas_v2.h>

#include <memory>

#include "base/status.h"

namespace sieve {

class CublasLibrary {
 public:
  // Errors: Unavailable naming the library (and dlerror()) when it cannot be loaded or lacks a
  // function.
  static StatusOr<std::unique_ptr<CublasLibrary>> Open();
  ~CublasLibrary();
  CublasLibrary(const CublasLibrary&) = delete;
  CublasLibrary& operator=(const CublasLibrary&) = delete;

  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetAtomicsMode) set_atomics_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;

 private:
  CublasLibrary() = default;
  void* handle_ = nullptr;  // dlopen()'s
};

}  // namespace sieve

#endif  // SIEVE_KERNELS_NN_CUBLAS_LIBRARY_H_
