#include "tests/worker/cpu_reference/im2col.h"

#include <cstdint>
#include <cstring>

namespace sieve::cpu_reference {

void Im2Col(const float* x, int batch, int h, int w, int c, int k, float* patches) {
  const int oh = h - k + 1;
  const int ow = w - k + 1;
  const int64_t row = int64_t{k} * k * c;
  for (int b = 0; b < batch; ++b) {
    for (int oy = 0; oy < oh; ++oy) {
      for (int ox = 0; ox < ow; ++ox) {
        float* dst = patches + ((int64_t{b} * oh + oy) * ow + ox) * row;
        for (int ky = 0; ky < k; ++ky) {
          // The k pixels of one kernel row are contiguous in NHWC: k * c floats.
          const float* src = x + ((int64_t{b} * h + oy + ky) * w + ox) * c;
          std::memcpy(dst + int64_t{ky} * k * c, src, sizeof(float) * k * c);
        }
      }
    }
  }
}

void Col2Im(const float* dpatches, int batch, int h, int w, int c, int k, float* dx) {
  const int oh = h - k + 1;
  const int ow = w - k + 1;
  const int64_t row = int64_t{k} * k * c;
  const int64_t kc = int64_t{k} * c;
  for (int b = 0; b < batch; ++b) {
    float* img = dx + int64_t{b} * h * w * c;
    std::memset(img, 0, sizeof(float) * h * w * c);
    for (int oy = 0; oy < oh; ++oy) {
      for (int ox = 0; ox < ow; ++ox) {
        const float* src = dpatches + ((int64_t{b} * oh + oy) * ow + ox) * row;
        for (int ky = 0; ky < k; ++ky) {
          float* dst = img + ((int64_t{oy} + ky) * w + ox) * c;
          const float* s = src + ky * kc;
          for (int64_t j = 0; j < kc; ++j) dst[j] += s[j];
        }
      }
    }
  }
}

}  // namespace sieve::cpu_reference
