"""sieve.torch: train a torch model as a worker of a sieve job.

    opt = sieve.torch.DistributedOptimizer(model, compressor="topk", density=0.001, lr=0.1,
                                           momentum=0.9, scheduler="127.0.0.1:9310")
    for x, y in batches:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step(loss=loss)          # error feedback, selection, push/pull: params = servers'
    opt.finish()                     # summary line, Finish, wait for the job's end

The parameters are moved into one flat float32 buffer (each becomes a view of it, and so does its
.grad), so the error feedback, the selection and the servers' UPDATE work on the flat vector in
place, without copies. `step()` does what `sieve-worker` does each round (worker/trainer/
trainer.cc): g += weight_decay*w; m = momentum*m + g; r += lr_t*m (ErrorFeedback.accumulate);
select k = round(density_e*D) pairs of r (the compressor; r and m are zeroed there); push them and
write the servers' UPDATE into the parameters. lr_t and density_e follow sieve-worker's schedules
(lr warm-up and steps, density warm-up by epoch, epoch = round // steps_per_epoch), the randomk /
dgc seed is sieve-worker's, and the metrics JSON lines (`metrics_out`) are the same, so
`sieve compare` and the plots read Python runs too. Consistency (BSP, SSP, ASP) is the servers'.

Input errors raise before anything is pushed: parameters that are not float32 or not contiguous,
on mixed or unsupported devices, a model whose size is not the job's D.
"""

import sys
import time

import torch

from . import _core

__all__ = ["DistributedOptimizer", "flat_size"]


def flat_size(model_or_params):
    """The number of parameters D a model puts in the flat vector."""
    return sum(p.numel() for _, p in _named(model_or_params))


def _named(model_or_params):
    if isinstance(model_or_params, torch.nn.Module):
        return [(n, p) for n, p in model_or_params.named_parameters() if p.requires_grad]
    return [(f"param{i}", p) for i, p in enumerate(model_or_params)]


def _device_of(params):
    devices = {p.device for _, p in params}
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


class DistributedOptimizer:
    """A sieve worker around a torch model (module docstring). Arguments as sieve-worker's flags:
    compressor, density, density_warmup (densities of epochs 0, 1, ...), lr, momentum,
    weight_decay, lr_steps (epochs), lr_gamma, lr_warmup_epochs, seed (shuffling's and
    randomk's), steps_per_epoch (needed by the epoch schedules; None = every round is epoch 0),
    epochs and eval_every (which rounds evaluate), metrics_out / metrics_every, round_timeout_ms.

    The job: pass a connected `client` (sieve.Client), or scheduler (and rank, bind, host, fp16,
    ...) and the optimizer connects with D = the model's size. The servers' weights are pulled into
    the parameters and the workers' start barrier is passed before the constructor returns.
    """

    def __init__(self, model, compressor="topk", density=0.001, lr=0.05, momentum=0.9,
                 weight_decay=0.0, density_warmup=(), lr_steps=(), lr_gamma=0.1,
                 lr_warmup_epochs=0.0, seed=1, steps_per_epoch=None, epochs=1, eval_every=1,
                 metrics_out="", metrics_every=1, round_timeout_ms=120000, client=None,
                 scheduler=None, rank=-1, bind="127.0.0.1", host="", port=0, fp16=False,
                 checksum=True, heartbeat_interval_ms=1000, heartbeat_timeout_ms=10000,
                 curve_dir="", job_token="", job_token_file="", curve_key="", progress=None):
        self._compressor = _core.parse_compressor(compressor)
        for name, value in (("density", density),) + tuple(
                (f"density_warmup[{i}]", d) for i, d in enumerate(density_warmup)):
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        if lr <= 0 or not 0 <= momentum < 1 or weight_decay < 0:
            raise ValueError("need lr > 0, 0 <= momentum < 1, weight_decay >= 0")
        if steps_per_epoch is None and (density_warmup or lr_steps or lr_warmup_epochs):
            raise ValueError("density_warmup, lr_steps and lr_warmup_epochs need steps_per_epoch")
        if metrics_every < 1:
            raise ValueError("metrics_every must be >= 1")
        self.density = density
        self.density_warmup = list(density_warmup)
        self.lr = lr
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.lr_steps = list(lr_steps)
        self.lr_gamma = lr_gamma
        self.lr_warmup_epochs = lr_warmup_epochs
        self.steps_per_epoch = steps_per_epoch
        self.epochs = epochs
        self.eval_every = eval_every
        self.round_timeout_ms = round_timeout_ms

        params = _named(model)
        if not params:
            raise ValueError("the model has no parameters that require a gradient")
        for name, p in params:
            if p.dtype != torch.float32:
                raise ValueError(f"parameter {name} is {p.dtype}; sieve trains float32 "
                                 "parameters (model.float())")
            if not p.is_contiguous():
                raise ValueError(f"parameter {name} is not contiguous; sieve keeps parameters as "
                                 "views of one flat buffer")
        self.device = _device_of(params)
        self.params = [p for _, p in params]
        self.d = sum(p.numel() for p in self.params)

        # The job (validated before anything is flattened: a failed connect leaves the model as
        # it was). A client of another D raises here, before any push.
        self._own_client = client is None
        if client is None:
            if scheduler is None:
                raise ValueError("pass client= or scheduler= (host:port)")
            client = _core.Client.connect(scheduler, self.d, rank=rank, bind=bind, host=host,
                                          port=port, fp16=fp16, checksum=checksum,
                                          heartbeat_interval_ms=heartbeat_interval_ms,
                                          heartbeat_timeout_ms=heartbeat_timeout_ms,
                                          curve_dir=curve_dir, job_token=job_token,
                                          job_token_file=job_token_file, curve_key=curve_key)
        elif client.num_params != self.d:
            raise ValueError(f"the job has D = {client.num_params} parameters but the model has "
                             f"{self.d}")
        self.client = client
        self.rank = client.rank
        self.num_workers = client.num_workers

        # One flat buffer; the parameters (and their gradients) become views of it.
        with torch.no_grad():
            self.flat = torch.empty(self.d, dtype=torch.float32, device=self.device)
            self.flat_grad = torch.zeros(self.d, dtype=torch.float32, device=self.device)
            offset = 0
            self._views = []
            for p in self.params:
                n = p.numel()
                self.flat[offset:offset + n].copy_(p.reshape(-1))
                p.data = self.flat[offset:offset + n].view_as(p)
                p.grad = self.flat_grad[offset:offset + n].view_as(p)
                self._views.append((offset, n))
                offset += n
        self._decay = torch.empty_like(self.flat) if weight_decay else None
        self.ef = _core.ErrorFeedback(self.d, self.device.type)
        self.selection = _core.Selection()
        self._seed_key = _core.counter_hash(seed, 0x5E1EC70000 + self.rank)
        self._thresholds = (0.0, 0.0)  # (prev, older) of gaussiank / dgc's warm start

        # The servers' weights, then the start barrier (a rejoining worker skips it).
        self.round = 0
        if self.client.joined_late:
            # Rejoin (docs/architecture.md, "Worker rejoin"), as sieve-worker: pull, join `margin`
            # rounds past the furthest server; when a server passed it already, pull again and
            # join with twice the margin (2, 4, ..., 256 rounds).
            margin = 2
            for attempt in range(1, 9):
                at = self.client.pull_dense(self.flat, round_timeout_ms)
                try:
                    self.client.join(at + margin, round_timeout_ms)
                    self.round = at + margin
                    break
                except _core.Error as e:
                    if not str(e).startswith("OUT_OF_RANGE") or attempt == 8:
                        raise
                    margin *= 2
        else:
            self.client.pull_dense(self.flat, round_timeout_ms)
            self.client.barrier(round_timeout_ms)
        self.first_round = self.round

        self.metrics = _core.MetricsWriter()
        per_rank = "{rank}" in metrics_out
        if metrics_out and (self.rank == 0 or per_rank):
            self.metrics.open(_core.expand_rank_pattern(metrics_out, self.rank))
        self.metrics_every = metrics_every
        self.progress = (not sys.stdout.isatty()) if progress is None else progress
        self.bytes_up = self.bytes_down = self.dense_bytes = 0
        self.pairs_up = 0
        self.pushed_sum = 0.0  # of every value pushed (conservation checks, as sieve-worker)
        self.last_stats = None
        self.last_metrics = None
        self.test_acc = None
        self._epoch_loss = 0.0
        self._epoch_rounds = 0
        self.last_epoch_loss = 0.0
        self._last_progress = 0.0
        self._start = time.perf_counter()
        self._round_start = self._start
        self.overhead_seconds = 0.0  # in step() in all: everything but forward/backward

    # The schedules (worker/trainer/schedule.h).
    def epoch_of(self, round_):
        return round_ // self.steps_per_epoch if self.steps_per_epoch else 0

    def lr_at(self, round_):
        return _core.learning_rate(round_, self.steps_per_epoch or 1, self.lr, self.lr_steps,
                                   self.lr_gamma, self.lr_warmup_epochs)

    def density_at(self, epoch):
        return self.density_warmup[epoch] if epoch < len(self.density_warmup) else self.density

    def k_at(self, epoch):
        if self._compressor == "none":
            return self.d
        return _core.k_for_density(self.density_at(epoch), self.d)

    def zero_grad(self, set_to_none=False):
        """Zeroes the flat gradient (the parameters' .grad stay views of it)."""
        self.flat_grad.zero_()
        self._round_start = time.perf_counter()

    def _gather_grads(self):
        # backward() accumulates into the .grad views in place; a .grad that was replaced (set to
        # None by another zero_grad, or assigned) is copied back into the flat gradient.
        base, grad_base = self.flat.data_ptr(), self.flat_grad.data_ptr()
        for p, (offset, n) in zip(self.params, self._views):
            if p.data_ptr() != base + 4 * offset:
                raise ValueError("a parameter was replaced: its data is no longer a view of the "
                                 "optimizer's flat buffer")
            g = p.grad
            if g is not None and g.data_ptr() == grad_base + 4 * offset:
                continue
            if g is None:
                self.flat_grad[offset:offset + n].zero_()
            else:
                self.flat_grad[offset:offset + n].copy_(g.reshape(-1))
            p.grad = self.flat_grad[offset:offset + n].view_as(p)

    def is_eval_round(self, round_):
        """sieve-worker's rule: the last round of every eval_every-th epoch and of the last."""
        if not self.steps_per_epoch or (round_ + 1) % self.steps_per_epoch:
            return False
        epoch = round_ // self.steps_per_epoch
        return epoch + 1 == self.epochs or (self.eval_every > 0 and
                                            (epoch + 1) % self.eval_every == 0)

    def step(self, loss=None, evaluate=None):
        """One round: error feedback, selection and push/pull of the flat gradient; afterwards the
        parameters hold the servers' values. `loss` (a number or a tensor) goes into the metrics.
        `evaluate`, when given, is called on rank 0 after the last round of an evaluated epoch and
        returns (test_acc, train_acc); the metrics line of that round carries them. Returns the
        round's traffic (bytes_up, bytes_down, pairs_up, pairs_down, push_seconds, wait_seconds)."""
        t0 = time.perf_counter()
        round_ = self.round
        epoch = self.epoch_of(round_)
        lr = self.lr_at(round_)
        k = self.k_at(epoch)
        if self.device.type == "cuda":
            torch.cuda.current_stream().synchronize()
        self._gather_grads()
        if self.weight_decay:
            torch.mul(self.flat, self.weight_decay, out=self._decay)
            self.flat_grad.add_(self._decay)
        self.ef.accumulate(self.flat_grad, self.momentum, lr)
        prev, older = self._thresholds
        sel = self.ef.select(self._compressor, k, prev, older,
                             _core.counter_hash(self._seed_key, round_), out=self.selection)
        if sel.threshold == sel.threshold and sel.threshold > 0 and sel.threshold != float("inf"):
            self._thresholds = (sel.threshold, prev)
        t1 = time.perf_counter()
        selected = len(sel)
        self.pushed_sum += sel.values_sum()
        stats = self.client.push_pull(round_, sel, self.flat, self.round_timeout_ms)
        t2 = time.perf_counter()
        self.round += 1
        self.bytes_up += stats["bytes_up"]
        self.bytes_down += stats["bytes_down"]
        self.pairs_up += stats["pairs_up"]
        self.dense_bytes += 4 * self.d
        self.last_stats = stats
        loss_value = float(loss) if loss is not None else 0.0
        self._epoch_loss += loss_value
        self._epoch_rounds += 1

        test_acc = train_acc = None
        eval_round = self.is_eval_round(round_)
        if eval_round and evaluate is not None and self.rank == 0:
            test_acc, train_acc = evaluate()
            self.test_acc = test_acc
        last_of_epoch = bool(self.steps_per_epoch) and (round_ + 1) % self.steps_per_epoch == 0
        last = last_of_epoch and epoch + 1 == self.epochs
        if self.metrics.is_open and (round_ % self.metrics_every == 0 or eval_round or last):
            m = _core.RoundMetrics()
            m.round, m.epoch, m.loss = round_, epoch, loss_value
            m.test_acc, m.train_acc = test_acc, train_acc
            m.selected, m.k = selected, k
            m.density = 1.0 if self._compressor == "none" else self.density_at(epoch)
            m.threshold, m.iterations = sel.threshold, sel.iterations
            m.bytes_up, m.bytes_down = stats["bytes_up"], stats["bytes_down"]
            m.dense_bytes = 4 * self.d
            m.t_compute = t0 - self._round_start
            m.t_select = t1 - t0
            m.t_comm = t2 - t1
            m.t_wall = time.perf_counter() - self._start
            self.metrics.write(m)
            self.last_metrics = m
        if last_of_epoch:
            self.last_epoch_loss = self._epoch_loss / max(self._epoch_rounds, 1)
            self._epoch_loss, self._epoch_rounds = 0.0, 0
        now = time.perf_counter()
        if self.progress and self.steps_per_epoch and (now - self._last_progress >= 1.0 or last):
            self._last_progress = now
            total = self.epochs * self.steps_per_epoch
            print(_core.format_progress_line(epoch + 1, self.epochs, self.round, total, loss_value,
                                             self.bytes_up), flush=True)
        self._round_start = time.perf_counter()
        self.overhead_seconds += self._round_start - t0
        return stats

    def dump_weights(self, path):
        """Writes the replica as raw little-endian fp32 (sieve-worker's --dump_weights)."""
        path = _core.expand_rank_pattern(path, self.rank)
        self.flat.detach().cpu().numpy().tofile(path)
        return path

    def summary_line(self):
        """sieve-worker's summary line (worker/trainer/summary.h) for this run so far."""
        loss = self.last_epoch_loss if self._epoch_rounds == 0 else \
            self._epoch_loss / self._epoch_rounds
        return _core.format_summary_line(self.rank, self.round, self.first_round,
                                         self.epochs, self.test_acc, loss, self.bytes_up,
                                         self.bytes_down, self.dense_bytes,
                                         time.perf_counter() - self._start, self.pushed_sum)

    def finish(self, shutdown_timeout_ms=600000, print_summary=True):
        """Ends this worker's part: closes the metrics, prints the summary line, tells the
        scheduler, and waits for the job's end (every worker finished)."""
        self.metrics.close()
        if print_summary:
            print(self.summary_line(), flush=True)
        self.client.finish()
        self.client.wait_shutdown(shutdown_timeout_ms)
        if self._own_client:
            self.client.close()

    def abort(self, reason):
        """Stops this worker's part of the job after a failure (the servers drop it)."""
        self.client.request_stop(reason)
        if self._own_client:
            self.client.close()

    @classmethod
    def from_flags(cls, model, client, flags, steps_per_epoch):
        """The optimizer sieve-worker's flags describe (sieve.worker.parse_flags)."""
        return cls(model, client=client, compressor=flags.compressor, density=flags.density,
                   density_warmup=flags.float_list("density_warmup"), lr=flags.lr,
                   momentum=flags.momentum, weight_decay=flags.weight_decay,
                   lr_steps=flags.int_list("lr_steps"), lr_gamma=flags.lr_gamma,
                   lr_warmup_epochs=flags.lr_warmup_epochs, seed=flags.seed,
                   steps_per_epoch=steps_per_epoch, epochs=flags.epochs,
                   eval_every=flags.eval_every, metrics_out=flags.metrics_out,
                   metrics_every=flags.metrics_every, round_timeout_ms=flags.round_timeout_ms)

    def state_dict(self):
        m, r = self.ef.read_state()
        return {"round": self.round, "momentum": m, "residual": r}


def default_device(name):
    """sieve-worker's --device: auto (cuda when this build and torch have one), cpu or cuda."""
    if name == "auto":
        return "cuda" if _core.cuda_compiled and torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda"):
        raise ValueError(f"--device must be auto, cpu or cuda, got {name!r}")
    if name == "cuda" and not (_core.cuda_compiled and torch.cuda.is_available()):
        raise ValueError("--device=cuda: no usable GPU (or a sieve build without CUDA)")
    return name


