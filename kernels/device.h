// Device: which backend of kernels/ runs a computation. kernels/ has two backends — a CPU one
// (Thrust OMP system + OpenMP, always present) and a CUDA one (nvcc, present when the build found
// nvcc) — and both live side by side in one binary. Buffers a backend owns live in
// that backend's memory (host RAM for kCpu, GPU global memory for kCuda).
// Thread-safety: all functions here are pure or read process-wide, immutable facts; safe anywhere.
#ifndef SIEVE_KERNELS_DEVICE_H_
#define SIEVE_KERNELS_DEVICE_H_

#include <string_view>

#include "base/status.h"

namespace sieve {

enum class Device { kCpu, kCuda };

// "cpu" or "cuda".
std::string_view DeviceName(Device device);

// True when this binary contains the CUDA backend (built with nvcc).
bool CudaBackendCompiled();

// True when the CUDA backend is compiled in AND at least one GPU is visible at run time.
bool CudaDeviceAvailable();

// Parses a --device flag value: "auto" (cuda when a GPU is visible, else cpu), "cpu" or "cuda".
// "cuda" without a usable GPU (or without the CUDA backend) is an error, never a silent fallback.
StatusOr<Device> ParseDevice(std::string_view name);

}  // namespace sieve

#endif  // SIEVE_KERNELS_DEVICE_H_
