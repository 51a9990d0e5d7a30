#!/usr/bin/env python3
"""sieve compare: run a grid of training jobs and compare them (run through `sieve compare`).

usage: sieve compare CONFIG [--out=DIR] [--force] [--plots_only] [--dry_run]

CONFIG (YAML):
  name: fnn3-sync-vs-async      # results go to results/<name>/ (or --out)
  servers: 2                    # servers per job (default 1)
  flags:                        # daemon flags shared by every cell (routed like `sieve launch`)
    model: fnn3
    epochs: 5
    batch_size: 32
  grid:                         # every combination is one cell; each key is a list or a value
    consistency: [bsp, asp]     # --consistency
    compressor: [none, topk, gaussiank]
    density: [0.001]            # --density (collapsed to 1 for compressor none)
    workers: [4]                # workers per job
    link: [local]               # local (loopback, `sieve launch`) or a netns-emulated link:
                                # 1gbit, 10gbit, 500mbit ... (deploy/local/netns/run; root)
  delay: 1ms                    # optional, netns cells only (needs tc netem)
  contraction_every: 10         # optional: contraction ratio and bounds every n rounds
  histogram_rounds: [0, 500]    # optional: residual histograms (rank 0) at these rounds
  timeout: 3600                 # per cell, seconds

Each cell runs in results/<name>/cells/<cell>/ (log, per-rank metrics JSON lines, cell.json when
it finished). A cell with cell.json is skipped on the next run (resumable); --force reruns all.
Outputs: summary.csv, summary.md, and plots: accuracy_vs_time.png, accuracy_vs_epoch.png,
loss.png, bytes_per_round.png, round_breakdown.png, contraction.png (cells with contraction
samples; with the (1 - k/d) and (1 - k/d)^2 bounds), histograms.png (cells with histogram_rounds:
rank 0's error-feedback residual in 0.25-sigma bins at each chosen round, log scale, against the
normal distribution fitted by mean and sigma, with the excess kurtosis estimated from the bins).
"""
import argparse
import csv
import itertools
import json
import math
import os
import re
import subprocess
import sys
import time

import yaml

GRID_KEYS = ["consistency", "compressor", "density", "workers", "link"]
GRID_DEFAULTS = {"consistency": ["bsp"], "compressor": ["topk"], "density": [0.001],
                 "workers": [2], "link": ["local"]}
CSV_FIELDS = ["cell", "consistency", "compressor", "density", "workers", "link", "status",
              "wall_s", "rounds", "epochs", "final_loss", "test_acc", "mean_round_s",
              "bytes_up_per_round", "bytes_down_per_round", "push_ratio", "t_compute_ms",
              "t_select_ms", "t_comm_ms", "mean_contraction"]


def fail(msg):
    print("sieve compare: " + msg, file=sys.stderr)
    sys.exit(2)


def as_list(v):
    return v if isinstance(v, list) else [v]


def load_config(path):
    try:
        with open(path) as f:
            cfg = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        fail(f"cannot read {path}: {e}")
    if not isinstance(cfg, dict) or "name" not in cfg:
        fail(f"{path}: expected a mapping with at least 'name'")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(cfg["name"])):
        fail("name may only hold letters, digits, '_', '.', '-'")
    grid = cfg.get("grid") or {}
    unknown = set(grid) - set(GRID_KEYS)
    if unknown:
        fail(f"unknown grid keys {sorted(unknown)}; known: {GRID_KEYS}")
    flags = cfg.get("flags") or {}
    if not isinstance(flags, dict):
        fail("'flags' must be a mapping of daemon flag -> value")
    for k in ("consistency", "compressor", "density", "metrics_out", "num_workers", "num_servers"):
        if k in flags:
            fail(f"flag '{k}' is set per cell by the grid/driver; remove it from 'flags'")
    return cfg


def fmt_density(d):
    return ("%g" % float(d))


def cells_of(cfg):
    grid = {k: as_list(cfg.get("grid", {}).get(k, GRID_DEFAULTS[k])) for k in GRID_KEYS}
    seen, cells = set(), []
    for values in itertools.product(*(grid[k] for k in GRID_KEYS)):
        c = dict(zip(GRID_KEYS, values))
        c["workers"] = int(c["workers"])
        c["density"] = 1.0 if c["compressor"] == "none" else float(c["density"])
        c["link"] = str(c["link"])
        cid = "%s-%s-d%s-w%d-%s" % (c["consistency"], c["compressor"], fmt_density(c["density"]),
                                   c["workers"], c["link"])
        if cid in seen:
            continue
        seen.add(cid)
        c["id"] = cid
        cells.append(c)
    return cells


def flag_words(flags):
    words = []
    for k, v in flags.items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, list):
            v = ",".join(str(x) for x in v)
        words.append(f"--{k}={v}")
    return words


def run_cell(cfg, cell, cell_dir, build, repo):
    os.makedirs(cell_dir, exist_ok=True)
    servers = int(cfg.get("servers", 1))
    flags = dict(cfg.get("flags") or {})
    flags["consistency"] = cell["consistency"]
    flags["compressor"] = cell["compressor"]
    flags["density"] = cell["density"]
    flags.setdefault("progress", "log")
    if cfg.get("contraction_every"):
        flags["contraction_every"] = int(cfg["contraction_every"])
    if cfg.get("histogram_rounds"):
        flags["histogram_rounds"] = ",".join(str(int(r)) for r in as_list(cfg["histogram_rounds"]))
    flags["metrics_out"] = os.path.join(os.path.abspath(cell_dir), "metrics-{rank}.jsonl")
    timeout = float(cfg.get("timeout", 3600))
    if cell["link"] in ("local", "loopback", "none"):
        cmd = [os.path.join(build, "deploy", "sieve"), "launch", f"--num_servers={servers}",
               f"--num_workers={cell['workers']}", "--"] + flag_words(flags)
    else:
        cmd = [os.path.join(repo, "deploy", "local", "netns", "run"), f"--build={build}",
               f"--num_servers={servers}", f"--num_workers={cell['workers']}",
               f"--link={cell['link']}", f"--timeout={int(timeout)}",
               f"--log_dir={os.path.join(cell_dir, 'nodes')}", "--quiet"]
        if cfg.get("delay"):
            cmd.append(f"--delay={cfg['delay']}")
        cmd += ["--"] + flag_words(flags)
    for old in os.listdir(cell_dir):
        if old.startswith("metrics-"):
            os.remove(os.path.join(cell_dir, old))
    print(f"sieve compare: running {cell['id']}", flush=True)
    t0 = time.monotonic()
    with open(os.path.join(cell_dir, "log.txt"), "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                                timeout=timeout + 30).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    wall = time.monotonic() - t0
    return rc, wall


def read_metrics(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    rows.append(json.loads(line))
    return rows


def worker_summary(cell_dir):
    """key=value pairs of the rank-0 `sieve-worker summary:` line, from the cell's logs."""
    texts = []
    for root, _, files in os.walk(cell_dir):
        for f in files:
            if f.endswith(".txt") or f.endswith(".log"):
                with open(os.path.join(root, f), errors="replace") as fh:
                    texts.append(fh.read())
    for text in texts:
        for line in text.splitlines():
            m = re.search(r"sieve-worker summary: (rank=0 .*)", line)
            if m:
                return dict(kv.split("=", 1) for kv in m.group(1).split() if "=" in kv)
    return {}


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def summarize(cell, cell_dir, rc, wall):
    rows = read_metrics(os.path.join(cell_dir, "metrics-0.jsonl"))
    s = worker_summary(cell_dir)
    accs = [r["test_acc"] for r in rows if r.get("test_acc") is not None]
    out = {k: cell[k] for k in GRID_KEYS}
    out.update({
        "cell": cell["id"], "status": "ok" if rc == 0 else f"failed({rc})", "wall_s": wall,
        "rounds": len(rows), "epochs": (rows[-1]["epoch"] + 1) if rows else None,
        "final_loss": rows[-1]["loss"] if rows else None,
        "test_acc": float(s["test_acc"]) if "test_acc" in s else (accs[-1] if accs else None),
        "mean_round_s": float(s["mean_round_s"]) if "mean_round_s" in s else None,
        "bytes_up_per_round": mean([r.get("bytes_up") for r in rows]),
        "bytes_down_per_round": mean([r.get("bytes_down") for r in rows]),
        "push_ratio": float(s["ratio"]) if "ratio" in s else None,
        "t_compute_ms": _ms(mean([r.get("t_compute") for r in rows])),
        "t_select_ms": _ms(mean([r.get("t_select") for r in rows])),
        "t_comm_ms": _ms(mean([r.get("t_comm") for r in rows])),
        "mean_contraction": mean([r.get("contraction") for r in rows]),
    })
    return out


def _ms(x):
    return None if x is None else 1e3 * x


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%.4g" % v
    return str(v)


def write_tables(out_dir, summaries, cfg):
    with open(os.path.join(out_dir, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for s in summaries:
            w.writerow({k: ("" if s.get(k) is None else s.get(k)) for k in CSV_FIELDS})
    cols = ["cell", "status", "rounds", "test_acc", "final_loss", "mean_round_s",
            "bytes_up_per_round", "bytes_down_per_round", "t_compute_ms", "t_select_ms",
            "t_comm_ms", "wall_s"]
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(f"# sieve compare: {cfg['name']}\n\n")
        f.write(f"servers: {cfg.get('servers', 1)}; flags: `{' '.join(flag_words(cfg.get('flags') or {}))}`\n\n")
        f.write("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n")
        for s in summaries:
            f.write("| " + " | ".join(fmt(s.get(c)) for c in cols) + " |\n")
        f.write("\nPlots: accuracy_vs_time.png, accuracy_vs_epoch.png, loss.png, "
                "bytes_per_round.png, round_breakdown.png, contraction.png, histograms.png.\n")


def plot(out_dir, cells, summaries):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = {c["id"]: read_metrics(os.path.join(out_dir, "cells", c["id"], "metrics-0.jsonl"))
            for c in cells}

    def new(title, xlabel, ylabel):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        return fig, ax

    def save(fig, ax, name):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, name), dpi=100)
        plt.close(fig)

    # Accuracy vs (cumulative round) time and vs epoch.
    fig_t, ax_t = new("test accuracy vs time", "training time (s, sum of round times)", "test accuracy")
    fig_e, ax_e = new("test accuracy vs epoch", "epoch", "test accuracy")
    fig_l, ax_l = new("training loss", "round", "loss (rank 0)")
    fig_b, ax_b = new("bytes per round (rank 0)", "round", "bytes (up + down)")
    for cid, rows in data.items():
        if not rows:
            continue
        t, acc_t, acc_e, ep = 0.0, [], [], []
        for r in rows:
            t += (r.get("t_compute") or 0) + (r.get("t_select") or 0) + (r.get("t_comm") or 0)
            if r.get("test_acc") is not None:
                acc_t.append((t, r["test_acc"]))
                acc_e.append((r["epoch"] + 1, r["test_acc"]))
        if acc_t:
            ax_t.plot(*zip(*acc_t), marker=".", label=cid)
            ax_e.plot(*zip(*acc_e), marker=".", label=cid)
        ax_l.plot([r["round"] for r in rows], [r["loss"] for r in rows], label=cid, lw=0.8)
        ax_b.plot([r["round"] for r in rows],
                  [(r.get("bytes_up") or 0) + (r.get("bytes_down") or 0) for r in rows],
                  label=cid, lw=0.8)
    ax_b.set_yscale("log")
    if not ax_t.lines:
        ax_t.text(0.5, 0.5, "no test accuracy recorded (e.g. synthetic model)", ha="center",
                  transform=ax_t.transAxes)
        ax_e.text(0.5, 0.5, "no test accuracy recorded (e.g. synthetic model)", ha="center",
                  transform=ax_e.transAxes)
    save(fig_t, ax_t, "accuracy_vs_time.png")
    save(fig_e, ax_e, "accuracy_vs_epoch.png")
    save(fig_l, ax_l, "loss.png")
    save(fig_b, ax_b, "bytes_per_round.png")

    # Round-time breakdown: stacked mean compute / select / comm per cell.
    fig, ax = new("round time breakdown (rank 0, mean)", "", "ms per round")
    names = [s["cell"] for s in summaries]
    bottom = [0.0] * len(names)
    for key, label in (("t_compute_ms", "compute"), ("t_select_ms", "select"), ("t_comm_ms", "comm")):
        vals = [s.get(key) or 0.0 for s in summaries]
        ax.bar(range(len(names)), vals, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=7)
    save(fig, ax, "round_breakdown.png")

    # Contraction ratio |r - sel(r)|^2 / |r|^2 against the (1 - k/d) and (1 - k/d)^2 bounds.
    fig, ax = new("contraction ratio vs round", "round", "contraction")
    drawn = False
    for cid, rows in data.items():
        pts = [r for r in rows if r.get("contraction") is not None]
        if not pts:
            continue
        drawn = True
        line, = ax.plot([r["round"] for r in pts], [r["contraction"] for r in pts], marker=".",
                        label=cid)
        if pts[0].get("bound_1") is not None:
            ax.plot([r["round"] for r in pts], [r["bound_1"] for r in pts], ls="--",
                    color=line.get_color(), lw=0.8, label=f"{cid} 1-k/d")
        if pts[0].get("bound_2") is not None:
            ax.plot([r["round"] for r in pts], [r["bound_2"] for r in pts], ls=":",
                    color=line.get_color(), lw=0.8, label=f"{cid} (1-k/d)^2")
    if not drawn:
        ax.text(0.5, 0.5, "no contraction samples (set contraction_every)", ha="center",
                transform=ax.transAxes)
    save(fig, ax, "contraction.png")
    plot_histograms(plt, out_dir, data)


def normal_cdf(z):
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def histogram_panels(data):
    """[(cell, round, width, counts)] of every metrics row that carries a histogram."""
    panels = []
    for cid, rows in data.items():
        for r in rows:
            if r.get("hist"):
                panels.append((cid, r["round"], float(r["hist_width"]), r["hist"]))
    return panels


def binned_excess_kurtosis(width, counts):
    """Excess kurtosis of the binned residual (bin centres in sigma units; the end bins hold the
    tails, so this underestimates heavy tails)."""
    n = sum(counts)
    if n == 0:
        return float("nan")
    bins = len(counts)
    zs = [(i + 0.5 - bins / 2) * width for i in range(bins)]
    m = sum(c * z for c, z in zip(counts, zs)) / n
    m2 = sum(c * (z - m) ** 2 for c, z in zip(counts, zs)) / n
    m4 = sum(c * (z - m) ** 4 for c, z in zip(counts, zs)) / n
    return m4 / (m2 * m2) - 3.0 if m2 > 0 else float("nan")


def plot_histograms(plt, out_dir, data):
    """histograms.png: one panel per (cell, round), counts per 0.25-sigma bin (log scale) against
    the fitted normal's expected counts n * (Phi(z_hi) - Phi(z_lo))."""
    panels = histogram_panels(data)
    if not panels:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ax.text(0.5, 0.5, "no residual histograms (set histogram_rounds)", ha="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        fig.savefig(os.path.join(out_dir, "histograms.png"), dpi=100)
        plt.close(fig)
        return
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_axis_off()
    for ax, (cid, rnd, width, counts) in zip(axes.flat, panels):
        bins = len(counts)
        n = sum(counts)
        edges = [(i - bins / 2) * width for i in range(bins + 1)]
        centres = [(a + b) / 2 for a, b in zip(edges, edges[1:])]
        ax.bar(centres, counts, width=width, color="tab:blue", alpha=0.6, label="residual")
        expected = [n * (normal_cdf(b) - normal_cdf(a)) for a, b in zip(edges, edges[1:])]
        expected[0] += n * normal_cdf(edges[0])  # the end bins hold everything beyond
        expected[-1] += n * (1 - normal_cdf(edges[-1]))
        ax.plot(centres, expected, color="tab:red", lw=1.2, label="fitted normal")
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.5)
        ax.set_title(f"{cid}\nround {rnd}, excess kurtosis {binned_excess_kurtosis(width, counts):+.2f}",
                     fontsize=8)
        ax.set_xlabel("(r - mean) / sigma", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "histograms.png"), dpi=100)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(prog="sieve compare", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config")
    p.add_argument("--out", help="output directory (default results/<name>)")
    p.add_argument("--build", default=os.environ.get("SIEVE_BUILD_DIR", "build"),
                   help="build tree with deploy/sieve and the daemons")
    p.add_argument("--force", action="store_true", help="rerun finished cells")
    p.add_argument("--plots_only", action="store_true", help="only rebuild tables and plots")
    p.add_argument("--dry_run", action="store_true", help="list the cells and exit")
    a = p.parse_args()
    cfg = load_config(a.config)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out_dir = a.out or os.path.join("results", str(cfg["name"]))
    cells = cells_of(cfg)
    if a.dry_run:
        for c in cells:
            print(c["id"])
        return 0
    os.makedirs(os.path.join(out_dir, "cells"), exist_ok=True)
    build = os.path.abspath(a.build)
    summaries, failed = [], 0
    for c in cells:
        cell_dir = os.path.join(out_dir, "cells", c["id"])
        done = os.path.join(cell_dir, "cell.json")
        if os.path.exists(done) and not a.force:
            print(f"sieve compare: {c['id']} finished before, skipped", flush=True)
            with open(done) as f:
                summaries.append(json.load(f))
            continue
        if a.plots_only:
            continue
        rc, wall = run_cell(cfg, c, cell_dir, build, repo)
        s = summarize(c, cell_dir, rc, wall)
        summaries.append(s)
        if rc == 0:
            with open(done, "w") as f:
                json.dump(s, f, indent=1)
        else:
            failed += 1
            print(f"sieve compare: {c['id']} failed (exit {rc}); see {cell_dir}/log.txt",
                  file=sys.stderr, flush=True)
    write_tables(out_dir, summaries, cfg)
    plot(out_dir, cells, summaries)
    print(f"sieve compare: {len(summaries)} cells; wrote {out_dir}/summary.csv, summary.md, *.png")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
