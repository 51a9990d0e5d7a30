#!/usr/bin/python3
"""Plots of a scale harness run (bench/scale/run.py's JSON): start-up and round time against the
node count N = W + S + 1, with an N log N line through the smallest cell, and the per-node RSS and
sockets. Debian's python3-matplotlib (scripts/setup installs it).

usage: plot.py RESULTS_JSON OUT_DIR   (writes OUT_DIR/scale-startup-d<D>.png and
                                       OUT_DIR/scale-nodes-d<D>.png per D, e.g. d1e6)
"""
import json
import math
import os
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cells = [c for c in json.load(open(sys.argv[1]))["cells"] if c["pass"]]
    if not cells:
        sys.exit("plot.py: no passing cell in " + sys.argv[1])
    os.makedirs(sys.argv[2], exist_ok=True)
    for d in sorted({c["num_params"] for c in cells}):
        cs = sorted((c for c in cells if c["num_params"] == d),
                    key=lambda c: c["workers"] + c["servers"])
        ns = [c["workers"] + c["servers"] + 1 for c in cs]
        tag = f"{d:.0e}".replace("e+0", "e").replace("e+", "e")
        fig, ax = plt.subplots(figsize=(6, 4))
        for key, label in (("formed_s", "formed (every node registered)"),
                           ("start_barrier_s", "start barrier passed"),
                           ("round_s", "round time")):
            ax.plot(ns, [c[key] for c in cs], "o-", label=label)
        n0, t0 = ns[0], cs[0]["start_barrier_s"]
        ax.plot(ns, [t0 * n * math.log(n) / (n0 * math.log(n0)) for n in ns], "k:",
                label="N log N through the first barrier")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("nodes N = W + S + 1")
        ax.set_ylabel("seconds")
        ax.set_title(f"sieve start-up and rounds, D = {d:g}, loopback, 2 cores")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(sys.argv[2], f"scale-startup-d{tag}.png"), dpi=110)
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(ns, [c["worker_rss_mb_max"] for c in cs], "o-", label="worker RSS MB")
        ax.plot(ns, [c["server_rss_mb_max"] for c in cs], "o-", label="server RSS MB")
        ax.plot(ns, [c["scheduler_rss_mb"] for c in cs], "o-", label="scheduler RSS MB")
        ax.plot(ns, [c["worker_sockets_max"] for c in cs], "s--", label="sockets per node")
        ax.set_xlabel("nodes N = W + S + 1")
        ax.set_title(f"per-node memory and sockets, D = {d:g}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(sys.argv[2], f"scale-nodes-d{tag}.png"), dpi=110)
        plt.close("all")
    print("plots in", sys.argv[2])


if __name__ == "__main__":
    main()
