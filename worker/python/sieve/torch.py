"""sieve.torch: a PyTorch training script, written the PyTorch way, as a worker of a sieve job.

    import torch, sieve.torch
    sieve.torch.init()                                   # the job, from SIEVE_* (sieve launch)
    model = MyNet()                                      # the model defines the job's D
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    opt = sieve.torch.DistributedOptimizer(opt, model, compressor="topk", density=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for epoch in range(epochs):
        for x, y in loader:                              # this worker's part of the data
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()                                   # params = the servers' values
        sched.step()
    opt.finish()                                         # optional: also done at exit

`DistributedOptimizer(optimizer, model)` returns the same optimizer object, now also an instance
of a subclass of its own class (so `isinstance(opt, torch.optim.SGD)`, `param_groups`,
`torch.optim.lr_scheduler.*`, `zero_grad`, `state_dict` all behave as in torch). Its `step()`
lets the wrapped optimizer compute this round's update u (the change it would make to the
weights), adds u to the error-feedback residual r, selects k = round(density * D) entries of r
(the compressor; those entries of r are zeroed, and for SGD with momentum also of the momentum
buffer, as sieve-worker does), pushes them and writes the servers' reply into the parameters. For
SGD with momentum this is sieve-worker's round exactly (docs/worker-api.md).

The job comes from the environment, as torchrun's env://: SIEVE_SCHEDULER, SIEVE_RANK, ...
(docs/worker-api.md, "Environment variables"); `init()`'s arguments override them. With servers
started without --model (what `sieve launch --worker_cmd` and the python manifests do), D is the
model's and the initial weights are rank 0's own (torch's init), pushed to the servers before the
start barrier, as DDP broadcasts rank 0's parameters.

Only trainable parameters (requires_grad=True) are in D: a frozen parameter the optimizer holds
is left out and never changed. A param_groups entry may carry `sieve_density` and
`sieve_compressor`: each group is then selected on its own slice of the flat vector (see
DistributedOptimizer).

Input errors raise before anything is pushed: parameters that are not float32 or not contiguous,
on mixed or unsupported devices, a model whose size is not the job's D, bad `sieve_*` group keys,
an nn.Embedding with sparse=True.
"""

import atexit
import contextlib
import dataclasses
import math
import numbers
import os
import sys
import time

import numpy as np
import torch

from . import _core
from . import worker as _worker

__all__ = ["DistributedOptimizer", "Job", "init", "rank", "num_workers", "flat_size",
           "default_device", "allreduce", "broadcast", "barrier", "broadcast_parameters",
           "WRAPPER_FLAGS"]

# clip=: where a worker's gradient is clipped, for a clip_norm c and N workers (_clip_grads).
CLIP_RULES = ("local", "dgc", "average")

# The most elements one collective carries (proto/codec.h, kMaxCollectiveValues).
MAX_COLLECTIVE_ELEMENTS = 65536

# The sieve-worker flags a torch worker implements (sieve launch routes only these to a
# --worker_cmd: others are refused before the job starts). Same names, types and meaning as
# sieve-worker's; tests/python check them against `sieve-worker --helpxml`.
WRAPPER_FLAGS = ("scheduler", "rank", "bind", "host", "port", "curve_dir", "curve_key",
                 "job_token_file", "job_token", "heartbeat_interval_ms", "heartbeat_timeout_ms",
                 "round_timeout_ms", "shutdown_timeout_ms", "compressor", "density",
                 "density_warmup", "wire_values", "wire", "fp16", "checksum", "seed",
                 "metrics_out", "metrics_every", "contraction_every", "straggler",
                 "dump_weights", "summary_out", "metrics_port", "device", "blas_threads",
                 "momentum_masking")

def flat_size(model_or_params):
    """D: the number of trainable (requires_grad) parameter values a model, an optimizer (its
    param_groups) or an iterable of parameters puts in the flat vector. Frozen parameters are not
    counted: DistributedOptimizer leaves them out of the job."""
    if isinstance(model_or_params, torch.nn.Module):
        params = [p for _, p in model_or_params.named_parameters()]
    elif isinstance(model_or_params, torch.optim.Optimizer):
        params = [p for g in model_or_params.param_groups for p in g["params"]]
    else:
        params = list(model_or_params)
    unique = {id(p): p for p in params}.values()
    return sum(p.numel() for p in unique if p.requires_grad)


def default_device(name):
    """sieve-worker's --device: auto (cuda when this build and torch have one), cpu or cuda."""
    if name == "auto":
        return "cuda" if _core.cuda_compiled and torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda"):
        raise ValueError(f"--device must be auto, cpu or cuda, got {name!r}")
    if name == "cuda" and not (_core.cuda_compiled and torch.cuda.is_available()):
        raise ValueError("--device=cuda: no usable GPU (or a sieve build without CUDA)")
    return name


class Job:
    """Where this worker's job is and how to join it: `scheduler`, `rank` (-1 = the scheduler
    picks), `num_workers` / `num_servers` (0 = unknown until connected), the transport and
    security settings, and `flags` (sieve.worker.Flags: the routed worker flags, e.g.
    `flags.compressor`, with `flags.explicit` naming those given). Made by `init()`."""

    def __init__(self, flags, num_workers, num_servers):
        self.flags = flags
        self.scheduler = flags.scheduler
        self.rank = flags.rank
        self.num_workers = num_workers
        self.num_servers = num_servers
        self.client = None  # set when an optimizer connects
        self.trained = None  # the optimizer's flat buffer: the parameters the job trains
        # What /metrics shows (the optimizer updates it); /healthz answers from init() on, so
        # that Kubernetes probes pass while the job forms (model building, data, registration).
        self.progress = {"sieve_worker_rounds_total": 0, "sieve_worker_bytes_up_total": 0}
        self.health = None

    def serve_health(self):
        """Serves /healthz and /metrics on --metrics_port (SIEVE_METRICS_PORT), once; port 0:
        nothing. Errors: ValueError naming the port when it cannot be bound."""
        if self.health is None and self.flags.metrics_port > 0:
            try:
                self.health = _worker.serve_health(self.flags.bind, self.flags.metrics_port,
                                                   lambda: dict(self.progress))
            except OSError as e:
                raise ValueError(f"--metrics_port={self.flags.metrics_port}: {e.strerror}")
        return self.health

    def connect(self, d):
        """Registers as a worker declaring D = d (sieve.Client)."""
        if self.client is None:
            self.client = _worker.connect(self.flags, d)
            self.rank = self.client.rank
            self.num_workers = self.client.num_workers
            self.num_servers = self.client.num_servers
        return self.client


_default_job = None  # the job init() made last (what DistributedOptimizer uses by default)


def init(scheduler=None, rank=None, num_workers=None, extra_flags=None, argv=None, **settings):
    """Reads the job this process is a worker of and returns it (also kept as the default job of
    DistributedOptimizer). Sources, later ones winning: the defaults, the environment (SIEVE_*
    variables, and SIEVE_WORKER_FLAGS: worker flags `sieve launch` routes, e.g.
    `--compressor=gaussiank`), `argv` when given (e.g. sys.argv[1:] for a script that takes
    sieve-worker's flags), then the arguments (scheduler="host:port", rank, and any flag name of
    WRAPPER_FLAGS as a keyword, e.g. job_token_file=...). `extra_flags`: the script's own flags,
    name -> (type, default, help), accepted in SIEVE_WORKER_FLAGS / argv as well.

    With SIEVE_HELPXML=1 in the environment (how `sieve launch` asks a --worker_cmd which flags
    it implements) this prints them as gflags' --helpxml does and exits 0.

    Errors: ValueError naming the variable when no scheduler is known, sieve.worker.UsageError
    for a bad or unknown flag."""
    global _default_job
    extra = dict(extra_flags or {})
    spec = {n: _worker.WORKER_FLAGS[n] for n in WRAPPER_FLAGS}
    spec.update(extra)
    flags = _worker.parse_flags(list(argv or []), program="sieve.torch", spec=spec)
    env_given = set()
    for var, name in _worker.ENVIRONMENT:
        value = os.environ.get(var)
        if value and name not in flags.explicit:
            setattr(flags, name, _worker.convert_flag(name, spec[name][0], value, where=var))
            env_given.add(name)
    for name, value in (("scheduler", scheduler), ("rank", rank)) + tuple(settings.items()):
        if value is None:
            continue
        if name not in spec:
            raise TypeError(f"init() got an unknown setting {name!r}")
        setattr(flags, name, value)
        flags.explicit.add(name)
    if "scheduler" not in flags.explicit and "scheduler" not in env_given:
        raise ValueError("no scheduler: SIEVE_SCHEDULER is not set (sieve launch sets it for "
                         "every worker) and no scheduler='host:port' was given to "
                         "sieve.torch.init()")
    workers = num_workers if num_workers is not None else \
        int(os.environ.get("SIEVE_NUM_WORKERS", "0") or 0)
    servers = int(os.environ.get("SIEVE_NUM_SERVERS", "0") or 0)
    _default_job = Job(flags, workers, servers)
    _default_job.serve_health()
    return _default_job


def _job():
    return _default_job if _default_job is not None else init()


def rank():
    """This worker's rank: known before connecting when the launcher assigned it (SIEVE_RANK)."""
    job = _job()
    if job.rank < 0:
        raise ValueError("the rank is assigned at registration: set SIEVE_RANK or create the "
                         "DistributedOptimizer first")
    return job.rank


def num_workers():
    """The job's number of workers (SIEVE_NUM_WORKERS, or the node table once connected)."""
    job = _job()
    if job.num_workers <= 0:
        raise ValueError("the number of workers is unknown before connecting: set "
                         "SIEVE_NUM_WORKERS or create the DistributedOptimizer first")
    return job.num_workers


def _connected_client(what):
    client = _job().client
    if client is None:
        raise ValueError(f"{what} needs this worker in the job: create the DistributedOptimizer "
                         "first (it connects the worker)")
    return client


def _collective(op, tensor, root, timeout_ms, what):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what} takes a torch tensor, got {type(tensor).__name__}")
    if tensor.numel() > MAX_COLLECTIVE_ELEMENTS:
        raise ValueError(f"{what} of {tensor.numel()} elements: a collective carries at most "
                         f"{MAX_COLLECTIVE_ELEMENTS} (it goes through the scheduler; the model's "
                         "values go through the servers)")
    host = tensor.detach().to("cpu", torch.float32).contiguous().reshape(-1)
    if not bool(torch.isfinite(host).all()):
        raise ValueError(f"{what}: every value must be finite")
    client = _connected_client(what)
    values, contributors = client.collective(op, host.numpy(), root, timeout_ms)
    out = torch.from_numpy(values).reshape(tensor.shape).to(tensor.device, tensor.dtype)
    return out, contributors


def allreduce(tensor, op="mean", timeout_ms=120000):
    """The element-wise sum (op="sum") or mean (op="mean": the sum over the number of workers
    that took part) of `tensor` over every live worker, as a new tensor of its shape, dtype and
    device. For small tensors (a metric, a flag, BatchNorm buffers): at most
    MAX_COLLECTIVE_ELEMENTS elements, sent as float32 through the scheduler, summed in fp64 in
    rank order and rounded once, so every worker gets the same bits. Every worker must call the
    same collectives (allreduce, broadcast) in the same order with tensors of the same size.
    Errors: ValueError (op, size, a non-finite value, no DistributedOptimizer yet) before
    anything is sent; sieve.Error when the workers' calls disagree or the wait times out."""
    if op not in ("sum", "mean"):
        raise ValueError(f"allreduce op must be 'sum' or 'mean', got {op!r}")
    out, contributors = _collective("sum", tensor, 0, timeout_ms, "allreduce")
    return out / contributors if op == "mean" else out


def broadcast(tensor, root=0, timeout_ms=120000):
    """Worker `root`'s `tensor`, on every worker (exactly, as float32), as a new tensor of this
    worker's shape, dtype and device; the same rules as allreduce."""
    out, _ = _collective("broadcast", tensor, root, timeout_ms, "broadcast")
    return out


def broadcast_parameters(params, root=0, timeout_ms=120000):
    """Horovod's broadcast_parameters: each tensor of `params` (a state_dict, named_parameters(),
    or tensors) becomes worker `root`'s on every worker, in place: exactly for float32 (and for
    integers up to 2^24, e.g. BatchNorm's num_batches_tracked; the values travel as float32). For what the job does not keep equal by itself: buffers (BatchNorm statistics),
    frozen parameters, any other tensor. The parameters a DistributedOptimizer trains are the
    servers' weights, the same on every worker, and are left as they are, so the usual
    `broadcast_parameters(model.state_dict(), root=0)` after wrapping does what it does under
    Horovod. The values go through the scheduler, at most MAX_COLLECTIVE_ELEMENTS per collective
    (a large tensor takes several): meant for buffers, not for a whole model. Every worker must
    call it with tensors of the same sizes in the same order, after its DistributedOptimizer
    (collectives need the job). Returns how many tensors were broadcast. Errors: ValueError
    before anything is sent (no DistributedOptimizer yet; on `root`, a non-finite value: the
    other workers then time out with sieve.Error), TypeError for a value that is not a tensor."""
    if isinstance(params, dict):
        tensors = list(params.values())
    else:
        tensors = [t[1] if isinstance(t, tuple) else t for t in params]
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"broadcast_parameters takes tensors, got {type(t).__name__}")
    client = _connected_client("broadcast_parameters")
    trained = _job().trained

    def is_trained(t):
        if trained is None or t.device != trained.device or t.numel() == 0:
            return False
        begin = trained.data_ptr()
        return begin <= t.data_ptr() < begin + trained.numel() * trained.element_size()

    chosen = [t for t in tensors if not is_trained(t) and t.numel() > 0]
    is_root = client.rank == root
    if is_root:
        for t in chosen:
            if not bool(torch.isfinite(t.detach().float()).all()):
                raise ValueError("broadcast_parameters: every value must be finite")
    with torch.no_grad():
        for t in chosen:
            src = t.detach()
            flat = src.contiguous().reshape(-1)  # src itself when contiguous
            for begin in range(0, flat.numel(), MAX_COLLECTIVE_ELEMENTS):
                part = flat[begin:begin + MAX_COLLECTIVE_ELEMENTS]
                # Only the root's values count: the others send zeros (their own may not even
                # be finite).
                sent = part if is_root else torch.zeros_like(part)
                got = broadcast(sent, root=root, timeout_ms=timeout_ms)
                if not is_root:
                    part.copy_(got)
            if not is_root and flat.data_ptr() != src.data_ptr():
                src.copy_(flat.view(src.shape))
    return len(chosen)


def barrier(timeout_ms=120000):
    """Waits until every live worker called barrier() (the workers' barrier at the scheduler)."""
    _connected_client("barrier").barrier(timeout_ms)


def _device_of(params):
    devices = {p.device for p in params}
    if len(devices) != 1:
        raise ValueError("the parameters are on several devices: " +
                         ", ".join(sorted(str(d) for d in devices)))
    device = devices.pop()
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"the parameters are on device '{device}', which sieve does not support "
                         "(cpu, or cuda with a CUDA build)")
    if device.type == "cuda" and not _core.cuda_compiled:
        raise ValueError(f"the parameters are on '{device}' but this sieve module was built "
                         "without the CUDA backend")
    return device


# Optimizers whose weight_decay adds wd * w to the gradient (coupled L2): sieve adds it itself
# before the step, so the update can be computed exactly (see _Sieve._local_update).
_COUPLED_DECAY = (torch.optim.SGD, torch.optim.Adam, torch.optim.Adagrad, torch.optim.RMSprop)

# The keys a param_groups entry may carry for sieve (any other "sieve_*" key is refused).
GROUP_KEYS = ("sieve_density", "sieve_compressor")

# The fields of the summary line (worker/trainer/summary.h): record() refuses them as names.
_SUMMARY_FIELDS = frozenset((
    "rank", "rounds", "first_round", "epochs", "test_acc", "near_chance", "loss", "bytes_up",
    "bytes_down", "dense_bytes", "ratio", "mean_round_s", "max_pushpull_s", "seconds",
    "pushed_sum", "skipped_rounds", "missed_slices", "returned_sum", "barrier_probes",
    "barrier_p50_ms", "barrier_p99_ms", "barrier_probe_s", "straggler", "straggle_s",
    "train_acc"))


def _group_settings(param_groups):
    """[(sieve_density or None, sieve_compressor or None)] per group; ValueError for an unknown
    sieve_* key, a density outside (0, 1] or an unknown compressor name."""
    settings = []
    for i, group in enumerate(param_groups):
        unknown = sorted(k for k in group if isinstance(k, str) and k.startswith("sieve_") and
                         k not in GROUP_KEYS)
        if unknown:
            raise ValueError(f"param_groups[{i}] has unknown key(s) {', '.join(unknown)}; "
                             f"sieve.torch reads {' and '.join(GROUP_KEYS)}")
        density = group.get("sieve_density")
        if density is not None:
            if (isinstance(density, bool) or not isinstance(density, numbers.Real) or
                    not 0.0 < density <= 1.0):
                raise ValueError(f"param_groups[{i}]['sieve_density'] must be in (0, 1] (1.0: "
                                 f"the group is sent dense), got {density!r}")
            density = float(density)
        compressor = group.get("sieve_compressor")
        if compressor is not None:
            if not isinstance(compressor, str):
                raise ValueError(f"param_groups[{i}]['sieve_compressor'] must be a compressor "
                                 f"name, got {compressor!r}")
            try:
                compressor = _core.parse_compressor(compressor)
            except ValueError as e:
                raise ValueError(f"param_groups[{i}]['sieve_compressor']: {e}") from None
        settings.append((density, compressor))
    return settings


class _Part:
    """A slice [offset, offset + n) of the flat vector with its own error feedback (momentum and
    residual) and selection: the whole vector, or one param group with per-group settings."""

    def __init__(self, group, offset, n, density, compressor, device):
        self.group, self.offset, self.n = group, offset, n
        self.density, self.compressor = density, compressor  # None: the optimizer's
        self.ef = _core.ErrorFeedback(n, device)
        self.selection = _core.Selection()
        self.hints = _core.ThresholdHints()  # the selection's warm start (sieve-worker's C++)

    @property
    def thresholds(self):
        """The hints as (prev, older): the last two finite, > 0 thresholds (a checkpoint's)."""
        return self.hints.pair

    @thresholds.setter
    def thresholds(self, pair):
        self.hints.pair = tuple(pair)

    @property
    def slice(self):
        return slice(self.offset, self.offset + self.n)


@dataclasses.dataclass
class _Arguments:
    """DistributedOptimizer's arguments (its docstring says what each means). resolve() lets the
    flags `sieve launch` routes (SIEVE_WORKER_FLAGS) win over them, so that `sieve compare` can
    vary a script's settings; check() raises ValueError for a bad one. Both run before anything
    connects."""

    compressor: str
    density: float
    density_warmup: object  # densities of epochs 0, 1, ... (a sequence)
    steps_per_epoch: object  # None: unknown
    epochs: int
    seed: int
    metrics_out: str
    metrics_every: int
    contraction_every: int
    round_timeout_ms: int
    progress: object  # None: when stdout is not a terminal
    wire_values: object  # None: init()'s
    wire: object  # None: init()'s
    density_warmup_steps: int
    clip_norm: object  # None: no clipping
    clip: str
    buffers: str
    momentum_masking: bool

    def resolve(self, job):
        """The wire (sieve-worker's --wire_values / --wire): routed flags win, then these
        arguments, then init()'s; fixed once the job's client is connected. Every other routed
        flag replaces its argument."""
        flags = job.flags
        given = flags.explicit
        for name in ("wire_values", "wire"):
            value = getattr(self, name)
            if value is not None and name not in given:
                if job.client is not None and getattr(flags, name) != value:
                    raise ValueError(f"{name}={value!r}: this job's client is already connected "
                                     f"with {name}={getattr(flags, name)!r}")
                setattr(flags, name, value)
        _worker.wire_values(flags)  # a bad name raises before anything connects
        if "compressor" in given:
            self.compressor = flags.compressor
        if "density" in given:
            self.density = flags.density
        if "density_warmup" in given:  # replaces the script's warm-up, of either kind
            self.density_warmup = flags.float_list("density_warmup")
            self.density_warmup_steps = 0
        for name in ("seed", "metrics_out", "metrics_every", "contraction_every",
                     "round_timeout_ms", "momentum_masking"):
            if name in given:
                setattr(self, name, getattr(flags, name))

    def check(self):
        """ValueError naming the first bad argument (the compressor is parsed before)."""
        for name, value in (("density", self.density),) + tuple(
                (f"density_warmup[{i}]", d) for i, d in enumerate(self.density_warmup)):
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        steps = self.density_warmup_steps
        if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 0:
            raise ValueError(f"density_warmup_steps must be an int >= 0, got {steps!r}")
        if self.density_warmup and steps:
            raise ValueError("give density_warmup (densities per epoch) or density_warmup_steps "
                             "(a ramp over rounds), not both")
        if self.steps_per_epoch is None and self.density_warmup:
            raise ValueError("density_warmup needs steps_per_epoch (or use "
                             "density_warmup_steps=N, which does not)")
        if self.metrics_every < 1:
            raise ValueError("metrics_every must be >= 1")
        every = self.contraction_every
        if isinstance(every, bool) or not isinstance(every, numbers.Integral) or every < 0:
            raise ValueError(f"contraction_every must be an int >= 0, got {every!r}")
        if self.clip not in CLIP_RULES:
            raise ValueError(f"clip must be one of {', '.join(map(repr, CLIP_RULES))}, got "
                             f"{self.clip!r}")
        if not isinstance(self.momentum_masking, bool):
            raise ValueError(f"momentum_masking must be True or False, got "
                             f"{self.momentum_masking!r}")
        norm = self.clip_norm
        if norm is not None and (isinstance(norm, bool) or not isinstance(norm, numbers.Real) or
                                 not 0.0 < norm < math.inf):
            raise ValueError(f"clip_norm must be a finite number > 0 (or None), got {norm!r}")


def _ledger_counter(name, doc):
    """A read-only attribute of _SieveState: its ledger's counter `name`."""
    return property(lambda self: getattr(self.ledger, name), doc=doc)


class _SieveState:
    """Everything a wrapped optimizer keeps for sieve (its `_sieve`). The settings, parameters,
    job, flat buffers and error feedback are set once, when it is wrapped (by the steps of
    _Sieve._sieve_setup each group's comment names); the counters and the reports change with
    every step()."""

    # The rounds' counters, read from the ledger (worker/trainer/round_ledger.h).
    bytes_up = _ledger_counter("bytes_up", "Payload bytes pushed (push/pull and collectives).")
    bytes_down = _ledger_counter("bytes_down",
                                 "Payload bytes received (push/pull and collectives).")
    pairs_up = _ledger_counter("pairs_up", "(index, value) pairs pushed.")
    pushed_sum = _ledger_counter("pushed_sum", "The sum of the pushed values (fp64).")
    returned_sum = _ledger_counter(
        "returned_sum", "Backup workers: pushed, never applied, back in the residual.")
    missed_slices = _ledger_counter(
        "missed_slices", "Backup workers: shards that closed the round without the push.")
    skipped_rounds = _ledger_counter("skipped_rounds",
                                     "Backup workers: rounds that closed without this worker.")

    def __init__(self):
        # The settings (DistributedOptimizer's arguments after the routed flags; configure()).
        self.compressor = None  # the optimizer's compressor (a parsed name)
        self.density = None  # k = round(density * D) past the warm-up
        self.density_warmup = []  # densities of epochs 0, 1, ...
        self.density_warmup_steps = 0  # N > 0: the geometric ramp over rounds 0..N
        self.clip_norm = None  # c > 0 clips the gradient to global norm c; None: no clipping
        self.clip = "local"  # a CLIP_RULES name: each worker's threshold (_clip_grads)
        self.momentum_masking = True  # zero SGD's momentum where r was selected
        self.steps_per_epoch = None  # None: unknown (no epochs in the metrics and progress)
        self.epochs = 1
        self.round_timeout_ms = 0  # a push/pull's and a collective's wait
        self.shutdown_timeout_ms = 0  # finish()'s wait for the job's end
        self.dump_weights = ""  # --dump_weights pattern, written at finish()
        self.summary_out = ""  # --summary_out pattern, written at finish()
        self.straggler_plan = ""  # --straggler (worker/trainer/straggler.h); "" = none

        # The parameters (_collect_parameters).
        self.base = None  # the wrapped optimizer's own class
        self.device = None  # the parameters' torch.device (one for all)
        self.params = []  # the trainable parameters, in param_groups order
        self.frozen = []  # the parameters with requires_grad=False: not in D, never changed
        self.names = {}  # id(parameter) -> its name in errors
        self.d = 0  # D: the trainable parameters' values

        # The job (_connect, _enter_job).
        self.job = None  # the Job this worker is in
        self.client = None  # the job's sieve.Client
        self.rank = -1
        self.num_workers = 0
        self.seed_key = None  # the selection's random stream of this rank (randomk, dgc)
        self.first_round = 0  # the round this worker entered the job at
        self.round = 0  # the round this worker pushes next
        self.rejoined = False  # whether a restarted worker rejoined a running job

        # The flat buffers (_flatten): the parameters and gradients are views of them.
        self.flat = None  # the weights over D
        self.flat_grad = None  # the gradients over D
        self.backup = None  # scratch over D (the weights around a step, g + wd * w)
        self.views = []  # per trainable parameter: (offset, numel) in the flat vector
        self.group_slices = []  # per param group: the slice of its trainable parameters
        self.flat_momentum = None  # SGD's momentum buffers as views of one buffer (masking)
        self.fused = None  # whether the last step took the fused SGD path (_move_momentum)

        # The error feedback and selection (_build_error_feedback).
        self.per_group = False  # whether a group carries sieve_* settings (a _Part per group)
        self.parts = []  # the _Parts: one over D, or one per group with trainable parameters
        self.combiner = None  # the error feedback the push returns unapplied pairs into
        self.comb_m = None  # per group: zeros over D (the combiner's momentum)
        self.comb_r = None  # per group: the groups' selected values over D, zeros elsewhere
        self.selection = None  # the selection pushed each round

        # The model's buffers (_setup_buffers).
        self.buffers_mode = "local"  # "local", "broadcast" or "average"
        self.buffers = []  # the buffers exchanged after each step ([] for "local")

        # The counters (the summary line, the job status, /metrics). The rounds' own (bytes_up,
        # bytes_down, pairs_up, pushed_sum, returned_sum, missed_slices, skipped_rounds: the
        # class's properties) are sieve-worker's C++ ledger (worker/trainer/round_ledger.h).
        self.ledger = _core.RoundLedger()
        self.dense_bytes = 0  # what dense pushes of D would have sent
        self.max_pushpull_s = 0.0  # the longest push/pull (a server failover's stall)
        self.steps_past_end = 0  # step() calls after the job's last round (skipped or rejoined)

        # The reports: metrics lines, progress lines, record() (_open_reports, _report).
        self.metrics = None  # the metrics_out writer (_core.MetricsWriter)
        self.metrics_every = 1  # a metrics line every n rounds (and the last)
        self.contraction_every = 0  # the contraction ratio every n rounds (0: never)
        self.progress = False  # whether progress lines are printed
        self.loss = None  # record(loss=): the loss of the round the next step() completes
        self.test_acc = None  # the last record(test_acc=)
        self.last_loss = None  # the last round's loss when finite and >= 0 (the job status)
        self.recorded = {}  # record(name=value): the last value of each, for the summary line
        self.pending = None  # (metrics line of the last round, whether it is due), see _report
        self.epoch_loss = 0.0  # the sum of this epoch's losses so far
        self.epoch_rounds = 0  # this epoch's rounds so far
        self.last_epoch_loss = 0.0  # the mean loss of the last full epoch
        self.last_progress = 0.0  # when the last progress line was printed
        self.start = 0.0  # when the worker entered the job (perf_counter)
        self.round_start = 0.0  # when this round's compute began (zero_grad, or the last step)
        self.overhead_seconds = 0.0  # the time spent in step()
        self.straggler = None  # this worker's _core.Straggler when --straggler slows it
        self.straggle_seconds = 0.0  # compute time the straggler added, in all
        self.errors_retried = 0  # the client's ERRORs answered by sending again (at close)
        self.client_closed = False  # finish() closed the client

        # The end.
        self.finished = False  # finish() or abort() ran
        self.failed = None  # an uncaught exception ("Kind: message"): abort at exit

    def configure(self, args, flags):
        """The settings from the resolved arguments and the job's flags."""
        self.density, self.density_warmup = args.density, list(args.density_warmup)
        self.density_warmup_steps = int(args.density_warmup_steps)
        self.clip_norm = None if args.clip_norm is None else float(args.clip_norm)
        self.clip = args.clip
        self.momentum_masking = args.momentum_masking
        self.steps_per_epoch, self.epochs = args.steps_per_epoch, args.epochs
        self.round_timeout_ms = args.round_timeout_ms
        self.shutdown_timeout_ms = flags.shutdown_timeout_ms
        self.dump_weights = flags.dump_weights
        self.summary_out = flags.summary_out
        self.straggler_plan = flags.straggler


def _trainable_parameters(param_groups):
    """(trainable, frozen, per group its trainable parameters): each parameter once, in
    param_groups order (the same on every rank)."""
    params, frozen, seen = [], [], set()
    groups_params = []
    for group in param_groups:
        mine = []
        for p in group["params"]:
            if id(p) in seen:
                continue
            seen.add(id(p))
            if p.requires_grad:
                params.append(p)
                mine.append(p)
            else:
                frozen.append(p)
        groups_params.append(mine)
    return params, frozen, groups_params


def _check_parameters(params, frozen, names):
    """ValueError for no trainable parameter, or one that is not float32 or not contiguous."""
    if not params:
        raise ValueError("the optimizer has no trainable parameters (requires_grad=True)"
                         if frozen else "the optimizer has no parameters")
    for i, p in enumerate(params):
        name = names.get(id(p), f"param_groups parameter {i}")
        if p.dtype != torch.float32:
            raise ValueError(f"parameter {name} is {p.dtype}; sieve trains float32 "
                             "parameters (model.float())")
        if not p.is_contiguous():
            raise ValueError(f"parameter {name} is not contiguous; sieve keeps parameters "
                             "as views of one flat buffer")


def _check_model(model, held):
    """ValueError for a trainable parameter of the model the optimizer does not hold (`held`:
    the ids of the optimizer's parameters), or an embedding with sparse gradients."""
    missing = [n for n, p in model.named_parameters() if p.requires_grad and id(p) not in held]
    if missing:
        raise ValueError("the optimizer does not hold these parameters of the model: " +
                         ", ".join(missing[:5]))
    for mname, module in model.named_modules():
        if (isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and
                module.sparse and module.weight.requires_grad):
            raise ValueError(
                f"module {mname or '(the model)'} ({type(module).__name__}) has "
                "sparse=True: sieve.torch does not support sparse gradients; use "
                "sparse=False (to send the embedding every round, give its param group "
                "sieve_density=1.0)")


class _Sieve:
    """The methods a wrapped optimizer gains (mixed in before its own class). Its state is
    `self._sieve`, a _SieveState."""

    def _sieve_setup(self, model, job, args):
        """Makes this optimizer a worker of `job` (DistributedOptimizer), in this order: the
        arguments and the parameters are checked (ValueError before anything connects); the
        worker connects (a failed connect leaves the model as it was); the parameters become
        views of one flat buffer; the error feedback is built; the worker enters the job (start
        barrier); then the metrics file, the buffers' check (before anything is pushed) and the
        exit hooks."""
        args.resolve(job)
        s = self._sieve = _SieveState()
        s.compressor = _core.parse_compressor(args.compressor)
        args.check()
        group_settings = _group_settings(self.param_groups)
        s.configure(args, job.flags)
        groups_params = self._collect_parameters(model)
        self._connect(job)
        self._setup_straggler(args.seed)
        self._flatten(groups_params)
        self._build_error_feedback(groups_params, group_settings)
        self._enter_job(args.seed)
        self._open_reports(args.metrics_out, args.metrics_every, args.progress)
        s.contraction_every = args.contraction_every
        self._setup_buffers(model, args.buffers)  # before anything is pushed
        s.start = time.perf_counter()
        s.round_start = s.start
        job.serve_health()  # already serving when init() made the job
        self._install_exit_hooks()

    def _collect_parameters(self, model):
        """The trainable parameters into the state, frozen ones (requires_grad=False) apart: left
        out of D and never changed. ValueError for a bad parameter (_check_parameters,
        _check_model, _device_of). Returns each group's trainable parameters."""
        s = self._sieve
        params, frozen, groups_params = _trainable_parameters(self.param_groups)
        names = {id(p): n for n, p in model.named_parameters()} if model is not None else {}
        _check_parameters(params, frozen, names)
        if model is not None:
            _check_model(model, {id(p) for p in params + frozen})
        s.base = type(self).__mro__[2]  # (this class, _Sieve, the wrapped optimizer's class)
        s.device = _device_of(params)
        s.params = params
        s.frozen = frozen
        s.names = {id(p): names.get(id(p), f"param_groups parameter {i}")
                   for i, p in enumerate(params + frozen)}
        s.d = sum(p.numel() for p in params)
        return groups_params

    def _setup_straggler(self, seed):
        """This worker's part of --straggler, as sieve-worker's (its rank, the job's workers and
        --seed known): ValueError for a bad plan or a rank the job does not have."""
        s = self._sieve
        if s.straggler_plan:
            straggler = _core.Straggler(s.straggler_plan, s.rank, s.num_workers, seed)
            s.straggler = straggler if straggler.active else None

    def _connect(self, job):
        """Registers with the job, declaring D (before anything is flattened: a failed connect
        leaves the model as it was). ValueError when the job has another D."""
        s = self._sieve
        client = job.connect(s.d)
        if client.num_params != s.d:  # a job connected before, for another model
            raise ValueError(f"the job has D = {client.num_params} parameters but the model has "
                             f"{s.d}")
        s.job, s.client = job, client
        s.rank, s.num_workers = client.rank, client.num_workers

    def _flatten(self, groups_params):
        """One flat buffer; the parameters (and their gradients) become views of it, in
        param_groups order, so each group's trainable parameters are one slice."""
        s = self._sieve
        with torch.no_grad():
            s.flat = torch.empty(s.d, dtype=torch.float32, device=s.device)
            s.flat_grad = torch.zeros(s.d, dtype=torch.float32, device=s.device)
            s.backup = torch.empty_like(s.flat)
            s.views = []
            offset = 0
            for p in s.params:
                n = p.numel()
                s.flat[offset:offset + n].copy_(p.reshape(-1))
                p.data = s.flat[offset:offset + n].view_as(p)
                p.grad = s.flat_grad[offset:offset + n].view_as(p)
                s.views.append((offset, n))
                offset += n
        s.job.trained = s.flat
        # A weight decay per group on the fused path reads these slices.
        s.group_slices, offset = [], 0
        for mine in groups_params:
            n = sum(p.numel() for p in mine)
            s.group_slices.append(slice(offset, offset + n))
            offset += n

    def _build_error_feedback(self, groups_params, group_settings):
        """One error feedback over D, or with per-group settings (a sieve_* key in any group) one
        per group with trainable parameters, each over its slice, and a combiner over D."""
        s = self._sieve
        s.per_group = any(d is not None or c is not None for d, c in group_settings)
        device = s.device.type
        if not s.per_group:
            s.parts = [_Part(None, 0, s.d, None, None, device)]
            s.combiner = s.parts[0].ef
            s.selection = s.parts[0].selection
            return
        view_of = {id(p): view for p, view in zip(s.params, s.views)}
        s.parts, offset = [], 0
        for i, (mine, (g_density, g_compressor)) in enumerate(zip(groups_params,
                                                                  group_settings)):
            n = 0
            for p in mine:  # the group's parameters follow each other in the flat vector
                assert view_of[id(p)][0] == offset + n, "a param group is not one slice"
                n += p.numel()
            if n == 0:
                continue
            s.parts.append(_Part(i, offset, n, g_density, g_compressor, device))
            offset += n
        assert offset == s.d
        # The groups' selections are combined into the one pushed (host memory).
        s.combiner = _core.ErrorFeedback(s.d, "cpu")
        s.comb_m = np.zeros(s.d, dtype=np.float32)
        s.comb_r = np.zeros(s.d, dtype=np.float32)
        s.selection = _core.Selection()

    def _enter_job(self, seed):
        """Enters the job: rank 0 offers its own weights (the model's init), the start barrier,
        the servers' weights; or the rejoin of a restarted worker (worker/client/worker_start)."""
        s = self._sieve
        s.seed_key = _core.counter_hash(seed, 0x5E1EC70000 + s.rank)
        started = s.client.start(s.flat, s.round_timeout_ms)
        s.first_round = started["first_round"]
        # A worker that rejoins a job the others have finished (its join round lies past the
        # last one) has no round left to push, as sieve-worker: its round is the job's end.
        s.round = s.first_round
        if s.steps_per_epoch:
            s.round = min(s.round, s.steps_per_epoch * s.epochs)
        s.rejoined = started["rejoined"]

    def _open_reports(self, metrics_out, metrics_every, progress):
        """The metrics file (rank 0's, or every rank's with {rank} in the pattern) and whether
        progress lines are printed (default: when stdout is not a terminal)."""
        s = self._sieve
        s.metrics = _core.MetricsWriter()
        if metrics_out and (s.rank == 0 or "{rank}" in metrics_out):
            s.metrics.open(_core.expand_rank_pattern(metrics_out, s.rank))
        s.metrics_every = metrics_every
        s.progress = (not sys.stdout.isatty()) if progress is None else progress

    def _install_exit_hooks(self):
        """finish() at exit; an uncaught exception makes that an abort (the job is told this
        worker failed)."""
        s = self._sieve
        atexit.register(self._sieve_at_exit)
        previous_hook = sys.excepthook

        def hook(kind, value, tb):
            s.failed = f"{kind.__name__}: {value}"
            previous_hook(kind, value, tb)
        sys.excepthook = hook

    # --- what torch users see ---

    @property
    def round(self):
        """The round this worker pushes next."""
        return self._sieve.round

    @property
    def steps_past_end(self):
        """step() calls that did nothing because this worker (rejoined late, or skipping rounds
        under backup workers) was already at the job's last round, epochs x steps_per_epoch."""
        return self._sieve.steps_past_end

    @property
    def rank(self):
        return self._sieve.rank

    @property
    def num_workers(self):
        return self._sieve.num_workers

    def record(self, loss=None, test_acc=None, train_acc=None, **metrics):
        """Values for the metrics lines (metrics_out), progress lines and summary line. `loss`
        (a number or a tensor) is the training loss of the round the next step() completes;
        `test_acc` / `train_acc` (rank 0, after evaluating) belong to the round the last step()
        completed, and the last test_acc is the summary's. Any other name (perplexity=,
        bleu=, ...) takes one finite number (or one-element tensor): the summary line shows the
        last value of each as name=value. ValueError (nothing recorded) for a value that is not
        one finite number, or a name the summary line uses itself (rank, rounds, ...)."""
        s = self._sieve
        named = {}
        for name, value in metrics.items():
            if name in _SUMMARY_FIELDS:
                raise ValueError(f"record({name}=...): {name} is a field of the summary line "
                                 "itself; pick another name")
            try:
                number = float(value)
            except (TypeError, ValueError, RuntimeError):
                raise ValueError(f"record({name}=...): a metric is one number (or a "
                                 f"one-element tensor), got {type(value).__name__}") from None
            if not math.isfinite(number):
                raise ValueError(f"record({name}={number}): not a finite number")
            if len(name) > 64:
                raise ValueError(f"record({name[:16]}...=...): a metric's name has at most 64 "
                                 "characters")
            named[name] = number
        if len(set(s.recorded) | set(named)) > 16:
            raise ValueError("record(): at most 16 metrics per job (the job status carries "
                             "them); these would make " +
                             str(len(set(s.recorded) | set(named))))
        if test_acc is not None:
            number = float(test_acc)
            if not 0 <= number <= 1:
                raise ValueError(f"record(test_acc={number}): an accuracy is in [0, 1]")
        s.recorded.update(named)
        if loss is not None:
            s.loss = float(loss)
        if test_acc is not None:
            s.test_acc = float(test_acc)
        if s.pending is not None and (test_acc is not None or train_acc is not None):
            m = s.pending[0]
            if test_acc is not None:
                m.test_acc = float(test_acc)
            if train_acc is not None:
                m.train_acc = float(train_acc)

    def add_param_group(self, param_group):
        """Refused once wrapped: the job's D and the flat buffer are fixed (a new group's
        parameters would train locally, never pushed). Create the optimizer with every group."""
        raise ValueError("add_param_group after DistributedOptimizer: the job's parameters are "
                         "fixed when it starts; give the optimizer every parameter group before "
                         "wrapping it")

    def zero_grad(self, set_to_none=False):
        """As torch's; the gradients stay views of the flat gradient either way (a .grad set to
        None is counted as zeros)."""
        s = self._sieve
        s.flat_grad.zero_()
        if set_to_none:
            for p in s.params:
                p.grad = None
        s.round_start = time.perf_counter()

    def step(self, closure=None):
        """One round (module docstring). With `closure` (torch's convention) its loss is recorded
        and returned. With clip_norm, the gradient is clipped first (in place, as
        torch.nn.utils.clip_grad_norm_). A parameter whose requires_grad changed since wrapping
        raises ValueError (nothing is pushed). With backup workers (sieve-server --backup_workers) a
        round may close without this push: its pairs go back into the residual, and rounds that
        closed without this worker are skipped (the next step trains the round the job is at). Once
        a worker that skipped rounds, or a restarted worker that rejoined at a later round, is at
        the job's last round, epochs x steps_per_epoch, further steps do nothing: its script has
        batches left that the job has no round for."""
        s = self._sieve
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
            self.record(loss=loss)
        if ((s.skipped_rounds or s.rejoined) and s.steps_per_epoch and
                s.round >= s.steps_per_epoch * s.epochs):
            # This worker joined late or skipped rounds that closed without it, so a script
            # that loops over its epochs' batches has batches left after the job's last round:
            # the others have finished, so it would train rounds alone that the job never had.
            if s.steps_past_end == 0:
                print(f"sieve.torch: worker {s.rank} is at the job's last round ({s.round}); "
                      "further step() calls do nothing", file=sys.stderr, flush=True)
            s.steps_past_end += 1
            return loss
        self._check_trainable()
        round_ = s.round
        straggle = self._straggle(round_)
        t0 = time.perf_counter()
        epoch = self._epoch_of(round_)
        if s.device.type == "cuda":
            torch.cuda.current_stream().synchronize()
        self._gather_grads()
        self._clip_grads()
        self._local_update()  # r += u, the wrapped optimizer's update
        sel, k = self._select(round_)
        t1 = time.perf_counter()
        selected = len(sel)
        s.ledger.after_select(sel)
        stats = s.client.push_pull(round_, sel, s.flat, s.round_timeout_ms,
                                   error_feedback=s.combiner, ledger=s.ledger)
        t2 = time.perf_counter()
        s.max_pushpull_s = max(s.max_pushpull_s, t2 - t1)
        # Backup workers: a round that closed without this push returned its pairs to the
        # residual; rounds that closed without this worker are behind it (the script's next batch
        # trains the round the job is at). The ledger counted the round (push_pull's ledger=).
        if stats["missed_shards"] and s.per_group:
            self._return_to_groups()
        s.round += stats["advance"]
        s.dense_bytes += 4 * s.d
        self._sync_buffers()
        self._report(round_, epoch, k, sel, selected, stats, t0, t1, t2, straggle)
        s.round_start = time.perf_counter()
        s.overhead_seconds += s.round_start - t0
        s.job.progress["sieve_worker_rounds_total"] = s.round - s.first_round
        s.job.progress["sieve_worker_bytes_up_total"] = s.bytes_up
        return loss

    def _setup_buffers(self, model, mode):
        """Checks `buffers` and, for "broadcast" / "average", that every worker holds buffers of
        the same shapes (two collectives; not for a worker that rejoined a running job, whose
        first collective joins the others' next buffer exchange): ValueError on every worker
        otherwise, before anything is pushed."""
        s = self._sieve
        if mode not in ("local", "broadcast", "average"):
            raise ValueError(f"buffers must be 'local', 'broadcast' or 'average', got {mode!r}")
        s.buffers_mode = mode
        s.buffers = [] if model is None or mode == "local" else list(model.buffers())
        if not s.buffers or s.rejoined:
            return
        shapes = 0
        for b in s.buffers:
            for dim in (len(b.shape),) + tuple(b.shape):
                shapes = (shapes * 31 + dim) % 16777213  # exact in float32
        mine = torch.tensor([len(s.buffers), sum(b.numel() for b in s.buffers), shapes],
                            dtype=torch.float32)
        root = float(s.rank == 0)
        got = self._exchange(torch.cat([torch.tensor([root]), mine * root]))
        differs = float(got[0] == 1 and not torch.equal(got[1:], mine))
        if self._exchange(torch.tensor([differs]))[0] > 0:
            raise ValueError(f"buffers={mode!r}: the workers' models hold buffers of different "
                             f"shapes (this worker: {len(s.buffers)} buffers, "
                             f"{int(mine[1])} values); every worker must build the same model")

    def _exchange(self, flat):
        """The element-wise sum of a float32 vector over the workers (collectives of at most
        MAX_COLLECTIVE_ELEMENTS each); its bytes count as pushed and pulled."""
        s = self._sieve
        parts = []
        for chunk in torch.split(flat, MAX_COLLECTIVE_ELEMENTS):
            values, _ = s.client.collective("sum", chunk.contiguous().numpy(), 0,
                                            s.round_timeout_ms)
            parts.append(torch.from_numpy(values))
        s.ledger.add_transfer(4 * flat.numel(), 4 * flat.numel())
        return torch.cat(parts)

    def _sync_buffers(self):
        """After a step: every worker's buffers become rank 0's ("broadcast"; unchanged while
        rank 0 is not in the job) or the workers' mean ("average"). Integer buffers (a
        BatchNorm's num_batches_tracked) are rounded back."""
        s = self._sieve
        if not s.buffers:
            return
        with torch.no_grad():
            flat = torch.cat([b.detach().reshape(-1).to("cpu", torch.float32)
                              for b in s.buffers])
            weight = float(s.rank == 0) if s.buffers_mode == "broadcast" else 1.0
            got = self._exchange(torch.cat([torch.tensor([weight]), flat * weight]))
            count = float(got[0])
            if count == 0:
                return
            values = got[1:] if count == 1 else got[1:] / count
            offset = 0
            for b in s.buffers:
                n = b.numel()
                v = values[offset:offset + n].reshape(b.shape)
                if not b.dtype.is_floating_point:
                    v = torch.round(v)
                b.copy_(v.to(b.device, b.dtype))
                offset += n

    def state_dict(self):
        """torch's state_dict plus "sieve": this worker's round, error-feedback residual and
        momentum, selection thresholds (what a restarted worker needs to go on)."""
        state = super().state_dict()
        s = self._sieve
        m, r = self._read_state()
        thresholds = ([p.thresholds for p in s.parts] if s.per_group else
                      s.parts[0].thresholds)
        state["sieve"] = {"round": s.round, "residual": torch.from_numpy(r),
                          "momentum": torch.from_numpy(m), "thresholds": thresholds,
                          "d": s.d, "momentum_in_sieve": s.fused is True}
        return state

    def load_state_dict(self, state_dict):
        """torch's load_state_dict; a "sieve" entry restores the residual, momentum and
        thresholds (the round comes from the job: a restarted worker rejoins where it is)."""
        state = dict(state_dict)
        mine = state.pop("sieve", None)
        super().load_state_dict(state)
        if mine is None:
            return
        s = self._sieve
        if mine["d"] != s.d:
            raise ValueError(f"the state is of a model with D = {mine['d']}, this one has {s.d}")
        self._write_state(mine["momentum"].contiguous().numpy(),
                          mine["residual"].contiguous().numpy())
        thresholds = mine["thresholds"]
        if s.per_group and isinstance(thresholds, list) and len(thresholds) == len(s.parts):
            for part, pair in zip(s.parts, thresholds):
                part.thresholds = tuple(pair)
        elif not s.per_group and len(thresholds) == 2 and not isinstance(thresholds[0], tuple):
            s.parts[0].thresholds = tuple(thresholds)
        # else: a checkpoint of the other layout: the thresholds (hints) start again
        s.flat_momentum = None  # the loaded momentum buffers are new tensors: re-gathered
        s.fused = mine.get("momentum_in_sieve")  # where the loaded SGD momentum is

    def residual(self):
        """A copy of the error-feedback residual r (a torch tensor on the CPU)."""
        return torch.from_numpy(self._read_state()[1])

    def summary_line(self, summary_out=""):
        """sieve-worker's summary line (worker/trainer/summary.h) for this run so far, with the
        script's own record() metrics; with `summary_out` (a --summary_out pattern) also writes
        the summary as JSON there."""
        s = self._sieve
        loss = s.last_epoch_loss if s.epoch_rounds == 0 else s.epoch_loss / s.epoch_rounds
        return _core.worker_summary(s.rank, s.round, s.first_round, s.epochs, s.test_acc,
                                    loss, s.bytes_up, s.bytes_down, s.dense_bytes,
                                    time.perf_counter() - s.start, s.pushed_sum,
                                    s.skipped_rounds, s.missed_slices, s.returned_sum,
                                    s.max_pushpull_s, list(s.recorded.items()), summary_out,
                                    s.straggler.text if s.straggler else "",
                                    s.straggle_seconds, self._errors_retried())

    def _errors_retried(self):
        """The client's ERRORs answered by sending again (the count at close once closed)."""
        s = self._sieve
        if not s.client_closed:
            s.errors_retried = s.client.errors_retried
        return s.errors_retried

    def dump_weights(self, path):
        """Writes the replica as raw little-endian fp32 (sieve-worker's --dump_weights)."""
        path = _core.expand_rank_pattern(path, self._sieve.rank)
        self._sieve.flat.detach().cpu().numpy().tofile(path)
        return path

    def finish(self, print_summary=True):
        """Ends this worker's part: --dump_weights, the metrics, the summary line, tells the
        scheduler and waits for the job's end (every worker finished). Called at exit when the
        script did not (after an uncaught exception the job is told this worker failed)."""
        s = self._sieve
        if s.finished:
            return
        s.finished = True
        if s.dump_weights:
            self.dump_weights(s.dump_weights)
        self._flush_metrics()
        s.metrics.close()
        line = self.summary_line(s.summary_out)
        if print_summary:
            print(line, flush=True)
        self._status_report()
        s.client.finish()
        s.client.wait_shutdown(s.shutdown_timeout_ms)
        self._errors_retried()
        s.client_closed = True
        s.client.close()

    @contextlib.contextmanager
    def join(self):
        """For uneven inputs (a data loader with a remainder, DDP's `join()`): `with opt.join():`
        around the training loop; when the block ends this worker finishes (finish()), and the
        others go on without it: the servers close each round with the pushes of the workers
        still training (as for a worker that died) and barriers and collectives stop waiting for
        it, so nobody is left waiting for its round timeout. Unlike DDP, whose joined ranks
        contribute zeros to every later allreduce, a round's average is over the workers that
        pushed. The same happens without join() when a worker calls finish() early. An exception
        in the block propagates (the job is told this worker failed at exit)."""
        yield self
        self.finish()

    def abort(self, reason):
        """Stops this worker's part of the job after a failure: wakes its waits and closes the
        client. The scheduler drops the worker when its heartbeats stop (--heartbeat_timeout_ms,
        10 s by default); nothing tells it sooner."""
        s = self._sieve
        if not s.finished:
            s.finished = True
            s.client.request_stop(reason)
            self._errors_retried()
            s.client_closed = True
            s.client.close()

    # --- internals ---

    def _sieve_at_exit(self):
        s = self._sieve
        if s.finished:
            return
        if s.failed is not None:
            self.abort(f"the torch worker failed: {s.failed}")
            return
        try:
            self.finish()
        except Exception as e:  # at exit: report, and make the exit status say so
            print(f"sieve.torch: finishing at exit failed: {e}", file=sys.stderr)
            os._exit(1)

    def _epoch_of(self, round_):
        s = self._sieve
        return round_ // s.steps_per_epoch if s.steps_per_epoch else 0

    def _warmup_density(self, round_):
        """The warm-up's density at round_, or None past the warm-up: density_warmup's entry of
        the round's epoch, or with density_warmup_steps = N a geometric ramp from 1 (dense) at
        round 0 to `density` at round N: density ** (round / N)."""
        s = self._sieve
        if s.density_warmup_steps:
            if round_ < s.density_warmup_steps:
                return s.density ** (round_ / s.density_warmup_steps)
            return None
        epoch = self._epoch_of(round_)
        return s.density_warmup[epoch] if epoch < len(s.density_warmup) else None

    def _density_at(self, round_):
        warm = self._warmup_density(round_)
        return self._sieve.density if warm is None else warm

    def _check_trainable(self):
        """ValueError when a parameter was frozen or unfrozen after wrapping: D is fixed."""
        s = self._sieve
        for params, trainable in ((s.params, True), (s.frozen, False)):
            for p in params:
                if p.requires_grad != trainable:
                    raise ValueError(
                        f"parameter {s.names[id(p)]} has requires_grad={not trainable} now, but "
                        f"had requires_grad={trainable} when "
                        "DistributedOptimizer wrapped the optimizer: the job's D (its trainable "
                        "parameters) is fixed when it starts. Freeze or unfreeze parameters "
                        "before wrapping (to stop training a group later, set its lr to 0)")

    def _clip_grads(self):
        """clip_norm: the gradient's global norm clipped, in place, to c ("local", as
        torch.nn.utils.clip_grad_norm_), c / sqrt(N) ("dgc", N workers: Deep Gradient
        Compression's rule for servers that sum, whose sum then has norm about c) or c * sqrt(N)
        ("average": the same rule for servers that average, as sieve's do)."""
        s = self._sieve
        if s.clip_norm is None:
            return
        threshold = s.clip_norm
        if s.clip == "dgc":
            threshold = s.clip_norm / math.sqrt(s.num_workers)
        elif s.clip == "average":
            threshold = s.clip_norm * math.sqrt(s.num_workers)
        torch.nn.utils.clip_grad_norm_(s.params, threshold)

    def _part_plan(self, part, round_):
        """(compressor, k) of a group with per-group settings at round_: its sieve_compressor
        (or the optimizer's); k = round(density_g * D_g), density_g = its sieve_density (or the
        optimizer's density), never below the warm-up's density while it lasts. k = D_g (or
        compressor none) selects the whole slice: it is sent dense."""
        s = self._sieve
        compressor = part.compressor or s.compressor
        warm = self._warmup_density(round_)
        density = s.density if part.density is None else part.density
        if warm is not None:
            density = warm if part.density is None else max(part.density, warm)
        k = part.n if compressor == "none" else _core.k_for_density(density, part.n)
        return ("none" if k >= part.n else compressor), k

    def _select(self, round_):
        """Selects this round's pairs from the residual and masks SGD's momentum there; returns
        (the selection to push, k). One selection over D; with per-group settings one per group
        over its slice, combined into one selection over D (its values are those the groups
        selected; exact zeros are not sent, which changes no weight)."""
        s = self._sieve
        seed = _core.counter_hash(s.seed_key, round_)
        # 16-bit pushes (--wire_values): the values are rounded in the selection and their
        # rounding error stays in the residual (the same C++ code as sieve-worker's).
        push_values = s.client.push_values
        if not s.per_group:
            part = s.parts[0]
            k = s.d if s.compressor == "none" else _core.k_for_density(
                self._density_at(round_), s.d)
            sel = part.ef.select(s.compressor, k, seed=seed, out=part.selection,
                                 round_values=push_values, hints=part.hints,
                                 mask_momentum=s.momentum_masking)
            # A dense selection (compressor none) leaves the momentum alone, as sieve-worker's
            # ErrorFeedback does: masking every entry would turn SGD with momentum into plain SGD.
            # momentum_masking=False keeps it everywhere.
            if (s.flat_momentum is not None and s.momentum_masking and len(sel) and
                    not sel.dense):
                idx = torch.from_numpy(sel.indices.astype("int64")).to(s.device)
                s.flat_momentum.index_fill_(0, idx, 0.0)
            return sel, k
        k_total, masked = 0, []
        for i, part in enumerate(s.parts):
            compressor, k = self._part_plan(part, round_)
            k_total += k
            sel = part.ef.select(compressor, k, seed=_core.counter_hash(seed, i),
                                 out=part.selection, round_values=push_values, hints=part.hints,
                                 mask_momentum=s.momentum_masking)
            if sel.dense:  # the group's momentum is not masked (as above)
                s.comb_r[part.slice] = sel.values
            elif len(sel):
                idx = sel.indices.astype(np.int64) + part.offset
                s.comb_r[idx] = sel.values
                masked.append(idx)
        if s.flat_momentum is not None and s.momentum_masking and masked:
            idx = torch.from_numpy(np.concatenate(masked)).to(s.device)
            s.flat_momentum.index_fill_(0, idx, 0.0)
        # The combined pairs: the exact top-k of a vector that holds them and zeros elsewhere.
        s.combiner.write_state(s.comb_m, s.comb_r)
        sel = s.combiner.select("topk", int(np.count_nonzero(s.comb_r)), out=s.selection,
                                round_values=push_values)
        s.comb_r.fill(0.0)
        return sel, k_total

    def _return_to_groups(self):
        """Backup workers: the pairs no server applied came back into the combiner's residual;
        they go on in their groups' residuals."""
        s = self._sieve
        _, back = s.combiner.read_state()
        for part in s.parts:
            mine = back[part.slice]
            if mine.any():
                m, r = part.ef.read_state()
                part.ef.write_state(m, r + mine)
        s.combiner.write_state(s.comb_m, s.comb_m)

    def _read_state(self):
        """(m, r) over D (NumPy copies), from every part's error feedback."""
        s = self._sieve
        if not s.per_group:
            return s.parts[0].ef.read_state()
        states = [part.ef.read_state() for part in s.parts]
        return (np.concatenate([m for m, _ in states]), np.concatenate([r for _, r in states]))

    def _write_state(self, m, r):
        s = self._sieve
        for part in s.parts:
            part.ef.write_state(np.ascontiguousarray(m[part.slice]),
                                np.ascontiguousarray(r[part.slice]))

    def _gather_grads(self):
        # backward() accumulates into the .grad views in place; a .grad that was replaced (set
        # to None by zero_grad(set_to_none=True), or assigned) is copied back into the flat one.
        s = self._sieve
        base, grad_base = s.flat.data_ptr(), s.flat_grad.data_ptr()
        for p, (offset, n) in zip(s.params, s.views):
            if p.data_ptr() != base + 4 * offset:
                raise ValueError("a parameter was replaced: its data is no longer a view of the "
                                 "optimizer's flat buffer")
            g = p.grad
            if g is not None and g.data_ptr() == grad_base + 4 * offset:
                continue
            if g is not None and g.is_sparse:
                raise ValueError(f"parameter {s.names[id(p)]} has a sparse gradient: sieve.torch "
                                 "does not support sparse gradients (nn.Embedding(sparse=True)); "
                                 "use sparse=False")
            if g is None:
                s.flat_grad[offset:offset + n].zero_()
            else:
                s.flat_grad[offset:offset + n].copy_(g.reshape(-1))
            p.grad = s.flat_grad[offset:offset + n].view_as(p)

    def _fused_sgd(self):
        """[(lr, momentum, weight_decay)] per part when fused C++ calls compute the update: the
        wrapped optimizer is torch.optim.SGD itself (not a subclass), no group has dampening,
        Nesterov or maximize, and (one error feedback over D) every group has the same lr and
        momentum; with per-group settings each group has its own. weight_decay is one number,
        or, when the groups' decays differ (the usual no decay on biases and norms), the list
        of each group's. Else None."""
        s = self._sieve
        if s.base is not torch.optim.SGD:
            return None
        for g in self.param_groups:
            if g["dampening"] or g["nesterov"] or g.get("maximize", False):
                return None
        keys = [(g["lr"], g["momentum"], g["weight_decay"]) for g in self.param_groups]
        if s.per_group:
            return [keys[part.group] for part in s.parts]
        if any(key[:2] != keys[0][:2] for key in keys):
            return None
        if all(key[2] == keys[0][2] for key in keys):
            return keys[:1]
        return [(keys[0][0], keys[0][1], [key[2] for key in keys])]

    def _move_momentum(self, fused):
        """SGD's momentum lives in sieve's m on the fused path and in torch's momentum buffers on
        the general one. When the path changes between two steps (e.g. a schedule makes the
        param groups' learning rates differ, or equal again) it moves over, so that no momentum
        is lost and m is never mistaken for it (the general path keeps -u in m)."""
        s = self._sieve
        previous, s.fused = s.fused, fused
        if previous is None or previous == fused or not isinstance(self, torch.optim.SGD):
            return
        m, r = self._read_state()
        if fused:  # torch's buffers -> m
            flat_m = torch.zeros(s.d, dtype=torch.float32)
            for p, (offset, n) in zip(s.params, s.views):
                buf = self.state[p].pop("momentum_buffer", None) if p in self.state else None
                if buf is not None:
                    flat_m[offset:offset + n].copy_(buf.reshape(-1))
            self._write_state(flat_m.numpy(), r)
        else:  # m -> torch's buffers
            flat_m = torch.from_numpy(m).to(s.device)
            for p, (offset, n) in zip(s.params, s.views):
                self.state[p]["momentum_buffer"] = flat_m[offset:offset + n].view_as(p).clone()
        s.flat_momentum = None  # re-gathered by _gather_momentum

    def _local_update(self):
        """r += u, u = what the wrapped optimizer's step would subtract from the weights.

        Plain SGD (_fused_sgd): torch's own update, fused in C++ with the residual as sieve-worker
        computes it (g += wd*w; m = mu*m + g; r += lr*m), m being sieve's momentum (zeroed where
        selected); torch's state then holds no momentum buffers (state_dict's "sieve" has m).
        Any other optimizer: its step() runs on zeroed weights (0 - u is u's negation: exact)
        unless a group's weight decay reads the weights in a way sieve cannot move into the
        gradient (e.g. AdamW's decoupled decay): then u = w - step(w), exact to float rounding."""
        s = self._sieve
        fused = self._fused_sgd()
        self._move_momentum(fused is not None)
        if fused is not None:
            for part, (lr, momentum, weight_decay) in zip(s.parts, fused):
                grad = s.flat_grad[part.slice]
                if isinstance(weight_decay, list):  # one part over D, a decay per group
                    with torch.no_grad():
                        grad = s.backup[part.slice]
                        grad.copy_(s.flat_grad[part.slice])
                        for group, wd in zip(s.group_slices, weight_decay):
                            if wd:
                                grad[group].add_(s.flat[group], alpha=wd)
                elif weight_decay:  # torch's own g + wd * w, leaving .grad as backward() left it
                    with torch.no_grad():
                        grad = torch.add(grad, s.flat[part.slice], alpha=weight_decay,
                                         out=s.backup[part.slice])
                part.ef.accumulate(grad, momentum, lr)
            return
        coupled = isinstance(self, _COUPLED_DECAY)
        decays = [g.get("weight_decay", 0) for g in self.param_groups]
        exact = coupled or not any(decays)
        trainable = {id(p) for p in s.params}
        # Frozen parameters are never changed: a stale .grad of one is hidden from the step.
        hidden = [(p, p.grad) for p in s.frozen if p.grad is not None]
        with torch.no_grad():
            s.backup.copy_(s.flat)
            for p, _ in hidden:
                p.grad = None
            try:
                if exact:
                    grads = []  # the .grad views, put back after the step (torch leaves .grad)
                    for group, wd in zip(self.param_groups, decays):
                        if wd:
                            for p in group["params"]:
                                if id(p) in trainable:
                                    grads.append((p, p.grad))
                                    p.grad = p.grad.add(p.data, alpha=wd)  # torch's g + wd * w
                            group["weight_decay"] = 0
                    s.flat.zero_()
                    try:
                        super().step()
                    finally:
                        for group, wd in zip(self.param_groups, decays):
                            group["weight_decay"] = wd
                        for p, g in grads:
                            p.grad = g
                    for part in s.parts:  # m = -u; r += -1 * m
                        part.ef.accumulate(s.flat[part.slice], 0.0, -1.0)
                else:
                    super().step()
                    s.flat.sub_(s.backup).neg_()  # u = w - step(w)
                    for part in s.parts:
                        part.ef.accumulate(s.flat[part.slice], 0.0, 1.0)
            finally:
                for p, g in hidden:
                    p.grad = g
            s.flat.copy_(s.backup)
        self._gather_momentum()

    def _gather_momentum(self):
        # SGD's momentum buffers as views of one flat buffer, so that the entries selected each
        # round are zeroed in one call (momentum factor masking, as sieve-worker's m).
        s = self._sieve
        if not isinstance(self, torch.optim.SGD):
            return
        if not any(g.get("momentum", 0) for g in self.param_groups):
            return
        if s.flat_momentum is None:
            s.flat_momentum = torch.zeros_like(s.flat)
        base = s.flat_momentum.data_ptr()
        for p, (offset, n) in zip(s.params, s.views):
            state = self.state.get(p)
            buf = state.get("momentum_buffer") if state else None
            if buf is None or buf.data_ptr() == base + 4 * offset:
                continue
            view = s.flat_momentum[offset:offset + n]
            view.copy_(buf.reshape(-1))
            state["momentum_buffer"] = view.view_as(p)

    def _straggle(self, round_):
        """An emulated straggler's stall after the round's compute (counted in t_compute, as
        sieve-worker counts it): sleeps for its extra time and returns the seconds slept."""
        s = self._sieve
        if s.straggler is None:
            return 0.0
        if s.device.type == "cuda":
            torch.cuda.current_stream().synchronize()
        slept = s.straggler.stall(round_, time.perf_counter() - s.round_start)
        s.straggle_seconds += slept
        return slept

    def _report(self, round_, epoch, k, sel, selected, stats, t0, t1, t2, straggle=0.0):
        s = self._sieve
        self._flush_metrics()
        loss = s.loss if s.loss is not None else 0.0
        s.loss = None
        s.epoch_loss += loss
        s.epoch_rounds += 1
        spe = s.steps_per_epoch
        last_of_epoch = bool(spe) and (round_ + 1) % spe == 0
        last = last_of_epoch and epoch + 1 == s.epochs
        if s.metrics.is_open:
            # Written when the next round starts (or at finish): accuracies recorded after this
            # step() belong to this round.
            m = _core.RoundMetrics()
            m.round, m.epoch, m.loss = round_, epoch, loss
            m.selected, m.k = selected, k
            if s.per_group:  # the groups' k over D; the largest group's threshold
                largest = max(s.parts, key=lambda part: part.n).selection
                m.density = k / s.d
                m.threshold, m.iterations = largest.threshold, largest.iterations
            else:
                m.density = 1.0 if s.compressor == "none" else self._density_at(round_)
                m.threshold, m.iterations = sel.threshold, sel.iterations
            m.bytes_up, m.bytes_down = stats["bytes_up"], stats["bytes_down"]
            m.dense_bytes = 4 * s.d
            m.t_compute = t0 - s.round_start
            m.t_straggle = straggle
            m.t_select = t1 - t0
            m.t_comm = t2 - t1
            m.t_wall = time.perf_counter() - s.start
            if s.contraction_every and round_ % s.contraction_every == 0:
                self._fill_contraction(m, k)
            s.pending = (m, round_ % s.metrics_every == 0 or last)
        if last_of_epoch:
            s.last_epoch_loss = s.epoch_loss / max(s.epoch_rounds, 1)
            s.epoch_loss, s.epoch_rounds = 0.0, 0
        now = time.perf_counter()
        if s.progress and (now - s.last_progress >= 1.0 or last):
            # Without steps_per_epoch the job's length is unknown: its epochs and rounds are
            # written as 0 ("progress: epoch 0/0 round 57/0 ...").
            s.last_progress = now
            if spe:
                line = _core.format_progress_line(epoch + 1, s.epochs, s.round, s.epochs * spe,
                                                  loss, s.bytes_up)
            else:
                line = _core.format_progress_line(0, 0, s.round, 0, loss, s.bytes_up)
            print(line, flush=True)
        s.last_loss = loss if math.isfinite(loss) and loss >= 0 else None
        self._status_report()

    def _status_report(self):
        """This worker's part of the job's status (the scheduler's JobStatus): sent on the next
        heartbeat and with FINISHED."""
        s = self._sieve
        spe = s.steps_per_epoch
        total = s.epochs * spe if spe else 0
        epoch = min(s.round // spe + 1, s.epochs) if spe else 0
        s.client.report(min(s.round, total) if total else s.round, total, epoch,
                        s.epochs if spe else 0, s.last_loss, s.test_acc, s.bytes_up,
                        s.bytes_down, s.skipped_rounds, s.missed_slices, s.recorded,
                        s.straggle_seconds)

    def _fill_contraction(self, m, k):
        """The round's contraction ratio ‖r − sel(r)‖² / ‖r‖² over D (summed over the groups'
        selections with per-group settings) and its bounds 1 − k/D and (1 − k/D)², as
        sieve-worker's --contraction_every."""
        s = self._sieve
        m.set_contraction(sum(part.selection.sumsq_total for part in s.parts),
                          sum(part.selection.sumsq_selected for part in s.parts), k, s.d)

    def _flush_metrics(self):
        s = self._sieve
        if s.pending is None:
            return
        m, due = s.pending
        s.pending = None
        if due or m.test_acc is not None:
            s.metrics.write(m)


def DistributedOptimizer(optimizer, model=None, compressor="topk", density=0.001,
                         density_warmup=(), steps_per_epoch=None, epochs=1, seed=1,
                         metrics_out="", metrics_every=1, round_timeout_ms=120000, progress=None,
                         job=None, wire_values=None, wire=None, density_warmup_steps=0,
                         clip_norm=None, clip="local", buffers="local", contraction_every=0,
                         momentum_masking=True):
    """Makes `optimizer` (any torch.optim.Optimizer) a sieve worker and returns it (module
    docstring). `model`, when given, names parameters in errors, checks that the optimizer
    holds all of its trainable ones and refuses an nn.Embedding / EmbeddingBag with sparse=True.
    compressor: none|topk|gaussiank|gaussiank_paper|dgc|randomk; density: k = round(density * D);
    density_warmup: densities of epochs 0, 1, ... (needs steps_per_epoch); density_warmup_steps:
    N > 0 ramps the density geometrically from 1 (dense) at round 0 to `density` at round N,
    density ** (round / N) (not both warm-ups; a routed --density_warmup replaces either);
    steps_per_epoch / epochs: for the metrics, progress lines and the warm-up; seed: randomk's /
    dgc's (as sieve-worker's --seed); metrics_out: sieve-worker's JSON lines ({rank} is
    replaced); contraction_every: n > 0 adds the contraction ratio ‖r − sel(r)‖² / ‖r‖² and its
    bounds 1 − k/D, (1 − k/D)² to every n-th round's metrics line (0: never); job: a Job from init() (default: the last init(), or init() now); wire_values:
    "fp32" | "fp16" | "bf16", the pushes' precision (sieve-worker's --wire_values: the selected
    values are rounded and their rounding error stays in the residual); wire: "v5" (compact
    index frames) or "v4" (raw indices); None: init()'s (default fp32, v5); clip_norm: c > 0
    clips this worker's gradient before each step, to global norm c (clip="local", as
    torch.nn.utils.clip_grad_norm_), c / sqrt(num_workers) (clip="dgc", Deep Gradient
    Compression's local clipping, for servers that sum) or c * sqrt(num_workers)
    (clip="average", the same rule for servers that average, as sieve's do: the workers' mean
    then has norm about c, as DDP's clipped average, when their gradients are mostly noise);
    None: no clipping. momentum_masking: zero SGD's momentum where the residual was selected
    (Deep Gradient Compression's momentum-factor masking; sieve-worker's --momentum_masking);
    False keeps it, error feedback on the momentum-SGD step. buffers: what becomes of the model's
    buffers (BatchNorm's running statistics) after each step(): "local" (each worker keeps its
    own), "broadcast" (every worker holds rank 0's, as DDP does) or "average" (their mean over the
    workers); the last two go through the scheduler's collectives (sieve.torch.allreduce), so
    every worker must call step() equally often (BSP without backup workers), and their bytes
    count in bytes_up / bytes_down.
    Flags routed by `sieve launch` (SIEVE_WORKER_FLAGS) override these arguments.

    Parameters with requires_grad=False are not in D and are never changed (nor synchronized:
    like buffers, each worker keeps its own). A param_groups entry may carry sieve_density (in
    (0, 1]; 1.0 sends the group dense, every entry every round) and sieve_compressor (a name as
    `compressor`); then every group is selected on its own slice of the flat vector with
    k_g = round(density_g * D_g), a group without them at the optimizer's compressor and density
    (during a warm-up a group is never sparser than the warm-up's density).

    Connects, enters the job (rank 0's weights become the servers' when they have no model of
    their own) and returns when the start barrier is passed, with the servers' weights in the
    parameters. Errors: ValueError (bad parameters or arguments, D differs from the job's),
    sieve.Error / sieve.TimeoutError (the job)."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"DistributedOptimizer wraps a torch.optim.Optimizer, got "
                        f"{type(optimizer).__name__} (pass torch.optim.SGD(model.parameters(), "
                        "...) and the model)")
    if isinstance(optimizer, _Sieve):
        raise ValueError("this optimizer is already a sieve DistributedOptimizer")
    if "step" in vars(optimizer):
        raise ValueError("an lr scheduler already wraps this optimizer's step(): create the "
                         "torch.optim.lr_scheduler after DistributedOptimizer")
    job = job if job is not None else _job()
    args = _Arguments(compressor, density, density_warmup, steps_per_epoch, epochs, seed,
                      metrics_out, metrics_every, contraction_every, round_timeout_ms, progress,
                      wire_values, wire, density_warmup_steps, clip_norm, clip, buffers,
                      momentum_masking)
    base = type(optimizer)
    optimizer.__class__ = type(base.__name__, (_Sieve, base), {"__module__": base.__module__})
    try:
        optimizer._sieve_setup(model, job, args)
    except BaseException:
        optimizer.__class__ = base
        raise
    if model is not None:
        _refuse_weight_loads(model)
    return optimizer


def _refuse_weight_loads(model):
    """Makes `model.load_state_dict` raise: after wrapping it would change this worker's replica
    only (the servers hold the job's weights, and the replicas would silently differ)."""

    def load_state_dict(*args, **kwargs):
        raise ValueError(
            "model.load_state_dict() after sieve.torch.DistributedOptimizer wrapped the model "
            "would change only this worker's copy (the servers hold the job's weights): load the "
            "weights before wrapping (on every worker, or on rank 0 with servers started without "
            "a model: rank 0's weights become the job's)")

    model.load_state_dict = load_state_dict
