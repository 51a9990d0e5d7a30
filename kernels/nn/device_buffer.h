// DeviceBuffer: grow-only scratch of floats (or int32) in one backend's memory, for the buffers a
// model or trainer reuses every round (activations, deltas, a staged mini-batch).
//
// Reserve(n) makes data() hold at least n elements. Growing frees the old block (the context
// waits for work on it first) and allocates a zeroed one: the content is NOT kept. Not growing
// keeps the block and its content. The buffer owns its block and frees it on destruction; the
// context (or NnOps, for int32) must outlive it. Errors: Reserve returns the backend's
// out-of-memory or device Status and leaves the buffer as it was.
// Thread-safety: like the context it allocates from (one thread at a time).
#ifndef SIEVE_KERNELS_NN_DEVICE_BUFFER_H_
#define SIEVE_KERNELS_NN_DEVICE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <utility>

#include "base/status.h"
#include "kernels/backend.h"
#include "kernels/nn/nn_ops.h"

namespace sieve {

template <typename T, typename Allocator>
class BasicDeviceBuffer {
 public:
  explicit BasicDeviceBuffer(Allocator* allocator) : allocator_(allocator) {}
  ~BasicDeviceBuffer() { Release(); }
  BasicDeviceBuffer(const BasicDeviceBuffer&) = delete;
  BasicDeviceBuffer& operator=(const BasicDeviceBuffer&) = delete;
  BasicDeviceBuffer(BasicDeviceBuffer&& other) noexcept
      : allocator_(other.allocator_),
        data_(std::exchange(other.data_, nullptr)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  BasicDeviceBuffer& operator=(BasicDeviceBuffer&&) = delete;

  Status Reserve(size_t n) {
    if (n <= capacity_ && data_ != nullptr) return Status::Ok();
    StatusOr<T*> p = Allocate(n);
    if (!p.ok()) return p.status();
    Release();
    data_ = *p;
    capacity_ = n;
    return Status::Ok();
  }

  T* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  StatusOr<T*> Allocate(size_t n);
  void Release();

  Allocator* allocator_;
  T* data_ = nullptr;
  size_t capacity_ = 0;
};

template <>
inline StatusOr<float*> BasicDeviceBuffer<float, BackendContext>::Allocate(size_t n) {
  return allocator_->Alloc(n);
}
template <>
inline void BasicDeviceBuffer<float, BackendContext>::Release() {
  allocator_->Free(data_);
  data_ = nullptr;
  capacity_ = 0;
}
template <>
inline StatusOr<int32_t*> BasicDeviceBuffer<int32_t, NnOps>::Allocate(size_t n) {
  return allocator_->AllocInt32(n);
}
template <>
inline void BasicDeviceBuffer<int32_t, NnOps>::Release() {
  allocator_->FreeInt32(data_);
  data_ = nullptr;
  capacity_ = 0;
}

// Floats from a context; int32 from an NnOps (its context's memory).
using DeviceBuffer = BasicDeviceBuffer<float, BackendContext>;
using DeviceInt32Buffer = BasicDeviceBuffer<int32_t, NnOps>;

}  // namespace sieve

#endif  // SIEVE_KERNELS_NN_DEVICE_BUFFER_H_
