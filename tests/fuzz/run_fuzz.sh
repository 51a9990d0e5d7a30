#!/usr/bin/env bash
# Builds tests/fuzz/decode_push_fuzzer.cc with clang + libFuzzer + ASan/UBSan and runs it.
#   tests/fuzz/run_fuzz.sh BUILD_DIR [SECONDS] [extra libFuzzer flags...]
# BUILD_DIR is a configured and built sieve build (for the generated protobuf code and
# libsieve_kernels.a, which is linked uninstrumented). The harness, proto/ and server/ sources are
# compiled here, instrumented. The corpus lives in BUILD_DIR/fuzz/corpus, seeded from the
# checked-in tests/fuzz/corpus. Exit status: 0 = no crash, 77 = clang/libFuzzer not installed
# (a skip for ctest), anything else = a crash (its reproducer is in BUILD_DIR/fuzz/).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="$(cd "${1:?usage: run_fuzz.sh BUILD_DIR [SECONDS]}" && pwd)"
SECS="${2:-20}"
shift $(( $# >= 2 ? 2 : 1 ))
CXX="$(command -v clang++-14 || command -v clang++ || true)"
PROBE="$(mktemp)"
trap 'rm -f "$PROBE"' EXIT
if [ -z "$CXX" ] ||
   ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
     "$CXX" -x c++ -fsanitize=fuzzer - -o "$PROBE" 2>/dev/null; then
  echo "run_fuzz: clang with libFuzzer not installed (apt-get install clang-14 libclang-rt-14-dev); skipped"
  exit 77
fi
OUT="$BUILD/fuzz"
mkdir -p "$OUT/corpus"
GEN="$(dirname "$(find "$BUILD" -name sieve.pb.cc -path '*proto*' | head -1)")"
KERNELS="$BUILD/kernels/libsieve_kernels.a"
# A build with the CUDA backend: libsieve_kernels.a calls into libsieve_kernels_cuda.a, which
# needs the CUDA runtime (static; its path is in the CMake cache).
CUDA_LIBS=()
if [ -f "$BUILD/kernels/libsieve_kernels_cuda.a" ]; then
  CUDART="$(sed -n 's/^SIEVE_CUDART_STATIC:FILEPATH=//p' "$BUILD/CMakeCache.txt")"
  CUDA_LIBS=("$BUILD/kernels/libsieve_kernels_cuda.a" "$CUDART" -ldl -lrt -lpthread)
fi
BIN="$OUT/decode_push_fuzzer"
SRCS=("$HERE/decode_push_fuzzer.cc" "$ROOT/proto/codec.cc" "$ROOT/proto/crc32c.cc" "$ROOT/proto/shards.cc"
      "$ROOT/proto/error_code.cc"
      "$ROOT/proto/index_coding.cc" "$ROOT/proto/stream_vbyte.cc" "$ROOT/proto/register_proof.cc"
      "$ROOT/proto/siphash.cc"
      "$ROOT/server/shard/shard_server.cc" "$ROOT/server/shard/bsp_shard.cc" "$ROOT/server/shard/bsp_shard_rejoin.cc"
      "$ROOT/server/shard/async_shard.cc" "$ROOT/server/shard/change_log.cc"
      "$ROOT/server/shard/consistency.cc"
      "$ROOT/scheduler/scheduler.cc" "$ROOT/scheduler/scheduler_status.cc"
      "$ROOT/scheduler/node_reports.cc" "$ROOT/net/node.cc" "$ROOT/net/inproc_transport.cc"
      "$ROOT/net/zmq_transport.cc" "$ROOT/net/accept_guard.cc" "$ROOT/net/rejection_log.cc"
      "$ROOT/net/inbound_filter.cc"
      "$ROOT/net/zap_handler.cc" "$ROOT/net/address.cc" "$ROOT/net/curve.cc"
      "$ROOT/proto/messages.cc" "$ROOT/proto/job_identity.cc"
      "$ROOT/base/status.cc" "$ROOT/base/fd_reserve.cc" "$ROOT/base/thread_team.cc"
      "$GEN/sieve.pb.cc")
newest_src=$(stat -c %Y "${SRCS[@]}" "$KERNELS" | sort -n | tail -1)
if [ ! -x "$BIN" ] || [ "$(stat -c %Y "$BIN")" -lt "$newest_src" ]; then
  echo "run_fuzz: building $BIN"
  "$CXX" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$ROOT" -I"$GEN/.." -I"$GEN" "${SRCS[@]}" "$KERNELS" "${CUDA_LIBS[@]}" \
    $(pkg-config --cflags --libs libzmq protobuf libglog) -lz -fopenmp=libgomp -lgomp -o "$BIN"
fi
cp -n "$HERE"/corpus/* "$OUT/corpus/" 2>/dev/null || true
cd "$OUT"
"$BIN" -max_total_time="$SECS" -print_final_stats=1 -max_len=4096 "$@" corpus
