"""A wide MLP (10,512,394 parameters by default) on synthetic data, as a worker of a sieve job: the
size where sparse push/pull matters (a dense fp32 push is 42 MB a round; Top-k at density 0.001
pushes 10,512 pairs, 84 kB).

Data: inputs x ~ N(0, I) of --input_dim, labelled by a fixed random teacher network (a seeded
two-layer ReLU net, the same on every worker); every worker draws its own batches from a generator
keyed by (seed, rank, round), rank 0 evaluates on 10,000 held-out examples after each epoch
(--rounds_per_epoch rounds). The model defines the job: the servers, started without --model,
take D from the workers and rank 0's torch initialization:

    build/deploy/sieve launch --num_servers=2 --num_workers=2 \
        --worker_cmd="/usr/bin/python3 examples/torch/synthetic_large.py" -- \
        --compressor=topk --density=0.001 --epochs=3 --rounds_per_epoch=200

Flags: sieve-worker's (sieve.worker.WORKER_FLAGS) and --width, --depth, --input_dim,
--classes, --lr, --momentum (torch's SGD), --print_params.
"""

import sys

import torch
import torch.nn.functional as F

import sieve
import sieve.torch
from sieve.worker import WORKER_FLAGS, run_main

EXTRA = {
    **{name: WORKER_FLAGS[name] for name in ("batch_size", "epochs", "max_rounds",
                                             "rounds_per_epoch", "lr", "momentum")},
    "width": (int, 2048, "Hidden units per layer"),
    "depth": (int, 3, "Hidden layers"),
    "input_dim": (int, 1024, "Input features"),
    "classes": (int, 10, "Classes of the teacher"),
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
    job = sieve.torch.init(argv=argv, extra_flags=EXTRA)
    flags = job.flags
    torch.manual_seed(flags.seed)
    model = make_model(flags)
    if flags.print_params:
        print(sieve.torch.flat_size(model))
        return 0
    torch.set_num_threads(flags.blas_threads)
    device = sieve.torch.default_device(flags.device)
    model = model.to(device)
    teacher = Teacher(flags, device)
    steps = flags.rounds_per_epoch
    opt = torch.optim.SGD(model.parameters(), lr=flags.lr, momentum=flags.momentum)
    opt = sieve.torch.DistributedOptimizer(opt, model, compressor=flags.compressor,
                                           density=flags.density, steps_per_epoch=steps,
                                           epochs=flags.epochs, seed=flags.seed,
                                           metrics_out=flags.metrics_out)
    rank = opt.rank
    x_test, y_test = teacher.batch(2**40 + flags.seed, 10000)
    stop = flags.epochs * steps
    if flags.max_rounds > 0:
        stop = min(stop, flags.max_rounds)
    d = sieve.torch.flat_size(model)
    print(f"worker {rank}: wide MLP, D = {d}, k = {sieve.k_for_density(flags.density, d)} pairs "
          "a round", file=sys.stderr)
    while opt.round < stop:
        key = sieve.counter_hash(sieve.counter_hash(flags.seed, rank), opt.round)
        x, y = teacher.batch(key % 2**63, flags.batch_size)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.record(loss=loss.detach())
        opt.step()
        if rank == 0 and (opt.round % steps == 0 or opt.round == stop):
            with torch.no_grad():
                acc = (model(x_test).argmax(1) == y_test).float().mean().item()
            opt.record(test_acc=acc)
            print(f"round {opt.round} loss {loss.item():.4f} test_acc {acc:.4f}",
                  file=sys.stderr)
    opt.finish()
    return 0


if __name__ == "__main__":
    run_main(main, "synthetic_large.py")
