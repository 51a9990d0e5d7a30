"""What the four workload scripts share: their flags, their data, the training loop and the
`--backend=sieve|ddp` switch, so that a sieve job and torch DDP run the same code.

The scripts (resnet20.py, resnet18.py, lstm_lm.py, char_transformer.py, in this folder) each
define a Workload (the model, its optimizer, the loss of one step, the evaluation) and call
`main(workload, description)`. The contract:

- **One script, two backends.** `--backend=sieve` (the default) is a worker of the sieve job that
  `sieve launch --worker_cmd=...` started: `sieve.torch.init()` reads the job from the SIEVE_*
  variables and `sieve.torch.DistributedOptimizer` wraps the optimizer (`--compressor`,
  `--density`, `--density_warmup`; the worker flags `sieve launch` routes after `--` win over
  them). `--backend=ddp` is a rank of a torch DistributedDataParallel job on gloo, started from
  `env://` (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE). Without RANK in the environment the
  script starts `--ddp_ranks` local ranks of itself (on 127.0.0.1, a free port) and exits with
  the first failing rank's status (0 when all succeed): Debian's torchrun is not needed.
- **The same work on both.** Every rank builds the model from `--seed` (sieve takes rank 0's
  weights as the job's, DDP broadcasts rank 0's; dropout and augmentation are seeded per rank),
  trains on its own part of the training data (rank r of W: the r-th of W equal contiguous
  parts) with the same per-worker batch, learning rate schedule and evaluation; the compressor
  flags are sieve's alone. The servers apply the mean
  of the workers' updates as DDP averages their gradients. BatchNorm's running statistics are rank
  0's on both (sieve's `buffers="broadcast"`, DDP's `broadcast_buffers`). A gradient clip is the
  workers' averaged gradient's with DDP and, with sieve, each worker's local gradient clipped to
  c * sqrt(W) (`--clip_rule=average`, sieve.torch's clip="average": Deep Gradient Compression's
  rule for servers that average), since no worker sees the average.
- **The compute-only bound.** `--backend=none` starts `--ddp_ranks` local ranks as DDP does,
  but they exchange nothing: each trains its own replica on its own part of the data. Its
  steps_per_s is the bound a communicating job's round approaches on the same machine; its
  metrics are a model trained on 1/W of the data and are not compared.
- **Length.** `--epochs` epochs of `steps_per_epoch` steps (the same on every rank), or fewer
  with `--max_steps=N`. The learning rate follows a linear warm-up over `--lr_warmup_steps` and a
  cosine decay to 0 at the last step, stepped per step.
- **Results.** Rank 0 evaluates after every `--eval_every`-th epoch and after the last step
  (`--eval_limit=N`: on the first N examples or tokens only; a language model refuses an N below
  one evaluation batch before it trains) and records the metrics with
  `opt.record(...)` on sieve, so the launcher's `sieve launch: job finished:` line shows them
  (test_acc for the image models, perplexity and val_loss for the LMs). On both backends rank 0
  then prints one line, `workload finished: backend=ddp workers=2 steps=20 time=5.1s
  eval_s=0.8 steps_per_s=4.67 test_acc=0.1234` (time: the training loop, evaluation included;
  steps_per_s leaves evaluation out), and with `--result_json=PATH` writes the same as JSON for
  programs (bench/workloads/run.py reads it; never the line).
- **Data from Debian packages, nothing downloaded.** Fashion-MNIST from dataset-fashion-mnist
  (/usr/share/datasets/fashion-mnist, normalized as sieve-worker does); the King James Bible
  from bible-kjv-text (/usr/lib/bible.data), read through its reader `bible` (package
  bible-kjv), split by books (KJV_VALID_BOOKS, KJV_TEST_BOOKS; the other 56 books train). A
  missing file or program raises DataError naming the package to install; the script prints it
  and exits 1 before anything starts.

Only CPU tensors: both backends train on the CPU (`--threads` torch threads per rank).
"""

import argparse
import gzip
import hashlib
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import torch
import torch.nn.functional as F


class WorkloadError(Exception):
    """A setup error the script prints as `SCRIPT: error: MESSAGE` before exiting 1."""


class DataError(WorkloadError):
    """A data set or corpus is missing or unreadable; the message names the package."""


# ---------------------------------------------------------------------------------------------
# Fashion-MNIST (Debian's dataset-fashion-mnist)

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_MEAN = 0.2860  # sieve-worker's normalization (worker/data/dataset.h)
FASHION_MNIST_STD = 0.3530


def _fashion_paths(data_dir, split):
    return (os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"),
            os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))


def check_fashion_mnist(data_dir=FASHION_MNIST_DIR):
    """DataError naming the package when a Fashion-MNIST file is missing."""
    for split in ("train", "t10k"):
        for path in _fashion_paths(data_dir, split):
            if not os.path.isfile(path):
                raise DataError(f"Fashion-MNIST file {path} is missing: it comes with Debian's "
                                "dataset-fashion-mnist (apt-get install dataset-fashion-mnist), "
                                "or give --data_dir")


def load_fashion_mnist(split, data_dir=FASHION_MNIST_DIR):
    """(images float32 [N, 1, 28, 28] normalized, labels int64 [N]) of split "train" or "t10k"."""
    check_fashion_mnist(data_dir)
    images_path, labels_path = _fashion_paths(data_dir, split)
    with gzip.open(images_path, "rb") as f:
        raw = f.read()
    if int.from_bytes(raw[0:4], "big") != 2051:
        raise DataError(f"{images_path}: not an idx3 image file")
    n, rows, cols = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
    pixels = np.frombuffer(raw, dtype=np.uint8, offset=16, count=n * rows * cols)
    with gzip.open(labels_path, "rb") as f:
        raw = f.read()
    if int.from_bytes(raw[0:4], "big") != 2049 or int.from_bytes(raw[4:8], "big") != n:
        raise DataError(f"{labels_path}: not the idx1 label file of {images_path}")
    labels = np.frombuffer(raw, dtype=np.uint8, offset=8, count=n)
    images = (pixels.astype(np.float32) / 255.0 - FASHION_MNIST_MEAN) / FASHION_MNIST_STD
    return (torch.from_numpy(images.reshape(n, 1, rows, cols)),
            torch.from_numpy(labels.astype(np.int64)))


def random_crop_flip(x, pad, generator, fill):
    """x [N, C, H, W] randomly cropped back to H x W from x padded by `pad` on each side (with
    `fill`, the background's value) and flipped left-right with probability 1/2, per example."""
    n, _, h, w = x.shape
    if pad > 0:
        x = F.pad(x, (pad, pad, pad, pad), value=fill)
        dy = torch.randint(0, 2 * pad + 1, (n,), generator=generator)
        dx = torch.randint(0, 2 * pad + 1, (n,), generator=generator)
        rows = (dy[:, None] + torch.arange(h))[:, None, :, None]  # [N, 1, H, 1]
        cols = (dx[:, None] + torch.arange(w))[:, None, None, :]  # [N, 1, 1, W]
        x = x[torch.arange(n)[:, None, None, None], torch.arange(x.shape[1])[None, :, None, None],
              rows, cols]
    flip = torch.rand(n, generator=generator) < 0.5
    return torch.where(flip[:, None, None, None], x.flip(-1), x)


# ---------------------------------------------------------------------------------------------
# The King James Bible (Debian's bible-kjv-text, read with bible-kjv's `bible`)

KJV_DATA = "/usr/lib/bible.data"
# The 66 books in canonical order, as the reader abbreviates them.
KJV_BOOKS = (
    "Ge", "Exo", "Lev", "Num", "Deu", "Josh", "Jdgs", "Ruth", "1Sm", "2Sm", "1Ki", "2Ki", "1Chr",
    "2Chr", "Ezra", "Neh", "Est", "Job", "Psa", "Prv", "Eccl", "SSol", "Isa", "Jer", "Lam", "Eze",
    "Dan", "Hos", "Joel", "Amos", "Obad", "Jonah", "Mic", "Nahum", "Hab", "Zep", "Hag", "Zec",
    "Mal", "Mat", "Mark", "Luke", "John", "Acts", "Rom", "1Cor", "2Cor", "Gal", "Eph", "Phi",
    "Col", "1Th", "2Th", "1Tim", "2Tim", "Titus", "Phmn", "Heb", "Jas", "1Pet", "2Pet", "1Jn",
    "2Jn", "3Jn", "Jude", "Rev")
KJV_VERSES = 31102
# The fixed split by books: each held-out set has a history, a wisdom, a prophet, a gospel and an
# epistle book, about 10 % of the text each. Word tokens (words(): punctuation and <eos>
# included): train 776,333, valid 84,191, test 84,286; characters (chars()): 3,405,006, 369,871,
# 362,973; verses 24,957, 3,001, 3,144.
KJV_VALID_BOOKS = ("Jdgs", "Prv", "Dan", "Mark", "Rom")  # Judges, Proverbs, Daniel, Mark, Romans
KJV_TEST_BOOKS = ("2Sm", "Job", "Hos", "John", "Heb")  # 2 Samuel, Job, Hosea, John, Hebrews
_VERSE_LINE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")


def _kjv_reader():
    reader = shutil.which("bible") or ("/usr/bin/bible" if os.path.exists("/usr/bin/bible")
                                       else None)
    if reader is None:
        raise DataError("the King James Bible's reader `bible` is not installed: it comes with "
                        "Debian's bible-kjv, which reads bible-kjv-text's compressed text "
                        "(apt-get install bible-kjv bible-kjv-text)")
    return reader


def check_kjv(path=KJV_DATA):
    """DataError naming the packages when the corpus file or its reader is missing."""
    if not os.path.isfile(path):
        raise DataError(f"the King James Bible text {path} is missing: it comes with Debian's "
                        "bible-kjv-text (apt-get install bible-kjv-text bible-kjv), or give "
                        "--corpus")
    _kjv_reader()


def read_kjv(path=KJV_DATA):
    """Every verse of the King James Bible, in order, as (book, chapter, verse, text) tuples, read
    from bible-kjv-text's data file with bible-kjv's `bible` (one verse per line)."""
    check_kjv(path)
    path = os.path.abspath(path)
    argv = [_kjv_reader(), "-f", "-p", os.path.dirname(path), "-d", os.path.basename(path),
            "Gen1:1-Rev22:21"]
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, env=dict(os.environ, COLUMNS="80"))
    if r.returncode != 0:
        raise DataError(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.strip()} (is {path} "
                        "bible-kjv-text's data file?)")
    verses = []
    for line in r.stdout.splitlines():
        m = _VERSE_LINE.match(line)
        if m is None:
            raise DataError(f"{path}: unexpected line from the reader: {line[:80]!r}")
        verses.append((m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)))
    books = tuple(dict.fromkeys(v[0] for v in verses))
    if len(verses) != KJV_VERSES or books != KJV_BOOKS:
        raise DataError(f"{path}: {len(verses)} verses in {len(books)} books, expected the King "
                        f"James Bible's {KJV_VERSES} in {len(KJV_BOOKS)}")
    return verses


def kjv_split(path=KJV_DATA):
    """{"train": [...], "valid": [...], "test": [...]}: each split's verse texts in canonical
    order (valid: KJV_VALID_BOOKS, test: KJV_TEST_BOOKS, train: the other books)."""
    splits = {"train": [], "valid": [], "test": []}
    for book, _, _, text in read_kjv(path):
        name = ("valid" if book in KJV_VALID_BOOKS else
                "test" if book in KJV_TEST_BOOKS else "train")
        splits[name].append(text)
    return splits


_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?|[^\sa-z]")


def words(verse):
    """A verse's word-level tokens: lower-cased words (with an inner apostrophe: king's), each
    punctuation mark a token of its own, then "<eos>"."""
    return _WORD.findall(verse.lower()) + ["<eos>"]


def chars(verses):
    """A split's character stream: its verses joined with newlines (case and punctuation kept)."""
    return "\n".join(verses) + "\n"


def split_digests(splits):
    """{split: (sha256 of its character stream, sha256 of its word tokens joined by spaces)}:
    what a test pins, so the split stays exactly the documented one."""
    out = {}
    for name, verses in splits.items():
        text = chars(verses)
        tokens = " ".join(t for v in verses for t in words(v))
        out[name] = (hashlib.sha256(text.encode()).hexdigest(),
                     hashlib.sha256(tokens.encode()).hexdigest())
    return out


def word_vocabulary(train_verses, size):
    """The `size` most frequent training tokens (ties in alphabetical order), "<unk>" first:
    every other word is <unk>."""
    counts = Counter(t for v in train_verses for t in words(v))
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ["<unk>"] + [w for w, _ in ranked if w != "<unk>"][:size - 1]


def encode_words(verses, vocabulary):
    index = {w: i for i, w in enumerate(vocabulary)}
    return torch.tensor([index.get(t, 0) for v in verses for t in words(v)], dtype=torch.int64)


def char_vocabulary(splits):
    """Every character of the whole corpus, sorted (a fixed alphabet: none is unknown)."""
    return sorted(set("".join(chars(v) for v in splits.values())))


def encode_chars(verses, vocabulary):
    index = {c: i for i, c in enumerate(vocabulary)}
    return torch.tensor([index[c] for c in chars(verses)], dtype=torch.int64)


class TokenStream:
    """A token stream for language modelling, cut into `batch` parallel columns: batch i of an
    epoch is (inputs, targets), each [batch, length], the targets one token ahead. Rank r of W
    trains on the r-th of W equal contiguous parts of the stream (the remainder is dropped)."""

    def __init__(self, tokens, batch, length, rank=0, world=1):
        part = len(tokens) // world
        tokens = tokens[rank * part:(rank + 1) * part]
        columns = part // batch
        self.data = tokens[:columns * batch].view(batch, columns)  # [batch, columns]
        self.length = length
        self.steps = (columns - 1) // length

    def batch(self, i):
        lo = i * self.length
        return (self.data[:, lo:lo + self.length], self.data[:, lo + 1:lo + 1 + self.length])


def eval_tokens(batch, length):
    """The fewest tokens lm_evaluate can score in `batch` windows of `length` tokens (each window
    also reads the token after it)."""
    return batch * (length + 1)


def lm_evaluate(model, tokens, batch, length, limit=0, state=False):
    """Mean cross-entropy (nats per token) of `model` over `tokens` (the first `limit` tokens when
    limit > 0), in `batch` columns of `length`-token windows. `state`: the model takes and returns
    a recurrent state, carried across windows (an LSTM). WorkloadError when the tokens do not fill
    one batch of windows (eval_tokens)."""
    if limit > 0:
        tokens = tokens[:limit + 1]
    stream = TokenStream(tokens, batch, length)
    if stream.steps == 0:
        raise WorkloadError(f"{len(tokens)} tokens are less than one evaluation batch ({batch} "
                            f"windows of {length} tokens need {eval_tokens(batch, length)})")
    total, count, hidden = 0.0, 0, None
    model.eval()
    with torch.no_grad():
        for i in range(stream.steps):
            x, y = stream.batch(i)
            if state:
                logits, hidden = model(x, hidden)
            else:
                logits = model(x)
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                                     reduction="sum").item()
            count += y.numel()
    model.train()
    return total / max(count, 1)


# ---------------------------------------------------------------------------------------------
# Optimizer helpers

def decay_groups(model, weight_decay):
    """Two param groups: weight decay on the weights of more than one dimension (convolutions,
    linear layers, embeddings), none on biases and normalization weights (1-D)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim <= 1]
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def lr_factor(step, total, warmup):
    """The learning rate's multiplier at `step` of `total`: linear warm-up over `warmup` steps,
    then a cosine decay to 0 at the last step."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(total - warmup, 1)
    return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


# ---------------------------------------------------------------------------------------------
# Workloads: what a script defines

class Workload:
    """A training task. A script subclasses it and passes an instance to main()."""

    name = "workload"
    # sieve's DistributedOptimizer(buffers=...): "broadcast" for BatchNorm models (DDP's default).
    buffers = "local"
    defaults = {}  # flag defaults of this workload (epochs, batch_size, lr, ...)

    def add_flags(self, parser):
        """Adds the workload's own flags."""

    def check_data(self, args):
        """Raises DataError when the data is missing (run before anything starts)."""

    def setup(self, args, rank, world):
        """Loads this rank's data; returns the steps per epoch (equal on every rank)."""
        raise NotImplementedError

    def build_model(self, args):
        raise NotImplementedError

    def optimizer(self, model, args):
        """The torch optimizer (SGD with momentum 0.9, weight decay off biases and norms)."""
        return torch.optim.SGD(decay_groups(model, args.weight_decay), lr=args.lr,
                               momentum=args.momentum)

    def clip_norm(self, args):
        """The gradient's clipping norm, or None."""
        return None

    def loss(self, model, epoch, index):
        """The training loss of batch `index` of `epoch` (model: what to call forward on)."""
        raise NotImplementedError

    def evaluate(self, model, args, final):
        """Rank 0's metrics, {name: number}, e.g. {"test_acc": 0.91}."""
        raise NotImplementedError


class ImageClassification(Workload):
    """Fashion-MNIST classification with random crop (zero-padded by --crop_pad) and flip; rank r
    trains on its part, reshuffled every epoch; the metric is test_acc on t10k."""

    buffers = "broadcast"

    def add_flags(self, parser):
        parser.add_argument("--data_dir", default=FASHION_MNIST_DIR,
                            help="Fashion-MNIST's idx files (Debian's dataset-fashion-mnist)")
        parser.add_argument("--crop_pad", type=int, default=2,
                            help="random crop: pixels of padding on each side (0: no crop)")

    def check_data(self, args):
        check_fashion_mnist(args.data_dir)

    def setup(self, args, rank, world):
        self.args, self.rank, self.world = args, rank, world
        images, labels = load_fashion_mnist("train", args.data_dir)
        part = len(labels) // world
        self.x = images[rank * part:(rank + 1) * part]
        self.y = labels[rank * part:(rank + 1) * part]
        self.test_x, self.test_y = load_fashion_mnist("t10k", args.data_dir)
        self.fill = -FASHION_MNIST_MEAN / FASHION_MNIST_STD  # a black pixel, normalized
        self.augment = torch.Generator().manual_seed(args.seed * 7919 + rank)
        self.epoch, self.order = -1, None
        return part // args.batch_size

    def loss(self, model, epoch, index):
        if epoch != self.epoch:
            g = torch.Generator().manual_seed(args_seed(self.args.seed, epoch, self.rank))
            self.epoch, self.order = epoch, torch.randperm(len(self.y), generator=g)
        b = self.args.batch_size
        idx = self.order[index * b:(index + 1) * b]
        x = random_crop_flip(self.x[idx], self.args.crop_pad, self.augment, self.fill)
        return F.cross_entropy(model(x), self.y[idx])

    def evaluate(self, model, args, final):
        n = len(self.test_y) if args.eval_limit <= 0 else min(args.eval_limit, len(self.test_y))
        correct = 0
        model.eval()
        with torch.no_grad():
            for lo in range(0, n, 500):
                hi = min(lo + 500, n)
                correct += (model(self.test_x[lo:hi]).argmax(1) == self.test_y[lo:hi]).sum().item()
        model.train()
        return {"test_acc": correct / max(n, 1)}


class KjvWorkload(Workload):
    """A language model on the King James Bible: the --corpus flag and its check (the split and
    the tokens are the subclass's)."""

    def add_flags(self, parser):
        parser.add_argument("--corpus", default=KJV_DATA, help="bible-kjv-text's data file")

    def eval_window(self, args):
        """(batch, length): the evaluation's parallel windows and tokens per window."""
        raise NotImplementedError

    def check_data(self, args):
        """The corpus, and an --eval_limit that leaves at least one evaluation batch."""
        check_kjv(args.corpus)
        batch, length = self.eval_window(args)
        need = eval_tokens(batch, length) - 1  # lm_evaluate reads limit + 1 tokens
        if 0 < args.eval_limit < need:
            raise WorkloadError(f"--eval_limit={args.eval_limit} is less than one evaluation "
                                f"batch ({batch} windows of {length} tokens): give at least "
                                f"{need}, or 0 for the whole split")


def args_seed(seed, epoch, rank):
    """The seed of rank `rank`'s data order in `epoch`."""
    return (seed * 1000003 + epoch * 1009 + rank) % (2 ** 63)


# ---------------------------------------------------------------------------------------------
# Backends

class SieveBackend:
    """A worker of the sieve job `sieve launch` started (SIEVE_* variables)."""

    name = "sieve"

    def __init__(self, args):
        import sieve.torch  # the build's module: sieve launch puts it on PYTHONPATH
        self.sieve = sieve.torch
        try:
            sieve.torch.init()  # answers `sieve launch`'s SIEVE_HELPXML probe and exits
        except ValueError as e:  # not under sieve launch
            raise WorkloadError(f"{e} (run it with `sieve launch --worker_cmd=...`, or use "
                                "--backend=ddp)") from None
        self.args = args
        self.rank, self.world = sieve.torch.rank(), sieve.torch.num_workers()
        self.opt = None

    def wrap(self, model, optimizer, steps_per_epoch, epochs, clip_norm, buffers):
        a = self.args
        warmup = ([float(d) for d in a.density_warmup.split(",") if d]
                  if a.compressor != "none" else [])
        self.opt = self.sieve.DistributedOptimizer(
            optimizer, model, compressor=a.compressor, density=a.density, density_warmup=warmup,
            steps_per_epoch=steps_per_epoch, epochs=epochs, seed=a.seed, clip_norm=clip_norm,
            clip=a.clip_rule, buffers=buffers)
        return model, self.opt

    @property
    def round(self):
        return self.opt.round  # with backup workers a step may skip rounds

    def step(self, model, loss):
        self.opt.record(loss=loss.detach())
        self.opt.step()

    def record(self, metrics):
        self.opt.record(**metrics)

    def finish(self):
        self.opt.finish()


class ComputeOnlyBackend:
    """No communication at all (--backend=none): a rank of `--ddp_ranks` local processes, each
    training its own replica on its own part of the data with the wrapped optimizer alone. What
    it measures is the compute-only bound of a step on this machine (the same script, batch and
    number of processes as a sieve or DDP job, nothing exchanged); rank 0's metrics are those of
    a model trained on 1/W of the data, not comparable with the other backends'. DdpBackend is
    the same with torch's all-reduce of the gradients."""

    name = "none"

    def __init__(self, args):
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.steps = 0
        self.clip = None
        self.opt = None

    def wrap(self, model, optimizer, steps_per_epoch, epochs, clip_norm, buffers):
        self.clip, self.opt, self.params = clip_norm, optimizer, list(model.parameters())
        return model, optimizer

    @property
    def round(self):
        return self.steps

    def step(self, model, loss):
        if self.clip is not None:  # DDP: the averaged gradient (after its all-reduce)
            torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        self.opt.step()
        self.steps += 1

    def record(self, metrics):
        pass  # printed by the loop

    def finish(self):
        pass


class DdpBackend(ComputeOnlyBackend):
    """A rank of a torch DistributedDataParallel job on gloo, from env:// (RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT)."""

    name = "ddp"

    def __init__(self, args):
        super().__init__(args)
        import torch.distributed as dist
        self.dist = dist
        dist.init_process_group("gloo", init_method="env://")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()

    def wrap(self, model, optimizer, steps_per_epoch, epochs, clip_norm, buffers):
        from torch.nn.parallel import DistributedDataParallel
        super().wrap(model, optimizer, steps_per_epoch, epochs, clip_norm, buffers)
        return DistributedDataParallel(model, broadcast_buffers=True), optimizer

    def finish(self):
        self.dist.barrier()
        self.dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------
# The flags, the loop, the local DDP launcher

def fashion_mnist_worker(batch_size):
    """For the plain sieve worker examples (adam_mlp.py, cnn_steplr.py): joins the sieve job
    (`sieve.torch.init()`, from the SIEVE_* variables `sieve launch` sets), seeds torch with the
    rank on one thread, and returns (rank, a shuffled DataLoader of `batch_size` batches over this
    worker's part of Fashion-MNIST's training set)."""
    import sieve
    import sieve.torch
    from torch.utils.data import DataLoader, TensorDataset

    sieve.torch.init()
    rank, world = sieve.torch.rank(), sieve.torch.num_workers()
    torch.manual_seed(rank)
    torch.set_num_threads(1)

    images, labels = sieve.load_fashion_mnist("train")
    lo, hi = sieve.partition_range(len(labels), rank, world)  # this worker's part
    train = DataLoader(TensorDataset(torch.from_numpy(images[lo:hi]),
                                     torch.from_numpy(labels[lo:hi]).long()),
                       batch_size=batch_size, shuffle=True, drop_last=True)
    return rank, train


def make_parser(workload, description):
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--backend", choices=("sieve", "ddp", "none"), default="sieve",
                   help="sieve: a worker of `sieve launch --worker_cmd`; ddp: torch DDP on gloo; "
                        "none: no communication, each rank trains alone (the compute-only bound)")
    p.add_argument("--ddp_ranks", type=int, default=2,
                   help="--backend=ddp|none without RANK in the environment: local ranks to "
                        "start")
    p.add_argument("--epochs", type=int, default=1, help="epochs over this rank's part")
    p.add_argument("--max_steps", type=int, default=0, help="stop after N steps (0: the epochs')")
    p.add_argument("--batch_size", type=int, default=32, help="per worker")
    p.add_argument("--lr", type=float, default=0.1, help="peak learning rate")
    p.add_argument("--lr_warmup_steps", type=int, default=0, help="linear warm-up steps")
    p.add_argument("--momentum", type=float, default=0.9, help="SGD's momentum")
    p.add_argument("--weight_decay", type=float, default=1e-4, help="not on biases and norms")
    p.add_argument("--compressor", default="topk", help="sieve: the compressor")
    p.add_argument("--density", type=float, default=0.001, help="sieve: k / D")
    p.add_argument("--clip_rule", choices=("average", "local", "dgc"), default="average",
                   help="sieve: each worker's gradient clip threshold for a model that clips at "
                        "c (sieve.torch's clip=): c*sqrt(W), c or c/sqrt(W)")
    p.add_argument("--density_warmup", default="0.015625,0.004",
                   help="sieve: the densities of the first epochs, comma-separated ('': none)")
    p.add_argument("--seed", type=int, default=1, help="the model's and the data order's")
    p.add_argument("--eval_every", type=int, default=1,
                   help="evaluate after every N-th epoch (0: after the last step only)")
    p.add_argument("--eval_limit", type=int, default=0,
                   help="evaluate on the first N examples / tokens (0: all)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--result_json", default="",
                   help="rank 0 writes the run's result here as JSON at the end (backend, "
                        "workers, steps, time_s, eval_s, steps_per_s, metrics), atomically")
    workload.add_flags(p)
    p.set_defaults(**workload.defaults)
    return p


def train(workload, args, backend):
    """The training loop (module docstring); returns the exit status."""
    torch.set_num_threads(max(args.threads, 1))
    torch.manual_seed(args.seed)
    rank, world = backend.rank, backend.world
    steps_per_epoch = workload.setup(args, rank, world)
    if steps_per_epoch < 1:
        raise DataError(f"{workload.name}: rank {rank}'s part of the data holds no whole batch "
                        f"(--batch_size={args.batch_size}, {world} workers)")
    stop = args.epochs * steps_per_epoch
    if args.max_steps > 0:
        stop = min(stop, args.max_steps)
    epochs = -(-stop // steps_per_epoch)
    model = workload.build_model(args)  # the same on every rank; rank 0's is the job's
    torch.manual_seed(args.seed * 1009 + rank + 1)  # each rank's own dropout masks
    optimizer = workload.optimizer(model, args)
    forward, opt = backend.wrap(model, optimizer, steps_per_epoch, epochs,
                                workload.clip_norm(args), workload.buffers)
    # Created after wrapping, as sieve.torch requires; stepped once per step.
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda _: lr_factor(backend.round, stop, args.lr_warmup_steps))
    if rank == 0:
        params = sum(p.numel() for p in model.parameters() if p.requires_grad)
        print(f"{workload.name}: backend {backend.name}, {world} workers, {params} parameters, "
              f"{steps_per_epoch} steps per epoch, {stop} steps", file=sys.stderr, flush=True)
    metrics, eval_s = {}, 0.0
    start = time.perf_counter()
    while backend.round < stop:
        step = backend.round
        epoch, index = divmod(step, steps_per_epoch)
        opt.zero_grad()
        loss = workload.loss(forward, epoch, index)
        loss.backward()
        backend.step(forward, loss)
        sched.step()
        done = backend.round >= stop
        epoch_end = backend.round // steps_per_epoch > epoch
        if rank == 0 and (done or (epoch_end and args.eval_every > 0 and
                                   (epoch + 1) % args.eval_every == 0)):
            t = time.perf_counter()
            metrics = workload.evaluate(model, args, final=done)
            eval_s += time.perf_counter() - t
            backend.record(metrics)
            shown = " ".join(f"{k} {v:.4f}" for k, v in metrics.items())
            print(f"{workload.name}: epoch {epoch + 1}/{epochs} step {backend.round} loss "
                  f"{loss.item():.4f} {shown} ({time.perf_counter() - start:.1f} s)",
                  file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - start
    if rank == 0:
        rate = stop / max(elapsed - eval_s, 1e-9)
        fields = " ".join(f"{k}={v:.6g}" for k, v in metrics.items())
        print(f"workload finished: backend={backend.name} workers={world} steps={stop} "
              f"time={elapsed:.1f}s eval_s={eval_s:.1f} steps_per_s={rate:.3g} {fields}",
              flush=True)
        if args.result_json:
            write_result(args.result_json, {
                "backend": backend.name, "workers": world, "steps": stop, "time_s": elapsed,
                "eval_s": eval_s, "steps_per_s": rate,
                "metrics": {k: float(v) for k, v in metrics.items()}})
    backend.finish()
    return 0


def write_result(path, result):
    """--result_json: the file appears whole or not at all (written beside it, then renamed)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_ranks(n, argv):
    """Starts n local DDP ranks of this script (env://) and waits; returns the first failing
    rank's exit status (the others are then stopped), 0 when every rank succeeded."""
    if n < 1:
        raise WorkloadError(f"--ddp_ranks must be >= 1, got {n}")
    port = _free_port()
    procs = []
    # Stopped (a timeout's SIGTERM), the launcher stops its ranks too (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    for r in range(n):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                   WORLD_SIZE=str(n), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(n))
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(sys.argv[0])] + argv,
                                      env=env))
    status = 0
    try:
        while procs:
            for p in list(procs):
                code = p.poll()
                if code is None:
                    continue
                procs.remove(p)
                if code != 0 and status == 0:
                    status = code if code > 0 else 1
                    for other in procs:  # the others would wait for it in an all-reduce
                        other.terminate()
            time.sleep(0.05)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return status


def main(workload, description, argv=None):
    """Parses the flags and runs `workload` on the chosen backend; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    args = make_parser(workload, description).parse_args(argv)
    program = os.path.basename(sys.argv[0])
    try:
        workload.check_data(args)
        if args.backend in ("ddp", "none"):
            if "RANK" not in os.environ:
                return spawn_ranks(args.ddp_ranks, argv)
            backend = DdpBackend if args.backend == "ddp" else ComputeOnlyBackend
            return train(workload, args, backend(args))
        return train(workload, args, SieveBackend(args))
    except WorkloadError as e:
        print(f"{program}: error: {e}", file=sys.stderr, flush=True)
        return 1
