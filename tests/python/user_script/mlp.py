"""A user's own training script, written the PyTorch way from docs/worker-api.md only: a
784-128-10 MLP on Fashion-MNIST, torch's SGD with momentum wrapped by
sieve.torch.DistributedOptimizer, torch's StepLR. The tests (tests/python/*_test.py) run it as

    build/deploy/sieve launch --num_servers=2 --num_workers=2 \
        --worker_cmd="/usr/bin/python3 tests/python/user_script/mlp.py"

with no model flags on the servers: the model defines D, rank 0's torch init the initial weights.

Test hooks, off unless their variable is set (none changes the training):
  MLP_DUMP_DIR=DIR     writes DIR/init-RANK.pt (the model's own init, before wrapping) and
                       DIR/wrapped-RANK.pt (the weights right after wrapping: the job's)
  MLP_KILL=R:N         rank R kills itself (SIGKILL) before its round N
  MLP_RAISE=R:N        rank R raises RuntimeError before its round N (an uncaught error)
  MLP_NO_FINISH=1      the script does not call opt.finish() (sieve.torch does it at exit)
  MLP_WIDEN=R          rank R's hidden layer has 129 units (a model of another D: a user's bug)
  MLP_CKPT=FILE:R:N    rank R saves opt.state_dict() (and the scheduler's) to FILE before its
                       round N, prints "checkpoint saved: residual_norm=X momentum_norm=Y ..."
                       and exits 3; a process that finds FILE after wrapping (the restarted
                       one) loads it, prints "checkpoint loaded: ..." alike and goes on
  MLP_REJOINED=FILE:N  with MLP_CKPT: the process that loaded the checkpoint creates FILE; every
                       other rank waits before its round N until FILE exists (at most 300 s), so
                       that the restarted rank rejoins a running job instead of one the others
                       finished while it was starting
  MLP_LATE=FILE        with MLP_CKPT: the opposite; the restarted rank waits before wrapping
                       until FILE exists and creates FILE.rejoined after wrapping; every other
                       rank creates FILE after its last round and waits for FILE.rejoined before
                       it finishes (each wait at most 300 s), so that the restarted rank rejoins
                       a job whose last round has passed (it has no round left to train)
  MLP_PLAIN_LOOP=1     the plain PyTorch loop, `for epoch in range(epochs): for batch in ...`,
                       from the first batch whatever opt.round is (a restarted rank starts its
                       epochs again); prints "plain loop: round=R steps_past_end=N" at its end
  MLP_EPOCHS, MLP_BATCH  epochs (default 1) and batch size (default 32)
"""

import os
import signal
import sys
import time

import torch
import torch.nn.functional as F

import sieve
import sieve.torch


def hook(variable):
    """(rank, round) of a test hook R:N, or (-1, -1)."""
    value = os.environ.get(variable, "")
    return tuple(map(int, value.split(":"))) if value else (-1, -1)


def wait_for(path):
    """Waits until the file `path` exists, at most 300 s (a test hook's handshake)."""
    deadline = time.monotonic() + 300
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)


def report(what, opt):
    sieve_state = opt.state_dict()["sieve"]  # the error feedback: residual and momentum
    print(f"checkpoint {what}: residual_norm={opt.residual().norm().item()!r} "
          f"momentum_norm={sieve_state['momentum'].norm().item()!r} "
          f"lr={opt.param_groups[0]['lr']!r} round={opt.round}", flush=True)


def main():
    sieve.torch.init()                       # the job: SIEVE_* from sieve launch
    rank, world = sieve.torch.rank(), sieve.torch.num_workers()
    torch.manual_seed(1000 + rank)           # each rank its own init: rank 0's is the job's
    torch.set_num_threads(1)
    epochs = int(os.environ.get("MLP_EPOCHS", "1"))
    batch = int(os.environ.get("MLP_BATCH", "32"))

    images, labels = sieve.load_fashion_mnist("train")
    lo, hi = sieve.partition_range(len(labels), rank, world)
    x, y = torch.from_numpy(images[lo:hi]), torch.from_numpy(labels[lo:hi]).long()
    steps = len(y) // batch

    ckpt, ckpt_rank, ckpt_round = (os.environ["MLP_CKPT"].rsplit(":", 2)
                                   if os.environ.get("MLP_CKPT") else ("", -1, -1))
    ckpt_rank, ckpt_round = int(ckpt_rank), int(ckpt_round)
    late_file = os.environ.get("MLP_LATE", "")
    if late_file and rank == ckpt_rank and os.path.exists(ckpt):
        wait_for(late_file)

    hidden = 129 if os.environ.get("MLP_WIDEN") == str(rank) else 128
    model = torch.nn.Sequential(torch.nn.Linear(784, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, 10))
    dump = os.environ.get("MLP_DUMP_DIR")
    if dump:
        torch.save(torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone(),
                   f"{dump}/init-{rank}.pt")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    opt = sieve.torch.DistributedOptimizer(opt, model, compressor="topk", density=0.01,
                                           steps_per_epoch=steps, epochs=epochs)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    if dump:
        torch.save(torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone(),
                   f"{dump}/wrapped-{rank}.pt")

    kill_rank, kill_round = hook("MLP_KILL")
    raise_rank, raise_round = hook("MLP_RAISE")
    rejoined_file, wait_round = (os.environ["MLP_REJOINED"].rsplit(":", 1)
                                 if os.environ.get("MLP_REJOINED") else ("", -1))
    wait_round = int(wait_round)
    if ckpt and rank == ckpt_rank and os.path.exists(ckpt):
        state = torch.load(ckpt)
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        report("loaded", opt)
        ckpt_round = -1
        if late_file:
            open(late_file + ".rejoined", "w").close()
        if rejoined_file:
            open(rejoined_file, "w").close()

    # A restarted worker rejoins at the job's round: go on from there (MLP_PLAIN_LOOP: every
    # epoch's batches from the first, whatever opt.round is).
    plain = os.environ.get("MLP_PLAIN_LOOP") == "1"
    epoch = 0
    while epoch < epochs if plain else opt.round < epochs * steps:
        if plain:
            step = 0
        else:
            epoch, step = divmod(opt.round, steps)
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(epoch))
        for i in range(step, steps):
            if rank == kill_rank and opt.round == kill_round:
                os.kill(os.getpid(), signal.SIGKILL)
            if rank == raise_rank and opt.round == raise_round:
                raise RuntimeError(f"MLP_RAISE: rank {rank} fails at round {opt.round}")
            if rejoined_file and rank != ckpt_rank and opt.round == wait_round:
                wait_for(rejoined_file)
            if rank == ckpt_rank and opt.round == ckpt_round:
                torch.save({"opt": opt.state_dict(), "sched": sched.state_dict()}, ckpt)
                report("saved", opt)
                os._exit(3)
            idx = order[i * batch:(i + 1) * batch]
            opt.zero_grad()
            loss = F.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.record(loss=loss)
            opt.step()
        sched.step()
        if rank == 0:
            test_x, test_y = sieve.load_fashion_mnist("t10k")
            with torch.no_grad():
                acc = (model(torch.from_numpy(test_x)).argmax(1).numpy() == test_y).mean()
            opt.record(test_acc=acc)
            print(f"epoch {epoch + 1}: test_acc {acc:.4f}", file=sys.stderr)
        epoch += 1
    if plain:
        print(f"plain loop: round={opt.round} steps_past_end={opt.steps_past_end}", flush=True)
    if late_file and rank != ckpt_rank:
        open(late_file, "w").close()
        wait_for(late_file + ".rejoined")
    if not os.environ.get("MLP_NO_FINISH"):
        opt.finish()


if __name__ == "__main__":
    main()
