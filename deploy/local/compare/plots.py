"""sieve compare's plots (matplotlib, Agg): accuracy against time and epoch, loss, bytes per
round, the round breakdown, contraction, residual histograms, the per-scenario panels and the
time-to-target bars; compact copies for docs/ (--figures_out)."""

import math
import os

from .runner import read_metrics, wall_times
from .table import group_of


def smooth(ys, window):
    """Trailing moving average over `window` points (the first points average what exists)."""
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y
        if i >= window:
            acc -= ys[i - window]
        out.append(acc / min(i + 1, window))
    return out


def accuracy_points(rows):
    """[(wall-clock s, epoch counted from 1, test accuracy)] of a run's evaluations."""
    return [(t, r["epoch"] + 1, r["test_acc"]) for r, t in zip(rows, wall_times(rows))
            if r.get("test_acc") is not None]


def mean_curve(curves):
    """Pointwise mean of equally indexed points over the curves (as long as the shortest)."""
    n = min((len(c) for c in curves), default=0)
    return [tuple(sum(c[i][j] for c in curves) / len(curves) for j in range(len(curves[0][0])))
            for i in range(n)]


def compact_png(path):
    """Rewrites a PNG with an adaptive 256-colour palette (a third of the bytes for plots), when
    Pillow (python3-pil, a dependency of python3-matplotlib) is there."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256)
    small.save(path, optimize=True)


def plot(out_dir, cells, runs, cell_rows, dpi=100):
    """Writes the plots that have data into out_dir (removing stale ones that have none there)
    and returns their file names."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    data = [(r, read_metrics(os.path.join(r["dir"], "metrics-0.jsonl"))) for r in runs]
    seeds = {}  # cell id -> the metrics rows of each of its runs
    for run, rows in data:
        seeds.setdefault(run["cell"]["id"], []).append(rows)
    style = cell_styles(cells)
    written = []

    def new(title, xlabel, ylabel):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        return fig, ax

    def save(fig, ax, name, legend_inside=False):
        path = os.path.join(out_dir, name)
        if not ax.has_data():
            plt.close(fig)
            if os.path.exists(path):
                os.remove(path)
            return
        handles, labels = ax.get_legend_handles_labels()
        if handles and legend_inside:
            ax.legend(handles, labels, fontsize=7)
        elif handles:
            # Below the axes, in columns: readable for many cells, never over the data.
            ax.legend(handles, labels, fontsize=7, loc="upper center",
                      bbox_to_anchor=(0.5, -0.16), ncol=min(3, len(handles)), frameon=False)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
        plt.close(fig)
        written.append(name)

    labelled = set()

    def label(cid):
        if cid in labelled:
            return None
        labelled.add(cid)
        return cid

    fig_t, ax_t = new("test accuracy vs wall-clock time", "seconds since training started",
                      "test accuracy")
    fig_e, ax_e = new("test accuracy vs epoch", "epoch", "test accuracy")
    fig_l, ax_l = new("training loss (rank 0, moving average)", "round", "loss")
    fig_b, ax_b = new("bytes per round (rank 0)", "round", "bytes (up + down)")
    first_epoch = None
    for kind in ("acc", "loss", "bytes"):
        labelled.clear()
        for run, rows in data:
            cid = run["cell"]["id"]
            if not rows:
                continue
            st = style[cid]
            if kind == "acc":
                pts = accuracy_points(rows)
                if not pts:
                    continue
                # One seed alone: a plain line; several: each faint, their mean drawn below.
                faint = {"alpha": 0.3, "lw": 0.8} if len(seeds[cid]) > 1 else {
                    "marker": ".", "label": label(cid)}
                ax_t.plot([p[0] for p in pts], [p[2] for p in pts], **faint, **st)
                ax_e.plot([p[1] for p in pts], [p[2] for p in pts], **faint, **st)
                first_epoch = min(first_epoch or pts[0][1], pts[0][1])
            elif kind == "loss":
                rounds = [r["round"] for r in rows]
                losses = [r["loss"] for r in rows]
                window = max(1, min(200, len(rows) // 40))
                ax_l.plot(rounds, losses, lw=0.4, alpha=0.15, color=st["color"])
                ax_l.plot(rounds, smooth(losses, window), lw=1.2, label=label(cid), **st)
            else:
                ax_b.plot([r["round"] for r in rows],
                          [(r.get("bytes_up") or 0) + (r.get("bytes_down") or 0) for r in rows],
                          lw=0.8, label=label(cid), **st)
    for cid, series in seeds.items():
        if len(series) < 2:
            continue
        mean_pts = mean_curve([accuracy_points(rows) for rows in series])
        if mean_pts:
            lab = f"{cid} (mean of {len(series)})"
            ax_t.plot([p[0] for p in mean_pts], [p[2] for p in mean_pts], marker=".", lw=1.6,
                      label=lab, **style[cid])
            ax_e.plot([p[1] for p in mean_pts], [p[2] for p in mean_pts], marker=".", lw=1.6,
                      label=lab, **style[cid])
    ax_e.xaxis.set_major_locator(MaxNLocator(integer=True))
    if first_epoch is not None:
        ax_e.set_xlim(left=first_epoch - 0.1)
    if ax_b.has_data():
        ax_b.set_yscale("log")
    save(fig_t, ax_t, "accuracy_vs_time.png")
    save(fig_e, ax_e, "accuracy_vs_epoch.png")
    if plot_scenarios(plt, out_dir, cells, seeds, style, cell_rows, dpi):
        written += ["accuracy_vs_time_by_scenario.png", "time_to_target.png"]
    save(fig_l, ax_l, "loss.png")
    save(fig_b, ax_b, "bytes_per_round.png")

    # Round-time breakdown: stacked mean compute / select / comm per cell.
    fig, ax = new("round time breakdown (rank 0, mean)", "", "ms per round")
    shown = [r for r in cell_rows if r.get("t_compute_ms") is not None]
    bottom = [0.0] * len(shown)
    for key, name in (("t_compute_ms", "compute"), ("t_select_ms", "select"),
                      ("t_comm_ms", "comm")):
        vals = [r.get(key) or 0.0 for r in shown]
        if shown:
            ax.bar(range(len(shown)), vals, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(shown)))
    ax.set_xticklabels([r["cell"] for r in shown], rotation=30, ha="right", fontsize=7)
    save(fig, ax, "round_breakdown.png", legend_inside=True)

    # Contraction ratio |r - sel(r)|^2 / |r|^2 of the sparse cells, against (1 - k/d) and
    # (1 - k/d)^2 (dense cells select everything: nothing to draw).
    fig, ax = new("contraction ratio vs round (sparse cells)", "round", "contraction")
    labelled.clear()
    bounds = {}  # the bound curves (one pair per density schedule), drawn once each
    for run, rows in data:
        cid = run["cell"]["id"]
        pts = [r for r in rows if r.get("contraction") is not None]
        if run["cell"]["compressor"] == "none" or not pts:
            continue
        ax.plot([r["round"] for r in pts], [r["contraction"] for r in pts], marker=".",
                markersize=3, label=label(cid), **style[cid])
        if pts[0].get("bound_1") is not None:
            curve = tuple((r["round"], r["bound_1"]) for r in pts)
            bounds.setdefault(curve, run["cell"]["density"])
    for curve, density in bounds.items():
        suffix = f" (density {density:g})" if len(set(bounds.values())) > 1 else ""
        xs = [x for x, _ in curve]
        ax.plot(xs, [b for _, b in curve], ls="--", color="black", lw=0.8,
                label="1 - k/d" + suffix)
        ax.plot(xs, [b * b for _, b in curve], ls=":", color="black", lw=0.8,
                label="(1 - k/d)²" + suffix)
    save(fig, ax, "contraction.png")
    # Histograms of each cell's first run only (the other seeds look alike).
    firsts = {}
    for run, rows in data:
        firsts.setdefault(run["cell"]["id"], (run["id"], rows))
    if plot_histograms(plt, out_dir, dict(firsts.values()), dpi):
        written.append("histograms.png")
    return written


def scenario_label(key):
    workers, link, straggler = key
    return (f"{workers} workers, link {link}" +
            ("" if straggler == "none" else f", straggler {straggler}"))


def plot_scenarios(plt, out_dir, cells, seeds, style, cell_rows, dpi):
    """With more than one scenario (workers, link, straggler) holding accuracy data:
    accuracy_vs_time_by_scenario.png (one panel per scenario, each cell the mean of its seeds) and
    time_to_target.png (mean ± std per cell, grouped by scenario; cells that never reached the
    target are marked). False (and neither file) otherwise."""
    names = ["accuracy_vs_time_by_scenario.png", "time_to_target.png"]
    scenarios = []
    for c in cells:
        series = [accuracy_points(rows) for rows in seeds.get(c["id"], [])]
        if any(series) and group_of(c) not in scenarios:
            scenarios.append(group_of(c))
    if len(scenarios) < 2:
        for n in names:
            if os.path.exists(os.path.join(out_dir, n)):
                os.remove(os.path.join(out_dir, n))
        return False
    # Within a scenario the cells differ in consistency and compressor: one colour for each pair.
    import matplotlib
    pairs = list(dict.fromkeys((c["consistency"], c["compressor"]) for c in cells))
    palette = matplotlib.colormaps["tab10"].colors
    style = {c["id"]: dict(style[c["id"]], color=palette[pairs.index(
        (c["consistency"], c["compressor"])) % len(palette)]) for c in cells}
    fig, axes = plt.subplots(1, len(scenarios), figsize=(4.2 * len(scenarios), 3.6),
                             sharey=True, squeeze=False)
    for ax, key in zip(axes[0], scenarios):
        for c in cells:
            if group_of(c) != key:
                continue
            pts = mean_curve([accuracy_points(rows) for rows in seeds.get(c["id"], [])])
            if pts:
                ax.plot([p[0] for p in pts], [p[2] for p in pts], marker=".", lw=1.2,
                        label=f"{c['consistency']} {c['compressor']}", **style[c["id"]])
        ax.set_title(scenario_label(key), fontsize=8)
        ax.set_xlabel("seconds since training started", fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    axes[0][0].set_ylabel("test accuracy (mean of seeds)")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, names[0]), dpi=dpi)
    plt.close(fig)

    rows = {r["cell"]: r for r in cell_rows}
    fig, ax = plt.subplots(figsize=(max(7, 0.45 * len(cells)), 4.2))
    x, ticks, labels = 0, [], []
    target = None
    for key in scenarios:
        for c in cells:
            r = rows.get(c["id"])
            if group_of(c) != key or r is None or r.get("test_acc") is None:
                continue
            target = r["target_accuracy"]
            t, s = r.get("time_to_target_s"), r.get("time_to_target_s_std")
            if t is not None and r["target_reached"] == r["runs_ok"]:
                ax.bar(x, t, yerr=s or 0, color=style[c["id"]]["color"], capsize=2)
            else:
                ax.text(x, 0, "not\nreached", ha="center", va="bottom", fontsize=6)
            ticks.append(x)
            labels.append(f"{c['consistency']} {c['compressor']}")
            x += 1
        ax.axvline(x - 0.5, color="grey", lw=0.5)
        ax.text((x - 0.5) - 0.1, 1.0, scenario_label(key), transform=ax.get_xaxis_transform(),
                ha="right", va="bottom", fontsize=6)
        x += 0.5
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel(f"seconds to test accuracy {target:g}" if target else "seconds")
    ax.grid(alpha=0.3, axis="y")
    fig.savefig(os.path.join(out_dir, names[1]), dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return True


def cell_styles(cells):
    """cell id -> matplotlib style: one colour per (compressor, density, workers, link), one
    line style per consistency, so BSP/ASP pairs of the same compressor read together (dotted:
    +inverse, --staleness_lr=inverse)."""
    import matplotlib
    colours = matplotlib.colormaps["tab10"].colors
    dashes = {"bsp": "-", "ssp": "-.", "asp": "--"}
    more = [":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3))]  # ssp:N with more than one N
    keys, ssp = [], sorted({c["consistency"] for c in cells if c["consistency"].startswith("ssp")})
    out = {}
    for c in cells:
        k = (c["compressor"], c["density"], c["workers"], c["link"], c.get("straggler", "none"))
        if k not in keys:
            keys.append(k)
        ls = dashes.get(c["consistency"])
        if c["consistency"].endswith("+inverse"):
            ls = (0, (1, 1))
        elif ls is None:
            i = ssp.index(c["consistency"]) if c["consistency"] in ssp else 0
            ls = "-." if i == 0 else more[(i - 1) % len(more)]
        out[c["id"]] = {"color": colours[keys.index(k) % len(colours)], "ls": ls}
    return out


def normal_cdf(z):
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def histogram_panels(data):
    """[(run, round, width, counts)] of every metrics row that carries a histogram."""
    panels = []
    for rid, rows in data.items():
        for r in rows:
            if r.get("hist"):
                panels.append((rid, r["round"], float(r["hist_width"]), r["hist"]))
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


def plot_histograms(plt, out_dir, data, dpi):
    """histograms.png: one panel per (run, round), counts per 0.25-sigma bin (log scale) against
    the fitted normal's expected counts n * (Phi(z_hi) - Phi(z_lo)). False (and no file) when
    no run has histograms."""
    path = os.path.join(out_dir, "histograms.png")
    panels = histogram_panels(data)
    if not panels:
        if os.path.exists(path):
            os.remove(path)
        return False
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_axis_off()
    for ax, (rid, rnd, width, counts) in zip(axes.flat, panels):
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
        ax.set_title(f"{rid}\nround {rnd}, excess kurtosis "
                     f"{binned_excess_kurtosis(width, counts):+.2f}", fontsize=8)
        ax.set_xlabel("(r - mean) / sigma", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return True
