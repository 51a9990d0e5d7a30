"""FNN-3 or a small CNN on Fashion-MNIST, in plain torch, as a worker of a sieve job that does
exactly what `sieve-worker` does.

The same job as `sieve-worker --model=fnn3|cnn`: the same idx files (Debian's
dataset-fashion-mnist, read and normalized by sieve's C++ loader), the same per-rank partition and
per-epoch shuffle, the same schedules, compressor and metrics lines; the network is torch's, the
optimizer torch's SGD (momentum, weight decay) wrapped by sieve.torch.DistributedOptimizer, the
learning-rate schedule a torch LambdaLR following sieve-worker's --lr_steps / --lr_warmup_epochs.
Started by the launcher in place of sieve-worker (docs/worker-api.md):

    build/deploy/sieve launch --num_servers=2 --num_workers=4 \
        --worker_cmd="/usr/bin/python3 examples/torch/fashion_mnist.py" -- \
        --compressor=topk --density=0.001 --density_warmup=0.015625,0.004 --epochs=10

(`sieve launch` exports the job in SIEVE_* variables and routes these worker flags in
SIEVE_WORKER_FLAGS; it finds the module in build/worker/python by itself.) Flags: sieve-worker's
(sieve.worker.WORKER_FLAGS), in SIEVE_WORKER_FLAGS or on the command line. --model picks the
network: fnn3 (784-200-200-10) or cnn (conv 5x5x8, pool, conv 5x5x16, pool, fc 64, fc 10). Rank 0's
torch initialization is the job's: the servers are started without --model (the launcher's
default), unless --model is routed to them too, in which case their seeded init is used.
"""

import sys
import time

import torch
import torch.nn.functional as F

import sieve
import sieve.torch
from sieve.worker import WORKER_FLAGS, UsageError, run_main

# The flags this script implements beyond what sieve.torch itself reads: all of sieve.worker's
# (--kernel_threads and --progress are accepted and ignored, as sieve.worker documents).
OWN_FLAGS = {name: spec for name, spec in WORKER_FLAGS.items()
             if name not in sieve.torch.WRAPPER_FLAGS}


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
    job = sieve.torch.init(argv=argv, extra_flags=OWN_FLAGS)
    flags = job.flags
    torch.set_num_threads(flags.blas_threads)
    torch.manual_seed(flags.seed)
    device = sieve.torch.default_device(flags.device)
    model = make_model(flags.model).to(device)
    world = sieve.torch.num_workers()
    images, labels = sieve.load_fashion_mnist("train", flags.data_dir)
    n = len(labels)
    steps = sieve.steps_per_epoch(n, world, flags.batch_size)

    opt = torch.optim.SGD(model.parameters(), lr=flags.lr, momentum=flags.momentum,
                          weight_decay=flags.weight_decay)
    opt = sieve.torch.DistributedOptimizer(opt, model, compressor=flags.compressor,
                                           density=flags.density,
                                           density_warmup=flags.float_list("density_warmup"),
                                           steps_per_epoch=steps, epochs=flags.epochs,
                                           seed=flags.seed, metrics_out=flags.metrics_out,
                                           metrics_every=flags.metrics_every)
    lr_steps = flags.int_list("lr_steps")
    # sieve-worker's schedule of round r (a rejoined worker starts at its join round).
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda _: sieve.learning_rate(
        opt.round, steps, flags.lr, lr_steps, flags.lr_gamma, flags.lr_warmup_epochs) / flags.lr)

    rank = opt.rank
    lo, hi = sieve.partition_range(n, rank, world)
    x_all = torch.from_numpy(images).to(device)
    y_all = torch.from_numpy(labels).long().to(device)
    if rank == 0:
        test_images, test_labels = sieve.load_fashion_mnist("t10k", flags.data_dir)
        x_test = torch.from_numpy(test_images).to(device)
        y_test = torch.from_numpy(test_labels).long().to(device)

    stop = flags.epochs * steps
    if flags.max_rounds > 0:
        stop = min(stop, flags.max_rounds)
    b = flags.batch_size
    print(f"worker {rank} of {world}: D = {sieve.torch.flat_size(model)}, model {flags.model}, "
          f"compressor {flags.compressor}, device {device}, {steps} rounds per epoch",
          file=sys.stderr)
    start = time.perf_counter()
    while opt.round < stop:
        epoch = opt.round // steps
        order = torch.from_numpy(sieve.epoch_batch_order(n, rank, world, b, flags.seed, epoch))
        order = order.to(device)
        # By opt.round, not a count: with backup workers (sieve-server --backup_workers) a step
        # may skip the rounds that closed without this worker, and their batches with them.
        while opt.round < stop and opt.round // steps == epoch:
            step = opt.round - epoch * steps
            idx = order[step * b:(step + 1) * b]
            opt.zero_grad()
            loss = F.cross_entropy(model(x_all[idx]), y_all[idx])
            loss.backward()
            opt.record(loss=loss.detach())
            # sieve-worker evaluates after the last round of every --eval_every-th epoch.
            last = opt.round + 1 == stop
            end_of_epoch = (opt.round + 1) % steps == 0
            evaluate = rank == 0 and (last or (end_of_epoch and flags.eval_every > 0 and
                                               (epoch + 1) % flags.eval_every == 0))
            opt.step()
            sched.step()
            if evaluate:
                opt.record(test_acc=accuracy(model, x_test, y_test),
                           train_acc=accuracy(model, x_all[lo:hi], y_all[lo:hi]))
        if rank == 0:
            print(f"epoch {epoch + 1}/{flags.epochs} test_acc "
                  f"{accuracy(model, x_test, y_test):.4f} ({time.perf_counter() - start:.1f} s)",
                  file=sys.stderr)
    opt.finish()
    return 0


if __name__ == "__main__":
    run_main(main, "fashion_mnist.py")
