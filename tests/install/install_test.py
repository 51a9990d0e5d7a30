"""InstallFindPackage: the C++ client as an installed library (docs/worker-api.md).

1. `cmake --install BUILD --prefix TMP/prefix`.
2. The installed headers stand alone: each compiles with only TMP/prefix/include on the include
   path, includes only the C++ standard library and other installed headers (as "sieve/...", so
   that a project's own base/status.h cannot be taken for sieve's), and names no ZeroMQ, protobuf,
   glog or node-runtime type.
3. examples/cpp (a CMake project of its own: find_package(sieve REQUIRED), sieve::client,
   -Wall -Wextra -Werror) configures and builds out of tree against that prefix alone: the package
   found is the installed one and no compile line points into the source or build tree.
4. pkg-config: the same example compiled and linked by one compiler line from `pkg-config
   --cflags --libs sieve` (PKG_CONFIG_PATH the prefix's lib/.../pkgconfig alone) runs.
5. The example runs: --version prints project(VERSION), and as the one worker of a real job
   (sieve-scheduler and two sieve-servers of this build, synthetic model, BSP) it trains its toy
   objective for 200 rounds of Top-k: it exits 0, pushed exactly rounds·k pairs, the loss fell at
   least tenfold, and the scheduler and servers exit 0 after the job.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

ARGS = None
DEADLINE_S = 120  # bounds a hang only
FORBIDDEN = re.compile(r"zmq|protobuf|google/|glog|\bpb::|\bNode\b|net/|proto/|omp\.h")


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=DEADLINE_S * 2, **kw)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-4000:]}")
    return p.stdout


class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sieve-install-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        run([ARGS.cmake, "--install", ARGS.build_dir, "--prefix", cls.prefix])
        cls.include_root = os.path.join(cls.prefix, "include")
        cls.include = os.path.join(cls.include_root, "sieve")
        cls.example_build = os.path.join(cls.tmp, "example")
        run([ARGS.cmake, "-S", ARGS.example_dir, "-B", cls.example_build, "-G", ARGS.generator,
             f"-DCMAKE_CXX_COMPILER={ARGS.cxx}", "-DCMAKE_BUILD_TYPE=Release",
             f"-DCMAKE_PREFIX_PATH={cls.prefix}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"])
        run([ARGS.cmake, "--build", cls.example_build])
        cls.example = os.path.join(cls.example_build, "worker_loop")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def headers(self):
        out = []
        for root, _, files in os.walk(self.include):
            out += [os.path.join(root, f) for f in files]
        return sorted(out)

    def test_installed_layout(self):
        rel = {os.path.relpath(h, self.include) for h in self.headers()}
        self.assertEqual(rel, {"worker/client/ps_client.h", "worker/client/worker_start.h",
                               "worker/client/worker_progress.h",
                               "kernels/selection.h",
                               "kernels/compressor.h", "kernels/device.h",
                               "kernels/value_precision.h", "base/status.h",
                               "base/version.h"})
        libdir = next(os.path.join(r, "") for r, _, f in os.walk(self.prefix)
                      if "libsieve_ps_client.a" in f)
        self.assertTrue(os.path.exists(os.path.join(libdir, "cmake", "sieve", "sieveConfig.cmake")))
        with open(os.path.join(self.include, "base", "version.h")) as f:
            self.assertIn(f'kVersion[] = "{ARGS.version}"', f.read())

    def test_headers_stand_alone(self):
        for h in self.headers():
            with open(h) as f:
                text = f.read()
            code = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//"))
            self.assertIsNone(FORBIDDEN.search(code), f"{h}: {FORBIDDEN.search(code)}")
            for inc in re.findall(r'#include\s+<([^>]+)>', code):
                self.assertRegex(inc, r"^[a-z_]+$", f"{h} includes <{inc}>, not the standard library")
            for inc in re.findall(r'#include\s+"([^"]+)"', code):
                self.assertTrue(inc.startswith("sieve/"), f"{h} includes \"{inc}\"")
                self.assertTrue(os.path.exists(os.path.join(self.include_root, inc)),
                                f"{h} includes \"{inc}\", which is not installed")
            run([ARGS.cxx, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
                 "-I", self.include_root, "-x", "c++", h])

    def test_a_projects_own_headers_do_not_collide(self):
        # A project with its own base/status.h (another Status) includes sieve's client.
        own = os.path.join(self.tmp, "own")
        os.makedirs(os.path.join(own, "base"), exist_ok=True)
        with open(os.path.join(own, "base", "status.h"), "w") as f:
            f.write("#pragma once\nnamespace app { struct Status { int code; }; }\n")
        src = os.path.join(own, "main.cc")
        with open(src, "w") as f:
            f.write('#include "base/status.h"\n#include <sieve/worker/client/ps_client.h>\n'
                    "int main() { app::Status a{0}; sieve::Status b; return a.code + !b.ok(); }\n")
        run([ARGS.cxx, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
             "-I", own, "-I", self.include_root, src])

    def test_example_built_against_the_prefix(self):
        with open(os.path.join(self.example_build, "CMakeCache.txt")) as f:
            cache = f.read()
        found = re.search(r"^sieve_DIR:PATH=(.*)$", cache, re.M).group(1)
        self.assertTrue(os.path.realpath(found).startswith(os.path.realpath(self.prefix)), found)
        with open(os.path.join(self.example_build, "compile_commands.json")) as f:
            (entry,) = json.load(f)
        cmd = entry["command"]
        self.assertIn("-Werror", cmd)
        tree = os.path.realpath(os.path.join(ARGS.example_dir, "..", ".."))  # source and build
        includes = [os.path.realpath(f) for f in re.findall(r"(?:-I|-isystem\s+)(\S+)", cmd)]
        self.assertIn(os.path.realpath(self.include_root), includes, cmd)
        for path in includes:
            self.assertFalse(path.startswith(tree + os.sep), f"{cmd}\nreaches into {tree}")

    def test_pkg_config(self):
        pcs = [r for r, _, files in os.walk(self.prefix) if "sieve.pc" in files]
        self.assertEqual(len(pcs), 1, pcs)
        env = dict(os.environ, PKG_CONFIG_PATH=pcs[0])
        flags = run(["pkg-config", "--cflags", "--libs", "sieve"], env=env).split()
        self.assertIn("-I" + os.path.realpath(self.include_root),
                      [f if not f.startswith("-I") else "-I" + os.path.realpath(f[2:])
                       for f in flags])
        exe = os.path.join(self.tmp, "worker_loop_pc")
        run([ARGS.cxx, os.path.join(ARGS.example_dir, "worker_loop.cc"), "-o", exe, *flags])
        self.assertEqual(run([exe, "--version"]).strip(), f"worker_loop (sieve {ARGS.version})")

    def test_version(self):
        self.assertEqual(run([self.example, "--version"]).strip(),
                         f"worker_loop (sieve {ARGS.version})")

    def test_trains_in_a_real_job(self):
        d, rounds, density = 100000, 200, 0.01
        logs = tempfile.mkdtemp(dir=self.tmp)
        procs = []

        def start(name, cmd):
            log = open(os.path.join(logs, name + ".log"), "w")
            procs.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log))
            return os.path.join(logs, name + ".log")

        def cluster_log():
            return "\n".join(f"--- {n}:\n" + open(os.path.join(logs, n + ".log")).read()[-3000:]
                             for n, _, _ in procs)

        try:
            port_file = os.path.join(logs, "scheduler.port")
            start("scheduler", [ARGS.scheduler, "--num_servers=2", "--num_workers=1", "--port=0",
                                "--bind=127.0.0.1", f"--port_file={port_file}"])
            deadline = time.monotonic() + DEADLINE_S
            port = None
            while port is None and time.monotonic() < deadline:
                try:  # "HOST:PORT\n", replaced atomically: once there it is whole
                    with open(port_file) as f:
                        text = f.read()
                except FileNotFoundError:
                    text = ""
                if text.endswith("\n"):
                    port = text.strip().rsplit(":", 1)[1]
                    break
                code = procs[0][1].poll()
                self.assertIsNone(code, f"the scheduler exited {code} before writing its port "
                                        f"file\n" + cluster_log())
                time.sleep(0.05)
            self.assertIsNotNone(port, cluster_log())
            address = f"127.0.0.1:{port}"
            for s in range(2):
                start(f"server{s}", [ARGS.server, f"--scheduler={address}", "--model=synthetic",
                                     f"--num_params={d}", "--bind=127.0.0.1"])
            worker = subprocess.run(
                [self.example, f"--scheduler={address}", f"--num_params={d}",
                 f"--rounds={rounds}", f"--density={density}", "--compressor=topk",
                 "--bind=127.0.0.1"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=DEADLINE_S)
            self.assertEqual(worker.returncode, 0, worker.stdout + cluster_log())
            self.assertIn(f"worker 0 of 1, 2 servers, D = {d}", worker.stdout)
            m = re.search(r"(\d+) rounds, k = (\d+), pushed (\d+) pairs, loss (\S+) -> (\S+)",
                          worker.stdout)
            self.assertIsNotNone(m, worker.stdout)
            k = round(density * d)
            self.assertEqual((int(m.group(1)), int(m.group(2)), int(m.group(3))),
                             (rounds, k, rounds * k), worker.stdout)
            before, after = float(m.group(4)), float(m.group(5))
            self.assertGreater(before, 0, worker.stdout)
            self.assertLess(after, before / 10, worker.stdout)
            for name, p, _ in procs:
                self.assertEqual(p.wait(timeout=DEADLINE_S), 0, f"{name}\n" + cluster_log())
        finally:
            for _, p, log in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                log.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for flag in ("cmake", "generator", "cxx", "build_dir", "example_dir", "version", "scheduler",
                 "server"):
        parser.add_argument(f"--{flag}", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
