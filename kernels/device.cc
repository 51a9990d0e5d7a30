#include "kernels/device.h"

#include <string>

#include "kernels/backend.h"

namespace sieve {

std::string_view DeviceName(Device device) { return device == Device::kCuda ? "cuda" : "cpu"; }

bool CudaBackendCompiled() {
#if SIEVE_KERNELS_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool CudaDeviceAvailable() {
#if SIEVE_KERNELS_WITH_CUDA
  static const bool available = cuda::VisibleDeviceCount() > 0;
  return available;
#else
  return false;
#endif
}

StatusOr<Device> ParseDevice(std::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "auto") return CudaDeviceAvailable() ? Device::kCuda : Device::kCpu;
  if (name == "cuda") {
    if (!CudaBackendCompiled()) {
      return FailedPreconditionError(
          "device 'cuda' requested but this binary was built without "
          "the CUDA backend (no nvcc at build time)");
    }
    if (!CudaDeviceAvailable()) {
      return FailedPreconditionError("device 'cuda' requested but no GPU is visible");
    }
    return Device::kCuda;
  }
  return InvalidArgumentError("unknown device '" + std::string(name) +
                              "' (expected auto, cpu or cuda)");
}

StatusOr<Backend*> GetBackend(Device device) {
  if (device == Device::kCpu) return cpu::Instance();
#if SIEVE_KERNELS_WITH_CUDA
  if (CudaDeviceAvailable()) return cuda::Instance();
#endif
  return FailedPreconditionError("the CUDA backend is not available (not built or no GPU)");
}

}  // namespace sieve
