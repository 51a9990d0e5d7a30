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
for b in "${bins[@]}"; do
  ldd "$b" | awk '/=> \// { print $3 }'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libcuda.so.*|libnvidia*)
      ;;
    *) cp -L "$lib" "$prefix/lib/" ;;
  esac
done
echo "bundle: $(ls "$prefix/bin" | wc -l) programs, $(ls "$prefix/lib" | wc -l) libraries"
