// MergeSortedPairs: the union of two (index, value) lists sorted by strictly ascending index, the
// one merge the shard server does everywhere (the BSP round's union with sums, the ASP per-worker
// lists of changed indices with their latest values). Branch-free in the common loop (the
// comparisons select, they do not jump), so it streams at memory speed on random index patterns.
// Pure function on caller buffers; thread-safe for disjoint outputs.
#ifndef SIEVE_SERVER_SHARD_SORTED_MERGE_H_
#define SIEVE_SERVER_SHARD_SORTED_MERGE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sieve {

// out = a ∪ b by index (both strictly ascending; so is out). An index only in a keeps a's value,
// only in b gets only_b(b's value), in both gets both(a's value, b's value). Writes the result to
// out_idx / out_val, which hold room for a.size() + b.size() pairs and alias no input; returns
// the number of pairs written. (The shard server's parallel merge writes each key range's result
// into its own part this way.)
template <typename OnlyB, typename Both>
size_t MergeSortedPairsTo(std::span<const uint32_t> a_idx, std::span<const float> a_val,
                          std::span<const uint32_t> b_idx, std::span<const float> b_val,
                          uint32_t* out_idx, float* out_val, OnlyB only_b, Both both) {
  const size_t na = a_idx.size(), nb = b_idx.size();
  uint32_t* const oi = out_idx;
  float* const ov = out_val;
  size_t a = 0, b = 0, o = 0;
  while (a < na && b < nb) {
    const uint32_t x = a_idx[a], y = b_idx[b];
    const float va = a_val[a], vb = b_val[b];
    const bool take_a = x <= y, take_b = y <= x;
    oi[o] = take_a ? x : y;
    ov[o] = take_a ? (take_b ? both(va, vb) : va) : only_b(vb);
    a += take_a;
    b += take_b;
    ++o;
  }
  for (; a < na; ++a, ++o) {
    oi[o] = a_idx[a];
    ov[o] = a_val[a];
  }
  for (; b < nb; ++b, ++o) {
    oi[o] = b_idx[b];
    ov[o] = only_b(b_val[b]);
  }
  return o;
}

// The same into vectors: `out_*` are overwritten (their capacity reused).
template <typename OnlyB, typename Both>
void MergeSortedPairs(std::span<const uint32_t> a_idx, std::span<const float> a_val,
                      std::span<const uint32_t> b_idx, std::span<const float> b_val,
                      std::vector<uint32_t>* out_idx, std::vector<float>* out_val, OnlyB only_b,
                      Both both) {
  out_idx->resize(a_idx.size() + b_idx.size());
  out_val->resize(a_idx.size() + b_idx.size());
  const size_t o = MergeSortedPairsTo(a_idx, a_val, b_idx, b_val, out_idx->data(), out_val->data(),
                                      only_b, both);
  out_idx->resize(o);
  out_val->resize(o);
}

}  // namespace sieve

#endif  // SIEVE_SERVER_SHARD_SORTED_MERGE_H_
