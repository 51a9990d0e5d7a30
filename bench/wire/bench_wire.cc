// bench_wire: what a sparse message costs on the wire and in the codec, v4 layout (raw uint32
// indices) against v5 (proto/index_coding.h: delta-vbyte or bitmap, the smaller), same run.
//   push rows:  one worker's push of k = rho * D random indices of a D-element shard (D = 1e7);
//   reply rows: the ascending union of W workers' random pushes at rho, what a BSP server replies;
//   encode/decode: EncodeData + Decode of the whole message (header, index frame, values, CRC-32C
//   and every check the receiver makes), single thread, the median of --repeats timed runs, in
//   the thread's CPU time (what the codec costs a core, without the shared machine's preemption).
// Bytes per pair count every frame (header included) over the pairs. Values are fp16 unless a row
// says otherwise (the default codec choice the summary line reports). The last line is exactly
//   wire: push B/pair rho=0.001 X rho=0.01 Y; reply B/pair W=8 Z; encode ns/pair A; decode ns/pair
//   B
// (v5, fp16 values; encode/decode of the rho = 0.01 push), for other tools to read.
// Flags: --d=N (1e7) --repeats=N (7) --json=PATH.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bench/common/flag_value.h"
#include "proto/codec.h"
#include "proto/messages.h"

namespace sieve {
namespace {

// The timing thread's CPU time (ns): a shared 2-core machine deschedules it at random, and this
// bench is single-threaded with no waits, so CPU time is the cost without the others' noise.
double CpuNs() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

struct Args {
  uint64_t d = 10'000'000;
  int repeats = 7;
  std::string json;
};

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "bench_wire: %s\n", m.c_str());
  std::exit(1);
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string_view s = argv[i];
    auto value = [&](std::string_view name) { return FlagValue(argv[i], name); };
    if (const char* v = value("d")) {
      a.d = static_cast<uint64_t>(std::atof(v));
    } else if (const char* v = value("repeats")) {
      a.repeats = std::atoi(v);
    } else if (const char* v = value("json")) {
      a.json = v;
    } else if (s == "--help") {
      std::printf("bench_wire [--d=1e7] [--repeats=7] [--json=PATH]: see bench/README.md\n");
      std::exit(0);
    } else {
      Die("unknown flag " + std::string(s) + " (--help)");
    }
  }
  if (a.d < 1000 || a.d > (uint64_t{1} << 32) || a.repeats < 1) Die("bad --d or --repeats");
  return a;
}

// k distinct indices of [0, d), ascending (Floyd's sampling, then sort).
std::vector<uint32_t> RandomIndices(uint64_t d, uint64_t k, std::mt19937_64& rng) {
  std::vector<uint32_t> v;
  v.reserve(k);
  std::vector<uint8_t> seen(d, 0);
  for (uint64_t j = d - k; j < d; ++j) {
    const uint64_t t = std::uniform_int_distribution<uint64_t>(0, j)(rng);
    const uint64_t pick = seen[t] ? j : t;
    seen[pick] = 1;
    v.push_back(static_cast<uint32_t>(pick));
  }
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<uint32_t> Union(uint64_t d, uint64_t k, int workers, std::mt19937_64& rng) {
  std::vector<uint8_t> in(d, 0);
  for (int w = 0; w < workers; ++w)
    for (uint32_t i : RandomIndices(d, k, rng)) in[i] = 1;
  std::vector<uint32_t> u;
  for (uint64_t i = 0; i < d; ++i)
    if (in[i]) u.push_back(static_cast<uint32_t>(i));
  return u;
}

struct Arrays {
  std::vector<uint32_t> indices;
  std::vector<float> values;
  std::vector<uint16_t> half;
};

std::shared_ptr<Arrays> MakeArrays(std::vector<uint32_t> idx, ValueType vt, std::mt19937_64& rng) {
  auto a = std::make_shared<Arrays>();
  a->indices = std::move(idx);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  a->values.resize(a->indices.size());
  for (float& v : a->values) v = normal(rng);
  a->half.resize(a->values.size());
  for (size_t j = 0; j < a->values.size(); ++j) {
    const float v = a->values[j];
    if (vt == ValueType::kFp16) {
      const _Float16 h = static_cast<_Float16>(v);
      std::memcpy(&a->half[j], &h, 2);
    } else {  // bf16: the high half (truncated; any finite bf16 serves the codec)
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      a->half[j] = static_cast<uint16_t>(bits >> 16);
    }
  }
  return a;
}

Frames Encode(const std::shared_ptr<Arrays>& a, ValueType vt, bool compact) {
  pb::Header h = MakeDataHeader(pb::MSG_PUSH, 3, 1, 0, 17);
  DataPayload p;
  p.indices = a->indices;
  p.value_type = vt;
  p.values = vt == ValueType::kFp32 ? std::as_bytes(std::span<const float>(a->values))
                                    : std::as_bytes(std::span<const uint16_t>(a->half));
  p.keepalive = a;
  EncodeOptions eo;
  eo.compact_indices = compact;
  auto frames = EncodeData(h, p, eo);
  if (!frames.ok()) Die(frames.status().ToString());
  return std::move(frames).value();
}

struct Row {
  std::string name;
  uint64_t pairs = 0;
  double bytes_per_pair = 0;
  double encode_ns = 0;  // per pair
  double decode_ns = 0;
  std::string format;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Row Measure(const std::string& name, const std::shared_ptr<Arrays>& a, uint64_t d, ValueType vt,
            bool compact, int repeats) {
  Row r;
  r.name = name;
  r.pairs = a->indices.size();
  Frames sample = Encode(a, vt, compact);
  r.bytes_per_pair = static_cast<double>(FrameBytes(sample)) / static_cast<double>(r.pairs);
  const std::vector<uint64_t> lengths = {d};
  DecodeLimits limits{lengths, true};
  std::vector<double> enc, dec;
  // Enough iterations per timed run for ~20 ms.
  const int inner = std::max<int>(1, static_cast<int>(2'000'000 / std::max<uint64_t>(r.pairs, 1)));
  for (int rep = 0; rep < repeats + 1; ++rep) {
    double t0 = CpuNs();
    uint64_t sink = 0;
    for (int i = 0; i < inner; ++i) sink += FrameBytes(Encode(a, vt, compact));
    const double e = CpuNs() - t0;
    std::vector<Frames> copies;
    for (int i = 0; i < inner; ++i) copies.push_back(CopyFrames(sample));
    t0 = CpuNs();
    for (int i = 0; i < inner; ++i) {
      Message m;
      Status s = Decode(std::move(copies[static_cast<size_t>(i)]), limits, &m);
      if (!s.ok()) Die(name + ": " + s.ToString());
      sink += m.indices.back();
      if (i == 0) r.format = IndexFormatName(m.index_format);
    }
    const double dd = CpuNs() - t0;
    if (sink == 0) Die("no work");
    if (rep == 0) continue;  // warm-up
    enc.push_back(e / inner / static_cast<double>(r.pairs));
    dec.push_back(dd / inner / static_cast<double>(r.pairs));
  }
  r.encode_ns = Median(enc);
  r.decode_ns = Median(dec);
  // The decoded message is the encoded one.
  Message m;
  if (!Decode(CopyFrames(sample), limits, &m).ok() ||
      !std::equal(m.indices.begin(), m.indices.end(), a->indices.begin(), a->indices.end())) {
    Die(name + ": round trip differs");
  }
  return r;
}

// Measures the pairs `idx` with values of type `vt` as a v4 frame (raw indices) and as a v5 one
// (compact indices); appends both rows, named "<what> v4|v5 <type>", to `rows`. Returns {v4, v5}.
std::array<Row, 2> MeasureV4V5(const std::string& what, const std::vector<uint32_t>& idx,
                               ValueType vt, const Args& args, std::mt19937_64& rng,
                               std::vector<Row>* rows) {
  const auto a = MakeArrays(idx, vt, rng);
  std::array<Row, 2> out;
  for (bool compact : {false, true}) {
    const std::string name = what + (compact ? " v5 " : " v4 ") + ValueTypeName(vt);
    out[compact ? 1 : 0] = Measure(name, a, args.d, vt, compact, args.repeats);
    rows->push_back(out[compact ? 1 : 0]);
  }
  return out;
}

}  // namespace
}  // namespace sieve

int main(int argc, char** argv) {
  using namespace sieve;
  const Args args = Parse(argc, argv);
  std::mt19937_64 rng(20261202);
  std::vector<Row> rows;
  const ValueType types[] = {ValueType::kFp32, ValueType::kFp16, ValueType::kBf16};
  double push_bpp[2] = {0, 0}, enc = 0, dec = 0, reply8 = 0, reply8_v4 = 0;
  const double rhos[] = {0.001, 0.01};
  for (int ri = 0; ri < 2; ++ri) {
    const double rho = rhos[ri];
    const auto idx = RandomIndices(args.d, static_cast<uint64_t>(rho * args.d), rng);
    char what[64];
    std::snprintf(what, sizeof(what), "push rho=%g", rho);
    for (ValueType vt : types) {
      const Row v5 = MeasureV4V5(what, idx, vt, args, rng, &rows)[1];
      if (vt == ValueType::kFp16) {
        push_bpp[ri] = v5.bytes_per_pair;
        if (ri == 1) {
          enc = v5.encode_ns;
          dec = v5.decode_ns;
        }
      }
    }
  }
  for (int w : {4, 8, 16}) {
    const auto u = Union(args.d, static_cast<uint64_t>(0.01 * args.d), w, rng);
    const std::string what = "reply W=" + std::to_string(w) + " rho=0.01";
    for (ValueType vt : {ValueType::kFp32, ValueType::kFp16}) {
      const auto [v4, v5] = MeasureV4V5(what, u, vt, args, rng, &rows);
      if (w == 8 && vt == ValueType::kFp16) reply8 = v5.bytes_per_pair;
      if (w == 8 && vt == ValueType::kFp32) reply8_v4 = v4.bytes_per_pair;
    }
  }
  std::printf("%-30s %10s %8s %9s %9s  %s\n", "row", "pairs", "B/pair", "enc ns/p", "dec ns/p",
              "index coding");
  for (const Row& r : rows) {
    std::printf("%-30s %10llu %8.3f %9.3f %9.3f  %s\n", r.name.c_str(),
                static_cast<unsigned long long>(r.pairs), r.bytes_per_pair, r.encode_ns,
                r.decode_ns, r.format.c_str());
  }
  std::printf(
      "targets: push <= 4.5 B/pair at rho=0.001 (%.2f), <= 3.5 at rho=0.01 (%.2f); "
      "reply W=8 <= 0.5 x v4 fp32 (%.2f x); encode + decode <= 1.5 ns/pair (%.2f)\n",
      push_bpp[0], push_bpp[1], reply8 / reply8_v4, enc + dec);
  if (!args.json.empty()) {
    std::ofstream out(args.json);
    out << "{\"d\": " << args.d << ", \"rows\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << (i ? ", " : "") << "{\"name\": \"" << r.name << "\", \"pairs\": " << r.pairs
          << ", \"bytes_per_pair\": " << r.bytes_per_pair
          << ", \"encode_ns_per_pair\": " << r.encode_ns
          << ", \"decode_ns_per_pair\": " << r.decode_ns << ", \"format\": \"" << r.format << "\"}";
    }
    out << "]}\n";
    if (!out) Die("cannot write " + args.json);
  }
  std::printf(
      "wire: push B/pair rho=0.001 %.2f rho=0.01 %.2f; reply B/pair W=8 %.2f; "
      "encode ns/pair %.2f; decode ns/pair %.2f\n",
      push_bpp[0], push_bpp[1], reply8, enc, dec);
  return 0;
}
