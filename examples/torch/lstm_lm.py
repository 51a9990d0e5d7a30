"""A word-level language model on the King James Bible: a 2-layer LSTM with embedding size =
hidden size (--width, 200 by default: 4.65 M parameters; --width=650 --dropout=0.5 is the
"medium" model of Zaremba et al.), dropout, a vocabulary of the 10,000 most frequent training
tokens (the rest <unk>), truncated back-propagation through 35 tokens. Trained as in the paper on
gradient sparsification: SGD with momentum 0.9, the gradient clipped at norm 0.25, global Top-k
0.1 % after a density warm-up of 1.5625 % and 0.4 % in the first two epochs; no weight decay.
The metric is the validation perplexity (and, at the end, the test perplexity).

The corpus is Debian's bible-kjv-text, read with its reader from bible-kjv (apt-get install
bible-kjv-text bible-kjv), split by books: validation Judges, Proverbs, Daniel, Mark, Romans;
test 2 Samuel, Job, Hosea, John, Hebrews; training the other 56 books (workload_common.kjv_split;
a test pins each split's digest). Tokens: lower-cased words, each punctuation mark a token, an
<eos> after every verse.

The same script is a worker of a sieve job or a rank of a torch DDP job (workload_common.py has
the contract). From the source tree, after building:

    build/deploy/sieve launch --num_servers=2 --num_workers=4 \\
        --worker_cmd="/usr/bin/python3 examples/torch/lstm_lm.py --epochs=6"
    /usr/bin/python3 examples/torch/lstm_lm.py --backend=ddp --ddp_ranks=4 --epochs=6

Rank 0 evaluates after every epoch; the launcher's `job finished:` line shows the last
perplexity= and val_loss= (with test_perplexity= at the end), and both backends end with a
`workload finished:` line. The gradient clip: with DDP the averaged gradient's, with sieve each
worker's own at 0.25 / sqrt(workers) (workload_common.py).
"""

import math
import sys

import torch
import torch.nn.functional as F

import workload_common as common


class LstmLm(torch.nn.Module):
    def __init__(self, vocabulary, width, layers=2, dropout=0.2):
        super().__init__()
        self.drop = torch.nn.Dropout(dropout)
        self.embed = torch.nn.Embedding(vocabulary, width)
        self.lstm = torch.nn.LSTM(width, width, layers, dropout=dropout, batch_first=True)
        self.out = torch.nn.Linear(width, vocabulary)
        torch.nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        torch.nn.init.uniform_(self.out.weight, -0.1, 0.1)
        torch.nn.init.zeros_(self.out.bias)

    def forward(self, x, state=None):
        """x [batch, length] token ids -> (logits [batch, length, vocabulary], state)."""
        h, state = self.lstm(self.drop(self.embed(x)), state)
        return self.out(self.drop(h)), state


class LstmLmWorkload(common.KjvWorkload):
    name = "lstm_lm"
    defaults = {"epochs": 6, "batch_size": 20, "lr": 2.0, "weight_decay": 0.0}

    def add_flags(self, parser):
        super().add_flags(parser)
        parser.add_argument("--width", type=int, default=200, help="embedding = hidden size")
        parser.add_argument("--vocab", type=int, default=10000, help="vocabulary size")
        parser.add_argument("--bptt", type=int, default=35, help="tokens per step")
        parser.add_argument("--dropout", type=float, default=0.2, help="dropout probability")
        parser.add_argument("--clip", type=float, default=0.25, help="gradient norm (0: none)")

    def setup(self, args, rank, world):
        splits = common.kjv_split(args.corpus)
        self.vocabulary = common.word_vocabulary(splits["train"], args.vocab)
        self.train = common.TokenStream(common.encode_words(splits["train"], self.vocabulary),
                                        args.batch_size, args.bptt, rank, world)
        self.valid = common.encode_words(splits["valid"], self.vocabulary)
        self.test = common.encode_words(splits["test"], self.vocabulary)
        self.state = None
        return self.train.steps

    def build_model(self, args):
        return LstmLm(len(self.vocabulary), args.width, dropout=args.dropout)

    def clip_norm(self, args):
        return args.clip if args.clip > 0 else None

    def loss(self, model, epoch, index):
        if index == 0:
            self.state = None  # each epoch reads the stream from its start
        elif self.state is not None:  # truncated back-propagation
            self.state = tuple(s.detach() for s in self.state)
        x, y = self.train.batch(index)
        logits, self.state = model(x, self.state)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def eval_window(self, args):
        return 10, args.bptt

    def evaluate(self, model, args, final):
        batch, length = self.eval_window(args)
        val = common.lm_evaluate(model, self.valid, batch, length, args.eval_limit, state=True)
        metrics = {"perplexity": math.exp(val), "val_loss": val}
        if final:
            test = common.lm_evaluate(model, self.test, batch, length, args.eval_limit,
                                      state=True)
            metrics["test_perplexity"] = math.exp(test)
        return metrics


if __name__ == "__main__":
    sys.exit(common.main(LstmLmWorkload(), __doc__.split("\n\n")[0]))
