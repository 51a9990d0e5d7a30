"""PythonFlagsMatchSieveWorker: the Python worker's flags are sieve-worker's.
  - every flag of sieve.worker.WORKER_FLAGS is one `build/worker/sieve-worker --helpxml` lists,
    of the same type family (string, integer, double, bool) and default; the flags of
    sieve-worker's own sources that the Python worker does not implement are exactly
    NOT_IN_PYTHON below (each with the reason), so a new sieve-worker flag fails this test
    until it is implemented or listed;
  - sieve.torch.WRAPPER_FLAGS are worker flags, and include every flag the environment sets;
  - sieve.worker.ENVIRONMENT is the table kNodeEnvironment of net/node_environment.h (parsed),
    in the same order;
  - sieve.Client.connect's keyword defaults (PsClientOptions') are the flags' defaults;
  - a script calling sieve.torch.init(extra_flags={"width": ...}) with SIEVE_HELPXML=1 prints
    gflags-style XML listing exactly WRAPPER_FLAGS and --width, with the same types and defaults
    as sieve-worker, and exits 0 (how `sieve launch` asks a --worker_cmd for its flags).

usage: flags_test.py BUILD_DIR
"""

import os
import re
import subprocess
import sys
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

BUILD = cluster.setup(sys.argv)

import sieve  # noqa: E402
import sieve.torch  # noqa: E402
from sieve.worker import ENVIRONMENT, WORKER_FLAGS  # noqa: E402

# sieve-worker flags (defined in worker/, net/) a Python worker does not implement; `sieve launch`
# refuses them for a --worker_cmd that does not list them (tests/python/launcher_test.py).
NOT_IN_PYTHON = {
    "grad_dist": "sieve-worker's gradient-distribution dumps of its C++ models",
    "histogram_rounds": "idem (the rounds grad_dist samples)",
    "synthetic_noise": "sieve-worker's built-in synthetic model (--model=synthetic)",
    "synthetic_pull": "idem",
    "synthetic_scale": "idem",
    "eval_every_rounds": "sieve-worker's evaluation inside an epoch (a script evaluates when it "
                         "likes)",
    "eval_deferred": "sieve-worker's copies of its replica evaluated after the last round (a "
                     "script evaluates what and when it likes)",
    "barrier_probe": "the scale harness's barrier latency probe of sieve-worker's start",
    "trace_out": "sieve-worker's timeline of its C++ round (docs/tracing.md)",
    "trace_rounds": "idem (the rounds it records)",
}

FAMILY = {str: {"string"}, int: {"int32", "int64", "uint32", "uint64"}, float: {"double"},
          bool: {"bool"}}


def parse_helpxml(text):
    """{name: (type, default, file)} of gflags --helpxml output."""
    return {f.findtext("name"): (f.findtext("type"), f.findtext("default"), f.findtext("file"))
            for f in ET.fromstring(text).iter("flag")}


def same_default(kind, py_default, xml_default):
    if kind is bool:
        return xml_default == ("true" if py_default else "false")
    if kind is float:
        return float(xml_default) == py_default
    if kind is int:
        return int(xml_default) == py_default
    return xml_default == py_default


class PythonFlagsMatchSieveWorker(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        out = subprocess.run([os.path.join(BUILD, "worker", "sieve-worker"), "--helpxml"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
        cls.cpp = parse_helpxml(out)
        cls.src = cluster.source_dir()

    def test_worker_flags_have_sieve_workers_types_and_defaults(self):
        for name, (kind, default, _) in sorted(WORKER_FLAGS.items()):
            with self.subTest(flag=name):
                self.assertIn(name, self.cpp, f"--{name} is not a sieve-worker flag")
                xml_type, xml_default, _ = self.cpp[name]
                self.assertIn(xml_type, FAMILY[kind], f"--{name}: {kind.__name__} vs {xml_type}")
                self.assertTrue(same_default(kind, default, xml_default),
                                f"--{name}: default {default!r} vs sieve-worker's {xml_default!r}")
        own = {n for n, (_, _, f) in self.cpp.items() if f.startswith(self.src + "/")}
        self.assertEqual(own - set(WORKER_FLAGS), set(NOT_IN_PYTHON),
                         "sieve-worker's flags the Python worker neither implements nor lists "
                         "in NOT_IN_PYTHON (or listed ones it now has)")
        print(f"{len(WORKER_FLAGS)} flags equal to sieve-worker's; not in Python: "
              f"{', '.join(sorted(NOT_IN_PYTHON))}")

    def test_wrapper_flags_and_environment(self):
        self.assertLessEqual(set(sieve.torch.WRAPPER_FLAGS), set(WORKER_FLAGS))
        self.assertEqual(len(set(sieve.torch.WRAPPER_FLAGS)), len(sieve.torch.WRAPPER_FLAGS))
        with open(os.path.join(self.src, "net", "node_environment.h")) as f:
            header = f.read()
        body = re.search(r"kNodeEnvironment\[\]\s*=\s*\{(.*?)\};", header, re.S).group(1)
        table = tuple(re.findall(r'\{\s*"(\w+)"\s*,\s*"(\w+)"\s*\}', body))
        self.assertGreaterEqual(len(table), 8)
        self.assertEqual(tuple(ENVIRONMENT), table)
        for _, flag in ENVIRONMENT:
            self.assertIn(flag, sieve.torch.WRAPPER_FLAGS)
            self.assertIn(flag, self.cpp)

    def test_client_connect_defaults_are_the_flags(self):
        sig = sieve.Client.connect.__doc__.splitlines()[0]
        defaults = dict(re.findall(r"(\w+): \w+ = ('[^']*'|-?\w+)", sig))
        self.assertGreaterEqual(len(defaults), 12, sig)
        for name, text in sorted(defaults.items()):
            with self.subTest(arg=name):
                kind, default, _ = WORKER_FLAGS[name]
                value = text.strip("'") if kind is str else \
                    {"True": True, "False": False}.get(text, text)
                self.assertEqual(kind(value), default, f"Client.connect({name}={text})")

    def test_wire_flags_are_read_and_checked_as_sieve_worker_does(self):
        from sieve.worker import UsageError, parse_flags, wire_values
        f = parse_flags(["--wire_values=bf16", "--wire=v4"], environment=False)
        self.assertEqual((f.wire_values, f.wire, wire_values(f)), ("bf16", "v4", "bf16"))
        self.assertEqual(wire_values(parse_flags([], environment=False)), "fp32")
        # --fp16 is the deprecated --wire_values=fp16; an explicit other value conflicts.
        self.assertEqual(wire_values(parse_flags(["--fp16"], environment=False)), "fp16")
        self.assertEqual(wire_values(parse_flags(["--fp16", "--wire_values=fp16"],
                                                 environment=False)), "fp16")
        for argv, message in ((["--fp16", "--wire_values=bf16"], "conflicts"),
                              (["--fp16", "--wire_values=fp32"], "conflicts"),
                              (["--wire_values=fp8"], "--wire_values"),
                              (["--wire=v6"], "--wire")):
            with self.subTest(argv=argv), self.assertRaisesRegex(UsageError, message):
                wire_values(parse_flags(argv, environment=False))
        # sieve-worker refuses the same command lines with exit 2, naming the flag.
        worker = os.path.join(BUILD, "worker", "sieve-worker")
        for argv, message in ((["--fp16", "--wire_values=bf16"], "conflicts with --wire_values"),
                              (["--wire_values=fp8"], "--wire_values"), (["--wire=v6"], "--wire")):
            r = subprocess.run([worker] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, timeout=60, env=dict(os.environ, SIEVE_SCHEDULER=""))
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(message, r.stderr)
        # A bad name given to the client is a ValueError before anything connects.
        for kwargs in ({"wire_values": "fp8"}, {"wire": "v6"}):
            with self.subTest(**kwargs), self.assertRaises(ValueError):
                sieve.Client.connect("127.0.0.1:1", 10, **kwargs)
        with self.assertRaisesRegex(ValueError, "round_values"):
            sieve.ErrorFeedback(10).select("topk", 2, round_values="fp8")
        # Routed in SIEVE_WORKER_FLAGS, the wire flags reach sieve.torch.init()'s job.
        script = ("import sieve.torch, sieve.worker\n"
                  "job = sieve.torch.init(scheduler='127.0.0.1:1')\n"
                  "print(job.flags.wire_values, job.flags.wire, "
                  "sieve.worker.wire_values(job.flags))\n")
        env = dict(cluster.worker_env(BUILD), SIEVE_WORKER_FLAGS="--wire_values=bf16 --wire=v4")
        env.pop("SIEVE_HELPXML", None)
        r = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["bf16", "v4", "bf16"])

    def test_init_prints_its_flags_as_helpxml(self):
        script = ("import sieve.torch\n"
                  "sieve.torch.init(extra_flags={'width': (int, 128, 'hidden units')})\n"
                  "raise SystemExit('init() returned')\n")
        env = dict(cluster.worker_env(BUILD), SIEVE_HELPXML="1")
        env.pop("SIEVE_SCHEDULER", None)  # as the launcher asks: none of the job's variables
        r = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        flags = parse_helpxml(r.stdout)
        self.assertEqual(set(flags), set(sieve.torch.WRAPPER_FLAGS) | {"width"})
        self.assertEqual(flags["width"][:2], ("int64", "128"))
        for name in sieve.torch.WRAPPER_FLAGS:
            xml_type, xml_default, _ = flags[name]
            kind = WORKER_FLAGS[name][0]
            self.assertIn(xml_type, FAMILY[kind], name)
            self.assertIn(self.cpp[name][0], FAMILY[kind], name)
            self.assertTrue(same_default(kind, WORKER_FLAGS[name][1], xml_default), name)
            self.assertTrue(same_default(kind, WORKER_FLAGS[name][1], self.cpp[name][1]), name)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
