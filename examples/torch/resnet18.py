"""torchvision's ResNet-18 (11.2 M parameters) with a 1-channel stem (its 7x7 stride-2
convolution and max pooling, on one input channel) on 1x28x28 Fashion-MNIST with random crop
(padding 2) and flip, trained as in the paper on gradient sparsification: SGD with momentum 0.9,
weight decay 1e-4 (not on BatchNorm or biases), Top-k 0.1 % after a density warm-up of 1.5625 %
and 0.4 % in the first two epochs. Needs Debian's python3-torchvision.

The same script is a worker of a sieve job or a rank of a torch DDP job (workload_common.py has
the contract). From the source tree, after building:

    build/deploy/sieve launch --num_servers=2 --num_workers=4 \\
        --worker_cmd="/usr/bin/python3 examples/torch/resnet18.py --epochs=5"
    /usr/bin/python3 examples/torch/resnet18.py --backend=ddp --ddp_ranks=4 --epochs=5

Rank 0 evaluates the test accuracy after every epoch; the launcher's `job finished:` line shows
the last (test_acc=...), and both backends end with a `workload finished:` line. The compressor
is sieve's: `--compressor=none` trains dense, and flags given after `--` to `sieve launch`
(`-- --compressor=gaussiank --density=0.001`) win over the script's.
"""

import sys

import torch

import workload_common as common


def _torchvision():
    try:
        import torchvision
    except ImportError:
        raise common.DataError("resnet18.py needs torchvision: apt-get install "
                               "python3-torchvision") from None
    return torchvision


def resnet18(classes=10, channels=1):
    """torchvision.models.resnet18 (random init) with its first convolution on `channels`."""
    model = _torchvision().models.resnet18(num_classes=classes)
    model.conv1 = torch.nn.Conv2d(channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    torch.nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    return model


class ResNet18Workload(common.ImageClassification):
    name = "resnet18"
    defaults = {"epochs": 5, "batch_size": 64, "lr": 0.1, "weight_decay": 1e-4}

    def check_data(self, args):
        super().check_data(args)
        _torchvision()

    def build_model(self, args):
        return resnet18()


if __name__ == "__main__":
    sys.exit(common.main(ResNet18Workload(), __doc__.split("\n\n")[0]))
