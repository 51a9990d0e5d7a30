// CublasLibrary: dlopen() and dlsym() of the cuBLAS functions nn_cuda.cu calls.
// kernels/nn/cublas_library.h.
#include <dlfcn.h>

#include <string>
#include <utility>

#include "kernels/nn/cublas_library.h"

namespace sieve {
namespace {

// `*fn` = the symbol `name` of `handle`. False when it is missing.
template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  return *fn != nullptr;
}

}  // namespace

StatusOr<std::unique_ptr<CublasLibrary>> CublasLibrary::Open() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why = handle == nullptr ? dlerror() : "";
#ifdef SIEVE_CUBLAS_PATH
  if (handle == nullptr) {
    handle = dlopen(SIEVE_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) why += std::string("; ") + dlerror();
  }
#endif
  if (handle == nullptr) {
    return UnavailableError("cannot load cuBLAS (" + soname + "): " + why);
  }
  auto lib = std::unique_ptr<CublasLibrary>(new CublasLibrary());
  lib->handle_ = handle;
  const char* missing = nullptr;
  if (!Resolve(handle, "cublasCreate_v2", &lib->create)) missing = "cublasCreate_v2";
  if (!Resolve(handle, "cublasDestroy_v2", &lib->destroy)) missing = "cublasDestroy_v2";
  if (!Resolve(handle, "cublasSetStream_v2", &lib->set_stream)) missing = "cublasSetStream_v2";
  if (!Resolve(handle, "cublasSetMathMode", &lib->set_math_mode)) missing = "cublasSetMathMode";
  if (!Resolve(handle, "cublasSetAtomicsMode", &lib->set_atomics_mode)) {
    missing = "cublasSetAtomicsMode";
  }
  if (!Resolve(handle, "cublasSgemm_v2", &lib->sgemm)) missing = "cublasSgemm_v2";
  if (!Resolve(handle, "cublasGetStatusString", &lib->status_string)) {
    missing = "cublasGetStatusString";
  }
  if (missing != nullptr) {
    return UnavailableError("cuBLAS (" + soname + ") has no " + missing);
  }
  return StatusOr<std::unique_ptr<CublasLibrary>>(std::move(lib));
}

CublasLibrary::~CublasLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

}  // namespace sieve
