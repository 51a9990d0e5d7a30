"""A wide MLP (10,512,394 parameters by default) on synthetic data, as a worker of a sieve job: the
size where sparse push/pull matters (a dense fp32 push is 42 MB a round; Top-k at density 0.001
pushes 10,512 pairs, 84 kB).

Data: inputs x ~ N(0, I) of --input_dim, labelled by a fixed random teacher network (a seeded
two-layer ReLU net, the same on every worker); every worker draws its own batches from a generator
keyed by (seed, rank, round), rank 0 evaluates on 10,000 held-out examples after each epoch
(--rounds_per_epoch rounds). The servers hold the flat vector as `--model=synthetic
--num_params=D`; they start from N(0, 0.01) weights unless given torch's initialization with
--init_weights (written by --write_init):

    PY="python3 examples/torch/synthetic_large.py"
    D=$($PY --print_params)                       # 10512394 with the defaults
    $PY --write_init=/tmp/wide_mlp_init.bin       # torch's default init, raw fp32
    PYTHONPATH=build/worker/python build/deploy/sieve launch --num_servers=2 --num_workers=2 \
        --worker_cmd="$PY" -- --model=synthetic --num_params=$D \
        --init_weights=/tmp/wide_mlp_init.bin --compressor=topk --density=0.001 \
        --epochs=3 --rounds_per_epoch=200 --lr=0.05

Flags: sieve-worker's (sieve.worker.WORKER_FLAGS) and --width, --depth, --input_dim,
--classes, --write_init, --print_params.
"""

import sys

import torch
import torch.nn.functional as F

import sieve
import sieve.torch
from sieve.worker import (connect, job_from_environment, leave_on_failure, parse_flags,
                          report_end, run_main, serve_health)

EXTRA = {
    "width": (int, 2048, "Hidden units per layer"),
    "depth": (int, 3, "Hidden layers"),
    "input_dim": (int, 1024, "Input features"),
    "classes": (int, 10, "Classes of the teacher"),
    "write_init": (str, "", "Write torch's initial weights (raw fp32) here and exit"),
    "print_params": (bool, False, "Print the model's D and exit"),
}


def make_model(f):
    layers, width = [], f.input_dim
    for _ in range(f.depth):
        layers += [torch.nn.Linear(width, f.width), torch.nn.ReLU()]
        width = f.width
    layers.append(torch.nn.Linear(width, f.classes))
    return torch.nn.Sequential(*layers)


class Teacher:
    """The labelling rule and the example generator, the same on every worker."""

    def __init__(self, f, device):
        g = torch.Generator().manual_seed(1000 + f.seed)
        self.w1 = torch.randn(f.input_dim, 256, generator=g).to(device) / f.input_dim ** 0.5
        self.w2 = torch.randn(256, f.classes, generator=g).to(device) / 16.0
        self.f, self.device = f, device

    def batch(self, key, n):
        g = torch.Generator().manual_seed(key)
        x = torch.randn(n, self.f.input_dim, generator=g).to(self.device)
        return x, (torch.relu(x @ self.w1) @ self.w2).argmax(1)


def main(argv):
    flags = job_from_environment(parse_flags(argv, EXTRA, program="synthetic_large.py"))
    torch.manual_seed(flags.seed)
    model = make_model(flags)
    d = sieve.torch.flat_size(model)
    if flags.print_params:
        print(d)
        return 0
    if flags.write_init:
        torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy().tofile(
            flags.write_init)
        print(f"wrote {d} float32 weights to {flags.write_init}", file=sys.stderr)
        return 0
    torch.set_num_threads(flags.blas_threads)
    device = sieve.torch.default_device(flags.device)
    model = model.to(device)
    teacher = Teacher(flags, device)
    progress = {"sieve_worker_rounds_total": 0, "sieve_worker_bytes_up_total": 0}
    serve_health(flags.bind, flags.metrics_port, lambda: progress)  # /healthz while it forms
    client = connect(flags, d)
    return leave_on_failure(client, train, flags, model, teacher, client, d, progress)


def train(flags, model, teacher, client, d, progress):
    rank, steps = client.rank, flags.rounds_per_epoch
    x_test, y_test = teacher.batch(2**40 + flags.seed, 10000)

    def evaluate():
        with torch.no_grad():
            return (model(x_test).argmax(1) == y_test).float().mean().item(), None

    opt = sieve.torch.DistributedOptimizer.from_flags(model, client, flags, steps)
    stop = flags.epochs * steps
    if flags.max_rounds > 0:
        stop = min(stop, flags.max_rounds)
    print(f"worker {rank}: wide MLP, D = {d}, k = {opt.k_at(0)} pairs a round", file=sys.stderr)
    while opt.round < stop:
        key = sieve.counter_hash(sieve.counter_hash(flags.seed, rank), opt.round)
        x, y = teacher.batch(key % 2**63, flags.batch_size)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step(loss=loss.detach(), evaluate=evaluate)
        progress["sieve_worker_rounds_total"] = opt.round - opt.first_round
        progress["sieve_worker_bytes_up_total"] = opt.bytes_up
        if rank == 0 and opt.round % steps == 0 and opt.test_acc is not None:
            print(f"epoch {opt.round // steps}/{flags.epochs} loss {opt.last_epoch_loss:.4f} "
                  f"test_acc {opt.test_acc:.4f}", file=sys.stderr)
    report_end("synthetic_large.py", opt, flags)
    return 0


if __name__ == "__main__":
    run_main(main, "synthetic_large.py")
