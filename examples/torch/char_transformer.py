"""A small causal transformer over the characters of the King James Bible: 4 pre-norm layers of
d = 128 (--width; 4 heads, feed-forward 4d, learned positions, dropout 0.1) over 128-character
contexts, trained with AdamW (lr 1e-3 after a 100-step linear warm-up, then cosine; betas 0.9 and
0.99; weight decay 0.1, not on biases and LayerNorm) and with sieve Top-k 0.1 % after a density
warm-up of 1.5625 % and 0.4 % in the first two epochs. The metric is the validation loss (nats
per character). --dense_embeddings keeps the embedding, the positions and the 1-D tensors dense
(a param_groups entry with sieve_density=1.0 each) and compresses the other matrices only.

The corpus and its split by books are lstm_lm.py's (Debian's bible-kjv-text, read with bible-kjv;
workload_common.kjv_split): the verses joined by newlines, case and punctuation kept, the
alphabet every character of the corpus. Each step a worker reads the next context-long window of
each of its --batch_size columns of its part of the training text.

The same script is a worker of a sieve job or a rank of a torch DDP job (workload_common.py has
the contract). From the source tree, after building:

    build/deploy/sieve launch --num_servers=2 --num_workers=4 \\
        --worker_cmd="/usr/bin/python3 examples/torch/char_transformer.py --max_steps=2000"
    /usr/bin/python3 examples/torch/char_transformer.py --backend=ddp --ddp_ranks=4 \\
        --max_steps=2000

Rank 0 evaluates after every epoch and after the last step; the launcher's `job finished:` line
shows the last val_loss=, and both backends end with a `workload finished:` line.
"""

import sys

import torch
import torch.nn.functional as F

import workload_common as common


class CharTransformer(torch.nn.Module):
    def __init__(self, vocabulary, width, layers, heads, context, dropout):
        super().__init__()
        self.embed = torch.nn.Embedding(vocabulary, width)
        self.position = torch.nn.Parameter(torch.zeros(context, width))
        self.drop = torch.nn.Dropout(dropout)
        layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout,
                                                 activation="gelu", batch_first=True,
                                                 norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(width)
        self.out = torch.nn.Linear(width, vocabulary)
        torch.nn.init.normal_(self.embed.weight, std=0.02)
        torch.nn.init.normal_(self.position, std=0.02)
        mask = torch.triu(torch.full((context, context), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        """x [batch, length <= context] -> logits [batch, length, vocabulary]; position t sees
        positions <= t only."""
        n = x.shape[1]
        h = self.drop(self.embed(x) + self.position[:n])
        h = self.blocks(h, mask=self.mask[:n, :n])
        return self.out(self.norm(h))


class CharTransformerWorkload(common.KjvWorkload):
    name = "char_transformer"
    defaults = {"epochs": 100, "max_steps": 2000, "batch_size": 32, "lr": 1e-3,
                "lr_warmup_steps": 100, "weight_decay": 0.1}

    def add_flags(self, parser):
        super().add_flags(parser)
        parser.add_argument("--width", type=int, default=128, help="model width d")
        parser.add_argument("--layers", type=int, default=4, help="transformer layers")
        parser.add_argument("--heads", type=int, default=4, help="attention heads")
        parser.add_argument("--context", type=int, default=128, help="characters per window")
        parser.add_argument("--dropout", type=float, default=0.1, help="dropout probability")
        parser.add_argument("--dense_embeddings", action="store_true",
                            help="sieve: the embedding, the positions and every 1-D tensor "
                                 "synchronized dense (param_groups' sieve_density=1.0), the "
                                 "--compressor on the other matrices only")

    def setup(self, args, rank, world):
        splits = common.kjv_split(args.corpus)
        self.alphabet = common.char_vocabulary(splits)
        self.train = common.TokenStream(common.encode_chars(splits["train"], self.alphabet),
                                        args.batch_size, args.context, rank, world)
        self.valid = common.encode_chars(splits["valid"], self.alphabet)
        return self.train.steps

    def build_model(self, args):
        return CharTransformer(len(self.alphabet), args.width, args.layers, args.heads,
                               args.context, args.dropout)

    def optimizer(self, model, args):
        groups = common.decay_groups(model, args.weight_decay)
        if args.dense_embeddings:
            # Three groups: the compressed matrices, then the embedding and the positions (weight
            # decay, dense), then the 1-D tensors (no decay, dense).
            embedded = [model.embed.weight, model.position]
            groups[0]["params"] = [p for p in groups[0]["params"]
                                   if all(p is not e for e in embedded)]
            groups.insert(1, {"params": embedded, "weight_decay": args.weight_decay,
                              "sieve_density": 1.0})
            groups[2]["sieve_density"] = 1.0
        return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.99))

    def loss(self, model, epoch, index):
        x, y = self.train.batch(index)
        logits = model(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def eval_window(self, args):
        return 16, args.context

    def evaluate(self, model, args, final):
        batch, length = self.eval_window(args)
        return {"val_loss": common.lm_evaluate(model, self.valid, batch, length,
                                               args.eval_limit)}


if __name__ == "__main__":
    sys.exit(common.main(CharTransformerWorkload(), __doc__.split("\n\n")[0]))
