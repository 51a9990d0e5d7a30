#include "tests/worker/cpu_reference/max_pool.h"

#include <cstring>

namespace sieve::cpu_reference {

void MaxPool2x2Forward(const float* x, int batch, int h, int w, int c, float* y, int32_t* argmax) {
  const int oh = h / 2;
  const int ow = w / 2;
  for (int b = 0; b < batch; ++b) {
    for (int oy = 0; oy < oh; ++oy) {
      for (int ox = 0; ox < ow; ++ox) {
        for (int ch = 0; ch < c; ++ch) {
          int32_t best = ((b * h + 2 * oy) * w + 2 * ox) * c + ch;
          for (int dy = 0; dy < 2; ++dy) {
            for (int dx = 0; dx < 2; ++dx) {
              const int32_t i = ((b * h + 2 * oy + dy) * w + 2 * ox + dx) * c + ch;
              if (x[i] > x[best]) best = i;
            }
          }
          const int32_t j = ((b * oh + oy) * ow + ox) * c + ch;
          y[j] = x[best];
          argmax[j] = best;
        }
      }
    }
  }
}

void MaxPool2x2Backward(const float* dy, const int32_t* argmax, int batch, int h, int w, int c,
                        float* dx) {
  std::memset(dx, 0, sizeof(float) * batch * h * w * c);
  const int n = batch * (h / 2) * (w / 2) * c;
  // Windows do not overlap, so every x position receives at most one contribution.
  for (int j = 0; j < n; ++j) dx[argmax[j]] = dy[j];
}

}  // namespace sieve::cpu_reference
