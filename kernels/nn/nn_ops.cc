#include "kernels/nn/nn_ops.h"

#include <algorithm>
#include <string>

namespace sieve {

StatusOr<std::unique_ptr<NnOps>> NnOps::Create(BackendContext* ctx) {
  if (ctx == nullptr) return InvalidArgumentError("NnOps: null context");
  StatusOr<std::unique_ptr<NnOps>> ops =
      FailedPreconditionError("NnOps: this binary was built without the CUDA backend");
  if (ctx->device() == Device::kCpu) {
    ops = nn_internal::NewCpuNnOps(ctx);
  } else {
#if SIEVE_NN_WITH_CUDA
    ops = nn_internal::NewCudaNnOps(ctx);
#endif
  }
  if (ops.ok()) (*ops)->ctx_ = ctx;
  return ops;
}

StatusOr<std::unique_ptr<NnOps>> NnOps::Create(Device device) {
  SIEVE_ASSIGN_OR_RETURN(Backend * backend, GetBackend(device));
  SIEVE_ASSIGN_OR_RETURN(std::unique_ptr<BackendContext> ctx, backend->NewContext());
  StatusOr<std::unique_ptr<NnOps>> ops = Create(ctx.get());
  if (ops.ok()) (*ops)->owned_ctx_ = std::move(ctx);
  return ops;
}

namespace nn_internal {

Status CheckGemm(int m, int n, int k) {
  if (m < 0 || n < 0 || k < 0) {
    return InvalidArgumentError("gemm: negative size m=" + std::to_string(m) +
                                " n=" + std::to_string(n) + " k=" + std::to_string(k));
  }
  return Status::Ok();
}

GemmLd GemmLeadingDims(bool trans_a, bool trans_b, int m, int n, int k) {
  return {std::max(1, trans_a ? m : k), std::max(1, trans_b ? k : n)};
}

Status CheckLabels(const uint8_t* labels_host, int batch, int classes) {
  if (batch < 1 || classes < 1 || classes > 256) {
    return InvalidArgumentError("softmax cross-entropy: batch " + std::to_string(batch) +
                                ", classes " + std::to_string(classes) +
                                " (need batch >= 1, 1 <= classes <= 256)");
  }
  for (int b = 0; b < batch; ++b) {
    if (labels_host[b] >= classes) {
      return InvalidArgumentError("softmax cross-entropy: label " + std::to_string(labels_host[b]) +
                                  " of row " + std::to_string(b) +
                                  " >= " + std::to_string(classes) + " classes");
    }
  }
  return Status::Ok();
}

Status CheckConv(int batch, int h, int w, int c, int k) {
  if (batch < 0 || c < 0 || k < 1 || h < k || w < k) {
    return InvalidArgumentError("im2col: need batch, c >= 0 and 1 <= k <= h, w (batch " +
                                std::to_string(batch) + ", " + std::to_string(h) + "x" +
                                std::to_string(w) + "x" + std::to_string(c) + ", k " +
                                std::to_string(k) + ")");
  }
  return Status::Ok();
}

Status CheckPool(int batch, int h, int w, int c) {
  if (batch < 0 || h < 0 || w < 0 || c < 0 || h % 2 != 0 || w % 2 != 0) {
    return InvalidArgumentError("max-pool 2x2: need non-negative sizes and even h, w (" +
                                std::to_string(h) + "x" + std::to_string(w) + ")");
  }
  if (int64_t{batch} * h * w * c >= (int64_t{1} << 31)) {
    return OutOfRangeError("max-pool 2x2: input has 2^31 or more elements (int32 arg-max)");
  }
  return Status::Ok();
}

Status CheckScatter(const uint32_t* idx_host, size_t count, size_t n) {
  for (size_t j = 0; j < count; ++j) {
    if (idx_host[j] >= n) {
      return OutOfRangeError("scatter: index " + std::to_string(idx_host[j]) + " >= length " +
                             std::to_string(n));
    }
  }
  return Status::Ok();
}

Status CheckGather(int64_t src_rows, int row_size, const int64_t* rows_host, int count) {
  if (src_rows < 0 || row_size < 0 || count < 0) {
    return InvalidArgumentError("gather rows: negative size");
  }
  for (int j = 0; j < count; ++j) {
    if (rows_host[j] < 0 || rows_host[j] >= src_rows) {
      return OutOfRangeError("gather rows: row " + std::to_string(rows_host[j]) + " outside [0, " +
                             std::to_string(src_rows) + ")");
    }
  }
  return Status::Ok();
}

Status CheckPoolNoise(uint64_t pool_size, uint64_t block, const uint64_t* offsets_host,
                      uint64_t d) {
  auto pow2 = [](uint64_t v) { return v != 0 && (v & (v - 1)) == 0; };
  if (!pow2(pool_size) || !pow2(block) || block < 64 || block > pool_size) {
    return InvalidArgumentError(
        "pool noise: pool size and block must be powers of two with "
        "64 <= block <= pool size");
  }
  const uint64_t blocks = (d + block - 1) / block;
  for (uint64_t b = 0; b < blocks; ++b) {
    if (offsets_host[b] >= pool_size) {
      return InvalidArgumentError("pool noise: offset " + std::to_string(offsets_host[b]) +
                                  " outside the pool");
    }
  }
  return Status::Ok();
}

XentResult ReduceXentRows(const double* row_loss_host, const int32_t* row_hit_host, int batch) {
  double total = 0.0;
  XentResult r;
  for (int b = 0; b < batch; ++b) {
    if (row_loss_host != nullptr) total += row_loss_host[b];
    r.correct += row_hit_host[b];
  }
  r.loss = batch > 0 ? static_cast<float>(total / batch) : 0.0f;
  return r;
}

}  // namespace nn_internal
}  // namespace sieve
