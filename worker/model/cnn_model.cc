#include "worker/model/cnn_model.h"

#include <glog/logging.h>

#include <string>
#include <utility>
#include <vector>

#include "worker/model/dense_layer.h"

namespace sieve {
namespace {

constexpr int kIn = 28;

// Grows `buf` to n elements and hands back its pointer through *p.
template <typename Buffer, typename T>
Status Grow(Buffer& buf, int64_t n, T** p) {
  SIEVE_RETURN_IF_ERROR(buf.Reserve(static_cast<size_t>(n)));
  *p = buf.data();
  return Status::Ok();
}

}  // namespace

CnnModel::CnnModel(ModelLayout layout, std::unique_ptr<NnOps> ops)
    : Model(std::move(ops)),
      layout_(std::move(layout)),
      patches1_(context()),
      act1_(context()),
      pool1_(context()),
      patches2_(context()),
      act2_(context()),
      pool2_(context()),
      hidden_(context()),
      logits_(context()),
      argmax1_(this->ops()),
      argmax2_(this->ops()),
      d_logits_(context()),
      d_hidden_(context()),
      d_pool2_(context()),
      d_act2_(context()),
      d_patches2_(context()),
      d_pool1_(context()),
      d_act1_(context()) {
  auto find = [this](const std::string& prefix, size_t rank, Offsets* o) {
    const Segment* w = layout_.Find(prefix + ".weight");
    const Segment* b = layout_.Find(prefix + ".bias");
    CHECK(w != nullptr && b != nullptr) << layout_.name << " lacks " << prefix;
    CHECK_EQ(w->shape.size(), rank) << prefix << ".weight has an unexpected shape";
    CHECK_EQ(b->length, static_cast<uint64_t>(w->shape[0])) << prefix;
    *o = Offsets{w->offset, b->offset};
    return w->shape;
  };
  const std::vector<int64_t> c1 = find("conv1", 4, &conv1_);  // [c1][k][k][1]
  const std::vector<int64_t> c2 = find("conv2", 4, &conv2_);  // [c2][k][k][c1]
  const std::vector<int64_t> f1 = find("fc1", 2, &fc1_);      // [hidden][flat]
  const std::vector<int64_t> f2 = find("fc2", 2, &fc2_);      // [10][hidden]
  g_.k = static_cast<int>(c1[1]);
  g_.c1 = static_cast<int>(c1[0]);
  g_.c2 = static_cast<int>(c2[0]);
  g_.hidden = static_cast<int>(f1[0]);
  CHECK(c1[2] == g_.k && c1[3] == 1) << "conv1 must be [c1][k][k][1]";
  CHECK(c2[1] == g_.k && c2[2] == g_.k && c2[3] == g_.c1) << "conv2 must be [c2][k][k][c1]";
  g_.h1 = kIn - g_.k + 1;
  g_.p1 = g_.h1 / 2;
  g_.h2 = g_.p1 - g_.k + 1;
  g_.p2 = g_.h2 / 2;
  CHECK(g_.h1 % 2 == 0 && g_.h2 > 0 && g_.h2 % 2 == 0) << layout_.name << ": odd pooling input";
  g_.flat = g_.p2 * g_.p2 * g_.c2;
  g_.patch1 = g_.k * g_.k;
  g_.patch2 = g_.k * g_.k * g_.c1;
  CHECK_EQ(f1[1], g_.flat) << "fc1 does not take the flattened pool2";
  CHECK(f2[0] == num_classes() && f2[1] == g_.hidden) << "fc2 must be [10][hidden]";
}

Status CnnModel::Run(const float* params, const float* x, const uint8_t* labels, int batch,
                     float* grad, XentResult* out) {
  NnOps& nn = this->nn();
  const Geometry& g = g_;
  const int64_t b = batch;
  const int64_t rows1 = b * g.h1 * g.h1;  // output pixels of conv1
  const int64_t rows2 = b * g.h2 * g.h2;
  const int64_t n_act1 = rows1 * g.c1;
  const int64_t n_act2 = rows2 * g.c2;
  const int64_t n_pool1 = b * g.p1 * g.p1 * g.c1;
  const int64_t n_pool2 = b * g.flat;

  // Forward.
  float *patches1, *act1, *pool1, *patches2, *act2, *pool2, *hidden, *logits;
  int32_t *argmax1, *argmax2;
  SIEVE_RETURN_IF_ERROR(Grow(patches1_, rows1 * g.patch1, &patches1));
  SIEVE_RETURN_IF_ERROR(Grow(act1_, n_act1, &act1));
  SIEVE_RETURN_IF_ERROR(Grow(pool1_, n_pool1, &pool1));
  SIEVE_RETURN_IF_ERROR(Grow(patches2_, rows2 * g.patch2, &patches2));
  SIEVE_RETURN_IF_ERROR(Grow(act2_, n_act2, &act2));
  SIEVE_RETURN_IF_ERROR(Grow(pool2_, n_pool2, &pool2));
  SIEVE_RETURN_IF_ERROR(Grow(hidden_, b * g.hidden, &hidden));
  SIEVE_RETURN_IF_ERROR(Grow(logits_, b * num_classes(), &logits));
  SIEVE_RETURN_IF_ERROR(Grow(argmax1_, n_pool1, &argmax1));
  SIEVE_RETURN_IF_ERROR(Grow(argmax2_, n_pool2, &argmax2));

  SIEVE_RETURN_IF_ERROR(nn.Im2Col(x, batch, kIn, kIn, 1, g.k, patches1));
  SIEVE_RETURN_IF_ERROR(DenseForward(nn, patches1, static_cast<int>(rows1), g.patch1,
                                     params + conv1_.w, params + conv1_.b, g.c1, act1));
  SIEVE_RETURN_IF_ERROR(nn.ReluForward(act1, n_act1));
  SIEVE_RETURN_IF_ERROR(nn.MaxPool2x2Forward(act1, batch, g.h1, g.h1, g.c1, pool1, argmax1));
  SIEVE_RETURN_IF_ERROR(nn.Im2Col(pool1, batch, g.p1, g.p1, g.c1, g.k, patches2));
  SIEVE_RETURN_IF_ERROR(DenseForward(nn, patches2, static_cast<int>(rows2), g.patch2,
                                     params + conv2_.w, params + conv2_.b, g.c2, act2));
  SIEVE_RETURN_IF_ERROR(nn.ReluForward(act2, n_act2));
  SIEVE_RETURN_IF_ERROR(nn.MaxPool2x2Forward(act2, batch, g.h2, g.h2, g.c2, pool2, argmax2));
  SIEVE_RETURN_IF_ERROR(
      DenseForward(nn, pool2, batch, g.flat, params + fc1_.w, params + fc1_.b, g.hidden, hidden));
  SIEVE_RETURN_IF_ERROR(nn.ReluForward(hidden, b * g.hidden));
  SIEVE_RETURN_IF_ERROR(DenseForward(nn, hidden, batch, g.hidden, params + fc2_.w, params + fc2_.b,
                                     num_classes(), logits));

  float* d_logits = nullptr;
  if (grad != nullptr) SIEVE_RETURN_IF_ERROR(Grow(d_logits_, b * num_classes(), &d_logits));
  SIEVE_RETURN_IF_ERROR(
      nn.SoftmaxCrossEntropy(logits, labels, batch, num_classes(), d_logits, out));
  if (grad == nullptr) return Status::Ok();

  // Backward, layer by layer in reverse.
  float *d_hidden, *d_pool2, *d_act2, *d_patches2, *d_pool1, *d_act1;
  SIEVE_RETURN_IF_ERROR(Grow(d_hidden_, b * g.hidden, &d_hidden));
  SIEVE_RETURN_IF_ERROR(Grow(d_pool2_, n_pool2, &d_pool2));
  SIEVE_RETURN_IF_ERROR(Grow(d_act2_, n_act2, &d_act2));
  SIEVE_RETURN_IF_ERROR(Grow(d_patches2_, rows2 * g.patch2, &d_patches2));
  SIEVE_RETURN_IF_ERROR(Grow(d_pool1_, n_pool1, &d_pool1));
  SIEVE_RETURN_IF_ERROR(Grow(d_act1_, n_act1, &d_act1));

  SIEVE_RETURN_IF_ERROR(DenseBackward(nn, hidden, batch, g.hidden, params + fc2_.w, num_classes(),
                                      d_logits, grad + fc2_.w, grad + fc2_.b, d_hidden));
  SIEVE_RETURN_IF_ERROR(nn.ReluBackward(hidden, b * g.hidden, d_hidden));
  SIEVE_RETURN_IF_ERROR(DenseBackward(nn, pool2, batch, g.flat, params + fc1_.w, g.hidden, d_hidden,
                                      grad + fc1_.w, grad + fc1_.b, d_pool2));
  SIEVE_RETURN_IF_ERROR(nn.MaxPool2x2Backward(d_pool2, argmax2, batch, g.h2, g.h2, g.c2, d_act2));
  SIEVE_RETURN_IF_ERROR(nn.ReluBackward(act2, n_act2, d_act2));
  SIEVE_RETURN_IF_ERROR(DenseBackward(nn, patches2, static_cast<int>(rows2), g.patch2,
                                      params + conv2_.w, g.c2, d_act2, grad + conv2_.w,
                                      grad + conv2_.b, d_patches2));
  SIEVE_RETURN_IF_ERROR(nn.Col2Im(d_patches2, batch, g.p1, g.p1, g.c1, g.k, d_pool1));
  SIEVE_RETURN_IF_ERROR(nn.MaxPool2x2Backward(d_pool1, argmax1, batch, g.h1, g.h1, g.c1, d_act1));
  SIEVE_RETURN_IF_ERROR(nn.ReluBackward(act1, n_act1, d_act1));
  return DenseBackward(nn, patches1, static_cast<int>(rows1), g.patch1, params + conv1_.w, g.c1,
                       d_act1, grad + conv1_.w, grad + conv1_.b, nullptr);
}

}  // namespace sieve
