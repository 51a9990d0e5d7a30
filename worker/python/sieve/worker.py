"""The command line of a Python worker: the same flags as `sieve-worker`, read the same way.

`sieve launch --worker_cmd="python3 train.py"` (and the Kubernetes manifests) start a Python
worker with exactly the arguments `sieve-worker` would get: `--scheduler=HOST:PORT --rank=R
--bind=ADDR --host=ADDR`, then every pass-through flag that `sieve-worker` defines (the launcher
routes flags by `sieve-worker --helpxml`), possibly inside `--flagfile=FILE`s (one `--name=value`
a line; `#` comments). `parse_flags` reads them into a `Flags` object: the flags in `WORKER_FLAGS`
(the subset of sieve-worker's flags a Python worker implements, same names, defaults and meaning)
plus the script's own `extra` flags. A flag neither defines, or a bad value, raises
`UsageError` naming it (scripts exit 2 on it, like every sieve program).

Flags of sieve-worker that only tune its C++ model code (`--blas_threads`, `--kernel_threads`,
`--progress`) are accepted: `--blas_threads` sets torch's intra-op threads, the others are
ignored. `--metrics_port` serves /healthz (the Kubernetes probes) and a small /metrics
(`serve_health`).
"""

import http.server
import os
import shlex
import sys
import threading

# name -> (type, default, help). Types: str, int, float, bool.
WORKER_FLAGS = {
    "scheduler": (str, "127.0.0.1:9310", "Scheduler address host:port"),
    "rank": (int, -1, "Requested worker rank (-1 = the scheduler assigns one)"),
    "bind": (str, "0.0.0.0", "Interface address to bind"),
    "host": (str, "", "Address peers use to reach this worker (empty = detect)"),
    "port": (int, 0, "TCP port to listen on (0 = any free port)"),
    "curve_dir": (str, "", "CurveZMQ key directory (docs/security.md)"),
    "curve_key": (str, "", "This worker's client key pair file (default: curve_dir/client.key)"),
    "job_token_file": (str, "", "File holding the job token (docs/security.md)"),
    "job_token": (str, "", "The job token itself (prefer job_token_file)"),
    "heartbeat_interval_ms": (int, 1000, "Heartbeat period (0 disables heartbeats)"),
    "heartbeat_timeout_ms": (int, 10000, "Scheduler silent this long -> the worker fails"),
    "round_timeout_ms": (int, 120000, "Longest wait for one round's replies / barrier / pull"),
    "shutdown_timeout_ms": (int, 600000, "Longest wait for the job's end after finishing"),
    "model": (str, "fnn3", "The job's model (the servers' layout; the script picks the network)"),
    "num_params": (int, 0, "D of --model=synthetic"),
    "data_dir": (str, "/usr/share/datasets/fashion-mnist", "Fashion-MNIST idx files"),
    "batch_size": (int, 32, "Minibatch size per worker"),
    "epochs": (int, 1, "Passes over the data partition"),
    "max_rounds": (int, 0, "Stop after this many rounds of the job (0 = no limit)"),
    "rounds_per_epoch": (int, 100, "Rounds per epoch of synthetic data"),
    "lr": (float, 0.05, "Learning rate per round"),
    "momentum": (float, 0.9, "Momentum (m = mu*m + g, r += lr*m)"),
    "momentum_masking": (bool, True, "Zero the momentum where the residual was selected "
                         "(false: keep it)"),
    "weight_decay": (float, 0.0, "L2 weight decay added to the gradient"),
    "lr_warmup_epochs": (float, 0.0, "Linear learning-rate warm-up, in epochs"),
    "lr_steps": (str, "", "Comma-separated epochs at which lr *= lr_gamma"),
    "lr_gamma": (float, 0.1, "Factor of each --lr_steps step"),
    "compressor": (str, "topk", "none|topk|gaussiank|gaussiank_paper|dgc|randomk"),
    "density": (float, 0.001, "Density after the warm-up: k = round(density*D)"),
    "density_warmup": (str, "", "Comma-separated densities of epochs 0, 1, ..."),
    "device": (str, "auto", "auto|cpu|cuda: where the parameters and error feedback live"),
    "wire_values": (str, "fp32", "fp32|fp16|bf16: precision of pushed values (the rounding error "
                    "stays in the residual; the servers' flag sets their replies')"),
    "wire": (str, "v5", "v5 (compact index frames) or v4 (raw uint32 indices)"),
    "fp16": (bool, False, "Deprecated: --wire_values=fp16"),
    "checksum": (bool, True, "Checksum pushed payloads"),
    "seed": (int, 1, "Seed of shuffling and randomk (the servers' --seed sets the weights)"),
    "eval_every": (int, 1, "Rank 0: test accuracy every n epochs and at the end (0 = end)"),
    "metrics_out": (str, "", "JSON lines per round ({rank} is replaced)"),
    "metrics_every": (int, 1, "A metrics line every n rounds"),
    "contraction_every": (int, 0, "Add the contraction ratio and its bounds every n rounds "
                          "(0 = never)"),
    "straggler": (str, "", "Emulated slow workers: SPEC or RANK:SPEC items, SPEC = none, "
                  "delay:T, xF or exp:T (sieve-worker's --straggler)"),
    "dump_weights": (str, "", "Write the final replica as raw fp32 ({rank} is replaced)"),
    "summary_out": (str, "", "Write the end-of-run summary as JSON ({role}, {rank} replaced)"),
    "blas_threads": (int, 1, "torch intra-op threads"),
    "kernel_threads": (int, 1, "ignored (sieve-worker's OpenMP threads)"),
    "progress": (str, "auto", "ignored (progress lines are printed when stdout is no TTY)"),
    "metrics_port": (int, 0, "Serve /healthz and /metrics on this port (0 = off)"),
}


class UsageError(ValueError):
    """A bad command line: an unknown flag or a malformed value (exit status 2)."""


class Flags:
    """Parsed flags as attributes (`flags.lr`); `explicit` holds the names given."""

    def __init__(self, values, explicit):
        self.__dict__.update(values)
        self.explicit = explicit

    def float_list(self, name):
        text = getattr(self, name)
        try:
            return [float(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"--{name}: not a comma-separated list of numbers: {text!r}")

    def int_list(self, name):
        text = getattr(self, name)
        try:
            return [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"--{name}: not a comma-separated list of integers: {text!r}")


# Environment variable -> flag: the job as `sieve launch` and the Kubernetes manifests export it
# (docs/worker-api.md, "Environment variables"); a flag given explicitly wins.
ENVIRONMENT = (("SIEVE_SCHEDULER", "scheduler"), ("SIEVE_RANK", "rank"), ("SIEVE_BIND", "bind"),
               ("SIEVE_HOST", "host"), ("SIEVE_JOB_TOKEN_FILE", "job_token_file"),
               ("SIEVE_CURVE_DIR", "curve_dir"), ("SIEVE_CURVE_KEY", "curve_key"),
               ("SIEVE_METRICS_PORT", "metrics_port"))


def convert_flag(name, kind, text, where=None):
    """text as a value of flag `name` of type kind; UsageError naming the flag (and `where` the
    text came from, e.g. an environment variable) when it is not one."""
    source = f" (from {where})" if where else ""
    if kind is bool:
        if text in ("true", "1", "yes", "True"):
            return True
        if text in ("false", "0", "no", "False"):
            return False
        raise UsageError(f"--{name}{source}: expected true or false, got {text!r}")
    try:
        return kind(text)
    except ValueError:
        raise UsageError(f"--{name}{source}: expected {kind.__name__}, got {text!r}")



def print_helpxml(spec, program):
    """Prints the flags of `spec` (name -> (type, default, help)) as gflags' --helpxml does: how
    `sieve launch` learns which worker flags a --worker_cmd implements (SIEVE_HELPXML=1)."""
    def xml(text):
        return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    types = {str: "string", int: "int64", float: "double", bool: "bool"}
    out = ['<?xml version="1.0"?>', "<AllFlags>", f"<program>{xml(program)}</program>",
           f"<usage>{xml(program)}: a Python worker of a sieve job</usage>"]
    for name, (kind, default, text) in sorted(spec.items()):
        value = str(default).lower() if kind is bool else str(default)
        out.append(f"<flag><file>{xml(program)}</file><name>{name}</name><meaning>{xml(text)}"
                   f"</meaning><default>{xml(value)}</default><current>{xml(value)}</current>"
                   f"<type>{types[kind]}</type></flag>")
    out.append("</AllFlags>")
    print("\n".join(out), flush=True)


def _read_flagfile(path, depth):
    if depth > 8:
        raise UsageError(f"--flagfile={path}: flag files nest too deeply")
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise UsageError(f"--flagfile={path}: {e.strerror}")
    words = []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("//"):
            continue
        if not line.startswith("-"):
            raise UsageError(f"{path}:{number}: not a flag: {line!r}")
        words.append((line, f"{path}:{number}"))
    return words


def parse_flags(argv, extra=None, program="worker", spec=None, environment=True):
    """Parses argv (without the program name) into Flags. `extra`: the script's own flags,
    name -> (type, default, help); `spec`: the flags to accept instead of WORKER_FLAGS. With
    `environment`, the worker flags `sieve launch` routes in SIEVE_WORKER_FLAGS come first (argv
    wins), and SIEVE_HELPXML=1 prints the accepted flags as --helpxml and exits 0. Raises
    UsageError; `--help` raises SystemExit(0) after printing every flag."""
    spec = dict(WORKER_FLAGS if spec is None else spec)
    spec.update(extra or {})
    if environment and os.environ.get("SIEVE_HELPXML"):
        print_helpxml(spec, program)
        raise SystemExit(0)
    values = {name: default for name, (_, default, _) in spec.items()}
    explicit = set()
    queue = [(w, "command line") for w in argv]
    if environment and os.environ.get("SIEVE_WORKER_FLAGS"):
        queue = [(w, "SIEVE_WORKER_FLAGS") for w in shlex.split(os.environ["SIEVE_WORKER_FLAGS"])
                 ] + queue
    depth = 0
    while queue:
        word, where = queue.pop(0)
        if word in ("--help", "-h", "--helpfull"):
            print(f"usage: {program} [--flag=value ...]   (sieve-worker's flags; docs/worker-api.md)")
            for name, (kind, default, text) in sorted(spec.items()):
                print(f"  --{name}={default!r} ({kind.__name__})  {text}")
            raise SystemExit(0)
        if not word.startswith("-") or word in ("-", "--"):
            raise UsageError(f"unexpected argument {word!r} ({where})")
        body = word.lstrip("-")
        name, has_value, value = body.partition("=")
        if name == "flagfile":
            if not has_value:
                if not queue:
                    raise UsageError("--flagfile needs a file")
                value = queue.pop(0)[0]
            depth += 1
            queue = _read_flagfile(value, depth) + queue
            continue
        if name not in spec and name.startswith("no") and name[2:] in spec \
                and spec[name[2:]][0] is bool and not has_value:
            values[name[2:]] = False
            explicit.add(name[2:])
            continue
        if name not in spec:
            close = [n for n in spec if n.startswith(name[:4])] if len(name) >= 4 else []
            hint = f" (did you mean --{close[0]}?)" if close else ""
            raise UsageError(f"unknown flag --{name} ({where}){hint}")
        kind = spec[name][0]
        if not has_value:
            if kind is bool:
                value = "true"
            elif queue:
                value = queue.pop(0)[0]
            else:
                raise UsageError(f"--{name} needs a value")
        values[name] = convert_flag(name, kind, value)
        explicit.add(name)
    return Flags(values, explicit)


def job_from_environment(flags):
    """The ENVIRONMENT variables (SIEVE_SCHEDULER, SIEVE_RANK, ...) set the flags not given
    explicitly: the job as `sieve launch` and the manifests export it."""
    spec = dict(WORKER_FLAGS)
    for var, name in ENVIRONMENT:
        value = os.environ.get(var)
        if value and name not in flags.explicit:
            setattr(flags, name, convert_flag(name, spec[name][0], value, where=var))
            flags.explicit.add(name)
    return flags


def serve_health(bind, port, status):
    """Serves GET /healthz (200 "ok") and /metrics (Prometheus text of `status()`, a dict of
    gauge name -> number) on bind:port from a daemon thread, like sieve-worker's --metrics_port;
    port 0 serves nothing. Returns the server (or None)."""
    if port <= 0:
        return None

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/healthz":
                body = b"ok\n"
            elif self.path == "/metrics":
                body = "".join(f"{name} {value}\n" for name, value in status().items()).encode()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((bind, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def wire_values(flags):
    """The pushes' precision the flags give: --wire_values, or fp16 for the deprecated --fp16
    (UsageError when --fp16 is given with an explicit other --wire_values, or a bad name)."""
    if flags.wire_values not in ("fp32", "fp16", "bf16"):
        raise UsageError(f"--wire_values must be fp32, fp16 or bf16, got {flags.wire_values!r}")
    if getattr(flags, "wire", "v5") not in ("v5", "v4"):
        raise UsageError(f"--wire must be v5 or v4, got {flags.wire!r}")
    if not getattr(flags, "fp16", False):
        return flags.wire_values
    if "wire_values" in flags.explicit and flags.wire_values != "fp16":
        raise UsageError(f"--fp16 (deprecated: --wire_values=fp16) conflicts with "
                         f"--wire_values={flags.wire_values}")
    return "fp16"


def connect(flags, num_params):
    """Joins the job the flags name as a worker declaring D = num_params (sieve.Client)."""
    from . import _core
    return _core.Client.connect(flags.scheduler, num_params, rank=flags.rank, bind=flags.bind,
                                host=flags.host, port=flags.port,
                                wire_values=wire_values(flags), wire=flags.wire,
                                checksum=flags.checksum, curve_dir=flags.curve_dir,
                                job_token=flags.job_token, job_token_file=flags.job_token_file,
                                curve_key=flags.curve_key,
                                heartbeat_interval_ms=flags.heartbeat_interval_ms,
                                heartbeat_timeout_ms=flags.heartbeat_timeout_ms)


def leave_on_failure(client, train, *args):
    """Runs train(*args); on any exception stops the client at once (request_stop wakes every
    wait), then re-raises. The scheduler drops the worker when its heartbeats stop
    (--heartbeat_timeout_ms)."""
    try:
        return train(*args)
    except BaseException as e:
        client.request_stop(f"the Python worker failed: {e}")
        raise


def run_main(main, program):
    """sys.exit(main(sys.argv[1:])) with sieve's exit codes: 2 on a UsageError, 1 on a job or
    input error (sieve.Error, TimeoutError, ValueError), each printed as `program: message`."""
    from . import _core
    try:
        code = main(sys.argv[1:])
    except UsageError as e:
        print(f"{program}: {e}", file=sys.stderr)
        code = 2
    except (_core.Error, TimeoutError, ValueError) as e:
        print(f"{program}: {e}", file=sys.stderr)
        code = 1
    sys.exit(code)


def report_end(program, opt, flags):
    """The end of a worker script: --dump_weights, a line with the mean time in opt.step()
    (everything but the batch, forward and backward), then opt.finish()."""
    if flags.dump_weights:
        opt.dump_weights(flags.dump_weights)
    rounds = opt.round - opt.first_round
    print(f"{program}: rank={opt.rank} rounds={rounds} "
          f"mean_step_s={opt.overhead_seconds / max(rounds, 1):.6f}", file=sys.stderr)
    opt.finish()  # waits up to the routed --shutdown_timeout_ms (the job's flags)
