"""DeployDockerfile: what can be checked of deploy/docker without a Docker engine.

- The Dockerfile has the stages the docs and manifests name (final targets `cuda` and `cpu`, the
  CUDA devel/runtime bases by default, Debian bookworm for the CPU image), the builders compile
  only the four programs (scripts/setup's `daemons` profile), every final stage runs as the
  non-root uid the manifests declare (runAsUser 10001) and puts /opt/sieve/bin on PATH, every
  COPY from the build context names a path that exists, and .dockerignore keeps build trees,
  tests, docs and manifests out.
- bundle.sh, run on this build tree, yields a self-contained /opt/sieve: every bundled program
  starts (`--help`) with only the bundled libraries plus the C runtime, and the launcher finds the
  daemons next to itself.

usage: dockerfile_test.py BUILD_DIR
"""

import glob
import os
import re
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCKERFILE = os.path.join(REPO, "deploy", "docker", "Dockerfile")
BUILD = None


def stages():
    """[(base, name, [instructions])] of the Dockerfile (continuation lines joined; bases with the
    global ARGs' defaults substituted)."""
    with open(DOCKERFILE, encoding="utf-8") as f:
        text = re.sub(r"\\\n", " ", f.read())
    out, args = [], {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"ARG\s+(\w+)=\"?([^\"]*)\"?$", line, re.I)
        if m and not out:
            args[m.group(1)] = re.sub(r"\$\{(\w+)\}", lambda v: args[v.group(1)], m.group(2))
            continue
        m = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.I)
        if m:
            base = re.sub(r"\$\{(\w+)\}", lambda v: args[v.group(1)], m.group(1))
            out.append((base, m.group(2), []))
        elif out:
            out[-1][2].append(line)
    return out


class DockerfileTest(unittest.TestCase):

    def test_stages(self):
        st = {name: (base, body) for base, name, body in stages()}
        self.assertIn("cuda", st)
        self.assertIn("cpu", st)
        self.assertTrue(st["build-cuda"][0].startswith("nvidia/cuda:") and
                        "-devel-" in st["build-cuda"][0])
        self.assertTrue(st["cuda"][0].startswith("nvidia/cuda:") and "-runtime-" in st["cuda"][0])
        self.assertEqual(st["cpu"][0], "debian:bookworm-slim")
        self.assertEqual(st["build-cpu"][0], "debian:bookworm")
        for final in ("cuda", "cpu"):
            body = st[final][1]
            users = [i.split()[1] for i in body if i.upper().startswith("USER ")]
            self.assertEqual(users, ["10001:10001"], final)
            self.assertTrue(any("PATH=/opt/sieve/bin" in i for i in body), final)
            self.assertTrue(any("/usr/share/datasets/fashion-mnist" in i for i in body), final)
        # The builders compile the four programs only (scripts/setup's `daemons` profile), and
        # take the package list from scripts/setup.
        for builder in ("build-cpu", "build-cuda"):
            body = " ".join(st[builder][1])
            self.assertIn("SIEVE_SETUP=packages scripts/setup", body, builder)
            self.assertIn("SIEVE_SETUP=daemons", body, builder)
            self.assertNotIn("--target all", body, builder)
        self.assertIn("-DSIEVE_BUILD_TESTS=OFF", " ".join(st["build-cuda"][1]))
        # cpu-python: the cpu image plus torch and the module, still unprivileged at the end.
        base, body = st["cpu-python"]
        self.assertEqual(base, "cpu")
        self.assertEqual([i.split()[1] for i in body if i.upper().startswith("USER ")][-1],
                         "10001:10001")
        self.assertTrue(any("python3-torch" in i for i in body))
        self.assertTrue(any("PYTHONPATH=/opt/sieve/python" in i for i in body))

    def test_copy_sources_exist(self):
        for _, name, body in stages():
            for i in body:
                if i.upper().startswith("COPY ") and "--from=" not in i:
                    src = i.split()[1]
                    self.assertTrue(os.path.exists(os.path.join(REPO, src)), f"{name}: {i}")

    def test_dockerignore(self):
        with open(os.path.join(REPO, ".dockerignore"), encoding="utf-8") as f:
            entries = {line.strip() for line in f if line.strip() and not line.startswith("#")}
        for e in (".git", "build", "build-*", "results", "tests", "docs", "deploy/k8s"):
            self.assertIn(e, entries)

    def test_bundle_is_self_contained(self):
        with tempfile.TemporaryDirectory(prefix="sieve-bundle-") as tmp:
            prefix = os.path.join(tmp, "opt", "sieve")
            subprocess.run([os.path.join(REPO, "deploy", "docker", "bundle.sh"), BUILD, prefix],
                           check=True, timeout=120)
            bins = sorted(os.listdir(os.path.join(prefix, "bin")))
            self.assertEqual(bins, ["sieve", "sieve-scheduler", "sieve-server", "sieve-worker"])
            libs = os.listdir(os.path.join(prefix, "lib"))
            for expected in ("libzmq", "libprotobuf", "libopenblas", "libgflags", "libglog"):
                self.assertTrue(any(lib.startswith(expected) for lib in libs), expected)
            self.assertFalse(any(lib.startswith("libc.so") for lib in libs))
            module = glob.glob(os.path.join(BUILD, "worker", "python", "sieve", "_core*.so"))
            if module:  # built (pybind11 present): bundled with the examples, libraries resolved
                self.assertTrue(os.path.exists(os.path.join(prefix, "examples", "torch",
                                                            "fashion_mnist.py")))
                bundled = glob.glob(os.path.join(prefix, "python", "sieve", "_core*.so"))
                self.assertEqual(len(bundled), 1)
                ldd = subprocess.run(["ldd", bundled[0]], capture_output=True, text=True,
                                     env={"LD_LIBRARY_PATH": os.path.join(prefix, "lib")})
                self.assertNotIn("not found", ldd.stdout)
            env = {"PATH": os.path.join(prefix, "bin") + ":/usr/bin:/bin",
                   "LD_LIBRARY_PATH": os.path.join(prefix, "lib")}
            for b in bins:
                proc = subprocess.run([os.path.join(prefix, "bin", b), "--help"], env=env,
                                      capture_output=True, text=True, timeout=30, check=False)
                self.assertNotIn("error while loading shared libraries", proc.stderr, b)
                self.assertIn("sieve", proc.stdout + proc.stderr, b)
            # All bundled libraries resolve from the bundle (or the C runtime).
            for b in bins:
                ldd = subprocess.run(["ldd", os.path.join(prefix, "bin", b)], env=env,
                                     capture_output=True, text=True, timeout=30, check=True)
                self.assertNotIn("not found", ldd.stdout, b)


if __name__ == "__main__":
    BUILD = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
