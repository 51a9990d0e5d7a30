"""ResNet-20 (He et al., "Deep Residual Learning for Image Recognition", the CIFAR network: a 3x3
convolution, 3 stages of 3 basic blocks at 16, 32 and 64 channels with BatchNorm, identity
shortcuts zero-padded where the shape changes, global average pooling, a linear classifier;
0.27 M parameters) on 1x28x28 Fashion-MNIST with random crop (padding 2) and flip, trained as in
the paper on gradient sparsification: SGD with momentum 0.9, weight decay 1e-4 (not on BatchNorm
or biases), Top-k 0.1 % after a density warm-up of 1.5625 % and 0.4 % in the first two epochs.

The same script is a worker of a sieve job or a rank of a torch DDP job (workload_common.py has
the contract). From the source tree, after building:

    build/deploy/sieve launch --num_servers=2 --num_workers=4 \\
        --worker_cmd="/usr/bin/python3 examples/torch/resnet20.py --epochs=15"
    /usr/bin/python3 examples/torch/resnet20.py --backend=ddp --ddp_ranks=4 --epochs=15

Rank 0 evaluates the test accuracy after every epoch; the launcher's `job finished:` line shows
the last (test_acc=...), and both backends end with a `workload finished:` line. The compressor
is sieve's: `--compressor=none` trains dense, and flags given after `--` to `sieve launch`
(`-- --compressor=gaussiank --density=0.001`) win over the script's.
"""

import sys

import torch
import torch.nn.functional as F

import workload_common as common


class BasicBlock(torch.nn.Module):
    """Two 3x3 convolutions with BatchNorm; the shortcut subsamples and zero-pads the channels
    when the block halves the resolution (He et al.'s option A)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.stride, self.extra = stride, cout - cin

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = x[:, :, ::self.stride, ::self.stride] if self.stride > 1 else x
        if self.extra:
            shortcut = F.pad(shortcut, (0, 0, 0, 0, self.extra // 2, self.extra - self.extra // 2))
        return F.relu(out + shortcut)


class ResNet20(torch.nn.Module):
    def __init__(self, width=16, blocks=3, classes=10, channels=1):
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, width, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(width)
        layers, cin = [], width
        for stage in range(3):
            cout = width * 2 ** stage
            for b in range(blocks):
                layers.append(BasicBlock(cin, cout, 2 if stage > 0 and b == 0 else 1))
                cin = cout
        self.layers = torch.nn.Sequential(*layers)
        self.fc = torch.nn.Linear(cin, classes)
        for m in self.modules():
            if isinstance(m, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.layers(F.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class ResNet20Workload(common.ImageClassification):
    name = "resnet20"
    defaults = {"epochs": 15, "batch_size": 64, "lr": 0.1, "weight_decay": 1e-4}

    def add_flags(self, parser):
        super().add_flags(parser)
        parser.add_argument("--width", type=int, default=16,
                            help="channels of the first stage (then 2x and 4x)")

    def build_model(self, args):
        return ResNet20(width=args.width)


if __name__ == "__main__":
    sys.exit(common.main(ResNet20Workload(), __doc__.split("\n\n")[0]))
