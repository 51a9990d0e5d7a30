#!/usr/bin/env bash
# Collects the sieve daemons, the launcher and the shared libraries they load (except the C
# runtime, which the runtime base image has, and the NVIDIA driver, which the container runtime
# mounts) into PREFIX/bin and PREFIX/lib. Used by the builder stages of deploy/docker/Dockerfile;
# the runtime stage copies PREFIX as a whole and registers PREFIX/lib with ldconfig.
# usage: bundle.sh BUILD_DIR PREFIX
set -euo pipefail
build=$1 prefix=$2
mkdir -p "$prefix/bin" "$prefix/lib"
bins=("$build/scheduler/sieve-scheduler" "$build/server/sieve-server"
      "$build/worker/sieve-worker" "$build/deploy/sieve")
install -m 0755 "${bins[@]}" "$prefix/bin/"
module=("$build"/worker/python/sieve/_core*.so)
[ -e "${module[0]}" ] || module=()
for b in "${bins[@]}" "${module[@]}"; do
  ldd "$b" | awk '/=> \// { print $3 }'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libcuda.so.*|libnvidia*)
      ;;
    *) cp -L "$lib" "$prefix/lib/" ;;
  esac
done
# The Python module (when pybind11 was there to build it; its libraries were copied above) and
# the torch examples.
if [ ${#module[@]} -gt 0 ]; then
  mkdir -p "$prefix/python" "$prefix/examples"
  cp -r "$build/worker/python/sieve" "$prefix/python/"
  cp -r "$(dirname "$0")/../../examples/torch" "$prefix/examples/"
fi
echo "bundle: $(ls "$prefix/bin" | wc -l) programs, $(ls "$prefix/lib" | wc -l) libraries"
