"""A small CNN of your own on Fashion-MNIST, trained by a sieve job: torch's SGD with momentum
wrapped by sieve.torch.DistributedOptimizer (top-k sparsification with error feedback), the
learning rate from torch's StepLR. Run it from the source tree after building:

    build/deploy/sieve launch --num_servers=2 --num_workers=2 \
        --worker_cmd="/usr/bin/python3 examples/torch/cnn_steplr.py --epochs=2"

The servers need no model flags: the model defines the job's size and rank 0's torch init its
initial weights. Each worker trains its part of the training set; rank 0 prints the test
accuracy after every epoch (and `sieve launch` the last one in its result line).
"""

import argparse

import torch
import torch.nn.functional as F

import sieve
import sieve.torch
import workload_common as common


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(16, 32, 5, padding=2)
        self.fc1 = torch.nn.Linear(32 * 7 * 7, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = x.view(-1, 1, 28, 28)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--density", type=float, default=0.01)
    args = parser.parse_args()

    rank, train = common.fashion_mnist_worker(args.batch_size)  # this worker's part of the job

    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    opt = sieve.torch.DistributedOptimizer(opt, model, compressor="topk", density=args.density,
                                           steps_per_epoch=len(train), epochs=args.epochs)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)  # after wrapping

    if rank == 0:
        test_x, test_y = (torch.from_numpy(a) for a in sieve.load_fashion_mnist("t10k"))
    for epoch in range(args.epochs):
        model.train()
        for x, y in train:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.record(loss=loss)
            opt.step()  # the servers' weights are in the model again
        scheduler.step()
        if rank == 0:
            model.eval()
            with torch.no_grad():
                acc = (model(test_x).argmax(1) == test_y.long()).float().mean().item()
            opt.record(test_acc=acc)
            print(f"epoch {epoch + 1}: lr {scheduler.get_last_lr()[0]:g} test accuracy "
                  f"{acc:.4f}", flush=True)
    opt.finish()


if __name__ == "__main__":
    main()
