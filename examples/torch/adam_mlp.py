"""FNN-3 (784-200-200-10) on Fashion-MNIST with torch's Adam, trained by a sieve job: Adam
computes each worker's update, sieve.torch.DistributedOptimizer adds it to the error-feedback
residual and pushes the top-k entries. Run it from the source tree after building:

    build/deploy/sieve launch --num_servers=1 --num_workers=2 \
        --worker_cmd="/usr/bin/python3 examples/torch/adam_mlp.py --epochs=1"

No model flags on the servers: the model defines the job's size, rank 0's torch init the
initial weights. Rank 0 prints the test accuracy after every epoch.
"""

import argparse

import torch
import torch.nn.functional as F

import sieve
import sieve.torch
import workload_common as common


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--density", type=float, default=0.01)
    args = parser.parse_args()

    rank, train = common.fashion_mnist_worker(args.batch_size)  # this worker's part of the job

    model = torch.nn.Sequential(torch.nn.Linear(784, 200), torch.nn.ReLU(),
                                torch.nn.Linear(200, 200), torch.nn.ReLU(),
                                torch.nn.Linear(200, 10))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    opt = sieve.torch.DistributedOptimizer(opt, model, compressor="topk", density=args.density,
                                           steps_per_epoch=len(train), epochs=args.epochs)

    if rank == 0:
        test_x, test_y = (torch.from_numpy(a) for a in sieve.load_fashion_mnist("t10k"))
    for epoch in range(args.epochs):
        for x, y in train:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.record(loss=loss)
            opt.step()
        if rank == 0:
            with torch.no_grad():
                acc = (model(test_x).argmax(1) == test_y.long()).float().mean().item()
            opt.record(test_acc=acc)
            print(f"epoch {epoch + 1}: test accuracy {acc:.4f}", flush=True)
    opt.finish()


if __name__ == "__main__":
    main()
