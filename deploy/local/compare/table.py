"""sieve compare's tables: per-cell aggregation of the runs (mean ± sample std, time to target,
deltas against the BSP dense cell of the same scenario) and the files summary.csv, runs.csv and
summary.md."""

import csv
import math
import os

from .config import DEFAULT_TARGET, GRID_KEYS, flag_words

RUN_FIELDS = ["run", "cell", "seed", "consistency", "compressor", "density", "workers", "link",
              "straggler", "status", "wall_s", "train_s", "rounds", "epochs", "final_loss", "test_acc",
              "time_to_target_s", "mean_round_s", "bytes_up_per_round", "bytes_down_per_round",
              "push_ratio", "max_staleness", "mean_staleness", "t_compute_ms", "t_select_ms",
              "t_comm_ms", "mean_contraction", "near_chance"]
# Per-cell means over the runs that finished (sample std next to the first three).
MEAN_FIELDS = ["test_acc", "train_s", "time_to_target_s", "wall_s", "final_loss", "rounds",
               "epochs", "mean_round_s", "bytes_up_per_round", "bytes_down_per_round",
               "push_ratio", "mean_staleness", "t_compute_ms", "t_select_ms", "t_comm_ms",
               "mean_contraction"]
STD_FIELDS = ["test_acc", "train_s", "time_to_target_s"]
CELL_FIELDS = (["cell", "consistency", "compressor", "density", "workers", "link", "straggler",
                "runs", "runs_ok", "status", "target_accuracy", "target_reached"] + MEAN_FIELDS +
               [f + "_std" for f in STD_FIELDS] +
               ["max_staleness", "acc_delta_vs_base", "time_ratio_vs_base", "base_cell"])


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def std(xs):
    """Sample standard deviation (n - 1), None for fewer than two values."""
    xs = [x for x in xs if x is not None]
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


# ---------------------------------------------------------------------------------------------
# Per-cell aggregation and tables.

def is_baseline(cell):
    return cell["consistency"] == "bsp" and cell["compressor"] == "none"


def group_of(cell):
    """A cell's scenario: what its BSP dense baseline shares with it."""
    return (cell["workers"], cell["link"], cell.get("straggler", "none"))


def aggregate(cells, run_summaries, target):
    """One row per cell: means and sample stds over its finished runs, and the accuracy delta
    and time ratio against the BSP dense cell with the same workers, link and straggler."""
    rows = []
    for c in cells:
        runs = [s for s in run_summaries if s["cell"] == c["id"]]
        ok = [s for s in runs if s["status"] == "ok"]
        row = {k: c[k] for k in GRID_KEYS}
        row.update({"cell": c["id"], "runs": len(runs), "runs_ok": len(ok),
                    "target_accuracy": target,
                    "target_reached": sum(1 for s in ok if s.get("time_to_target_s") is not None)})
        if not runs:
            row["status"] = "not run"
        elif len(ok) == len(runs):
            row["status"] = "ok"
        else:
            row["status"] = f"failed({len(runs) - len(ok)} of {len(runs)})"
        for f in MEAN_FIELDS:
            row[f] = mean([s.get(f) for s in ok])
        for f in STD_FIELDS:
            row[f + "_std"] = std([s.get(f) for s in ok])
        mx = [s.get("max_staleness") for s in ok if s.get("max_staleness") is not None]
        row["max_staleness"] = max(mx) if mx else None
        near = sum(1 for s in ok if s.get("near_chance"))
        if near:  # the worker's summary says the model did not learn (near_chance=1)
            row["status"] += f", near chance ({near} of {len(ok)})"
        rows.append(row)
    for row, c in zip(rows, cells):
        base = next((r for r, b in zip(rows, cells)
                     if is_baseline(b) and group_of(b) == group_of(c) and r["runs_ok"]), None)
        row["base_cell"] = base["cell"] if base else None
        row["acc_delta_vs_base"] = (row["test_acc"] - base["test_acc"]
                                    if base and None not in (row["test_acc"], base["test_acc"])
                                    else None)
        row["time_ratio_vs_base"] = (row["train_s"] / base["train_s"]
                                     if base and row["train_s"] is not None and base["train_s"]
                                     else None)
    return rows


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%.4g" % v
    return str(v)


def pm(m, s, digits):
    """'m ± s' with the given decimals ('m' alone without a std, '-' without a mean)."""
    if m is None:
        return "-"
    return f"{m:.{digits}f}" if s is None else f"{m:.{digits}f} ± {s:.{digits}f}"


def md_row(r):
    """The Markdown table's cells for one aggregated row (see md_header)."""
    ttt = pm(r["time_to_target_s"], r["time_to_target_s_std"], 1)
    if r["test_acc"] is not None and r["target_reached"] < r["runs_ok"]:
        ttt = ("not reached" if r["target_reached"] == 0
               else f"{ttt} ({r['target_reached']} of {r['runs_ok']})")
    delta = r["acc_delta_vs_base"]
    ratio = r["time_ratio_vs_base"]
    stale = ("-" if r["max_staleness"] is None or r["consistency"] == "bsp"
             else f"{r['max_staleness']} / {fmt(r['mean_staleness'])}")
    return [r["cell"], r["status"], f"{r['runs_ok']}/{r['runs']}",
            pm(r["test_acc"], r["test_acc_std"], 4),
            "-" if delta is None else f"{100 * delta:+.2f} pp",
            ttt, pm(r["train_s"], r["train_s_std"], 1),
            "-" if ratio is None else f"{ratio:.2f}×",
            "-" if r["push_ratio"] is None else f"{r['push_ratio']:.4g}",
            stale, fmt(r["final_loss"]),
            "-" if r["mean_round_s"] is None else "%.3g" % (1e3 * r["mean_round_s"])]


def md_header(target):
    return ["cell", "status", "runs", "test acc", "Δ acc vs BSP dense",
            f"time to {target:g} (s)", "train time (s)", "time ÷ BSP dense", "pushed ÷ dense",
            "staleness max / mean", "final loss", "round (ms)"]


def write_csv(path, fields, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for s in rows:
            w.writerow({k: ("" if s.get(k) is None else s.get(k)) for k in fields})


def write_tables(out_dir, cell_rows, run_summaries, cfg, figures):
    write_csv(os.path.join(out_dir, "summary.csv"), CELL_FIELDS, cell_rows)
    write_csv(os.path.join(out_dir, "runs.csv"), RUN_FIELDS, run_summaries)
    target = float(cfg.get("target_accuracy", DEFAULT_TARGET))
    head = md_header(target)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(f"# sieve compare: {cfg['name']}\n\n")
        f.write(f"servers: {cfg.get('servers', 1)}; repeats: {cfg.get('repeats', 1)}; "
                f"flags: `{' '.join(flag_words(cfg.get('flags') or {}))}`\n\n")
        f.write("| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n")
        for r in cell_rows:
            f.write("| " + " | ".join(md_row(r)) + " |\n")
        f.write(TABLE_NOTES)
        if figures:
            f.write("\nPlots: " + ", ".join(figures) + ".\n")


TABLE_NOTES = """
Mean ± sample standard deviation over the runs (seeds) that finished. Test accuracy is rank 0's
after the last epoch; Δ and ÷ compare with the BSP dense (`bsp-none`) cell of the same workers,
link and straggler. Time to target: wall-clock seconds from the start of training to the first evaluation
at or above the target. Train time: rank 0's training wall-clock. Pushed ÷ dense: bytes rank 0
pushed over what dense fp32 pushes would have sent. Staleness (ASP/SSP): the clock lead, in
rounds, of a worker over the slowest when the server released its reply (max, mean).
"""
