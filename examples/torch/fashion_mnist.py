"""FNN-3 or a small CNN on Fashion-MNIST, in plain torch, as a worker of a sieve job.

The same job as `sieve-worker --model=fnn3|cnn`: the same idx files (Debian's
dataset-fashion-mnist, read and normalized by sieve's C++ loader), the same per-rank partition and
per-epoch shuffle, the same schedules, compressor and metrics lines; the network is torch's.
Started by the launcher in place of sieve-worker (docs/worker-api.md, "Python"):

    PYTHONPATH=build/worker/python build/deploy/sieve launch --num_servers=2 --num_workers=4 \
        --worker_cmd="python3 examples/torch/fashion_mnist.py" -- \
        --model=fnn3 --compressor=topk --density=0.001 --density_warmup=0.015625,0.004 --epochs=10

Flags: sieve-worker's (sieve.worker.WORKER_FLAGS). --model picks the network: fnn3 (784-200-200-10,
the servers' fnn3 layout, parameter for parameter) or cnn (conv 5x5x8, pool, conv 5x5x16, pool,
fc 64, fc 10: the servers' cnn layout has the same D and segment order; torch's NCHW weights
read the segments in its own order, and every segment's initial values are i.i.d., so the
servers' initialization fits it as well).
"""

import sys
import time

import torch
import torch.nn.functional as F

import sieve
import sieve.torch
from sieve.worker import (UsageError, connect, job_from_environment, leave_on_failure,
                          parse_flags, report_end, run_main, serve_health)


def make_model(name):
    if name == "fnn3":
        return torch.nn.Sequential(
            torch.nn.Linear(784, 200), torch.nn.ReLU(),
            torch.nn.Linear(200, 200), torch.nn.ReLU(),
            torch.nn.Linear(200, 10))
    if name == "cnn":
        return torch.nn.Sequential(
            torch.nn.Unflatten(1, (1, 28, 28)),
            torch.nn.Conv2d(1, 8, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(),
            torch.nn.Linear(256, 64), torch.nn.ReLU(),
            torch.nn.Linear(64, 10))
    raise UsageError(f"--model={name}: this example trains fnn3 or cnn")


def accuracy(model, x, y, chunk=2000):
    correct = 0
    with torch.no_grad():
        for lo in range(0, len(x), chunk):
            correct += (model(x[lo:lo + chunk]).argmax(1) == y[lo:lo + chunk]).sum().item()
    return correct / max(len(x), 1)


def main(argv):
    flags = job_from_environment(parse_flags(argv, program="fashion_mnist.py"))
    torch.set_num_threads(flags.blas_threads)
    torch.manual_seed(flags.seed)
    device = sieve.torch.default_device(flags.device)
    model = make_model(flags.model).to(device)
    d = sieve.torch.flat_size(model)

    progress = {"sieve_worker_rounds_total": 0, "sieve_worker_bytes_up_total": 0}
    serve_health(flags.bind, flags.metrics_port, lambda: progress)  # /healthz while it forms
    client = connect(flags, d)
    return leave_on_failure(client, train, flags, model, device, d, client, progress)


def train(flags, model, device, d, client, progress):
    rank, world = client.rank, client.num_workers
    images, labels = sieve.load_fashion_mnist("train", flags.data_dir)
    n = len(labels)
    lo, hi = sieve.partition_range(n, rank, world)
    steps = sieve.steps_per_epoch(n, world, flags.batch_size)
    x_all = torch.from_numpy(images).to(device)
    y_all = torch.from_numpy(labels).long().to(device)
    if rank == 0:
        test_images, test_labels = sieve.load_fashion_mnist("t10k", flags.data_dir)
        x_test = torch.from_numpy(test_images).to(device)
        y_test = torch.from_numpy(test_labels).long().to(device)

    def evaluate():
        return accuracy(model, x_test, y_test), accuracy(model, x_all[lo:hi], y_all[lo:hi])

    opt = sieve.torch.DistributedOptimizer.from_flags(model, client, flags, steps)
    stop = flags.epochs * steps
    if flags.max_rounds > 0:
        stop = min(stop, flags.max_rounds)
    b = flags.batch_size
    print(f"worker {rank} of {world}: D = {d}, model {flags.model}, compressor "
          f"{flags.compressor}, device {device}, {steps} rounds per epoch", file=sys.stderr)
    start = time.perf_counter()
    while opt.round < stop:
        epoch = opt.round // steps
        order = torch.from_numpy(sieve.epoch_batch_order(n, rank, world, b, flags.seed, epoch))
        order = order.to(device)
        for step in range(opt.round - epoch * steps, steps):
            if opt.round >= stop:
                break
            idx = order[step * b:(step + 1) * b]
            opt.zero_grad()
            loss = F.cross_entropy(model(x_all[idx]), y_all[idx])
            loss.backward()
            cut = opt.round + 1 == stop and stop < flags.epochs * steps
            opt.step(loss=loss.detach(), evaluate=evaluate)
            progress["sieve_worker_rounds_total"] = opt.round - opt.first_round
            progress["sieve_worker_bytes_up_total"] = opt.bytes_up
            if cut and rank == 0:
                opt.test_acc = evaluate()[0]
        if rank == 0 and opt.test_acc is not None:
            print(f"epoch {epoch + 1}/{flags.epochs} loss {opt.last_epoch_loss:.4f} test_acc "
                  f"{opt.test_acc:.4f} ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    report_end("fashion_mnist.py", opt, flags)
    return 0


if __name__ == "__main__":
    run_main(main, "fashion_mnist.py")
