#!/usr/bin/python3
"""BenchScaleModel: bench/scale/model.py against its checked-in measurements (no daemons, < 10 s).

Checks: `calibrate --check` (calibration.json is the fit of bench/scale/measured/); `validate`
exits 0 (every gated figure of every measured cell within +-25 %); closed forms of the model: the
union D (1 - (1 - rho)^W), the Stream VByte bytes of the wire bench's push row, a link-bound BSP
cell's round time equal to its bytes over the link plus the rest computed by hand, the server's
link bytes falling as 1/S at fixed W and D, and bad flags failing with exit 2; `validate-netns`
on the checked-in netns cells (measured/netns-scale-*.json) prints a row per passing cell and
exits 0 (round_sim within +-25 % of every configuration's median round in the model's domain),
netns_round's closed forms and round_sim's (links only, a shared uplink, a bucket's credit, CPU
only on 2 and 8 cores).

usage: model_test.py
"""
import os
import subprocess
import sys

# The scale harness under test, bench/scale/ (this file is tests/bench/scale/).
SCALE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                      "..", "bench", "scale"))
MODEL = os.path.join(SCALE, "model.py")


def run(*args):
    r = subprocess.run([sys.executable, MODEL, *args], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    return r.returncode, r.stdout


def main():
    bad = []
    for args in (("calibrate", "--check"), ("validate",)):
        rc, out = run(*args)
        if rc != 0:
            print(out)
            bad.append(f"model.py {' '.join(args)} exited {rc}")
    rc, out = run("project", "--w=8", "--s=1", "--d=1e6", "--reply=maybe")
    if rc == 0:
        bad.append("a bad --reply was accepted")
    rc, out = run("predict", "--w=8", "--s=2", "--d=1e6", "--density=0")
    if rc == 0:
        bad.append("--density=0 was accepted")

    sys.path.insert(0, SCALE)
    import model  # noqa: E402
    p = model.load_calibration(model.CALIBRATION)
    if abs(model.union_pairs(1e6, 0.001, 64) - 1e6 * (1 - 0.999 ** 64)) > 1e-6:
        bad.append("union_pairs is not D (1 - (1 - rho)^W)")
    # Push of rho = 0.001: 2 control bits + P(gap >= 256) extra bytes + 1; 4.03 B/pair with fp16.
    idx = 0.25 + 1 + 0.999 ** 255 + 0.999 ** 65535 + 0.999 ** (256 ** 3 - 1)
    if abs(model.index_bytes_per_pair(0.001) - idx) > 1e-12 or abs(idx + 2 - 4.03) > 0.01:
        bad.append(f"index bytes at rho=0.001: {model.index_bytes_per_pair(0.001)} vs {idx}")
    # A dense union (W = 1000, rho = 0.001: 63 % of the shard) is sent as a bitmap.
    dens = 1 - 0.999 ** 1000
    if abs(model.index_bytes_per_pair(dens) - 1 / (8 * dens)) > 1e-12:
        bad.append("a dense union is not coded as a bitmap")
    # BSP, W = 1000, S = 16, D = 1e8, 10 Gbit/s, fp32: link-bound; by hand, round = compute +
    # worker CPU + max(the server's push-in bytes / rate, its merge CPU) + its reply-out bytes /
    # rate + 2 latency.
    w, s, d, rho, rate = 1000, 16, 1e8, 0.001, 10e9 / 8
    r = model.cluster(p, w, s, d, rho, 10, "bsp", 4, 0.002, 50e-6, 1.58, 1.0)
    k, u, h = rho * d, model.union_pairs(d, rho, w), p["header_bytes"]
    push = h + k / s * (model.index_bytes_per_pair(rho) + 4)
    reply = h + u / s * (model.index_bytes_per_pair(u / d) + 4)
    wcpu = (p["worker_cpu_per_param_s"] * d + p["worker_cpu_per_msg_s"] * 2 * s +
            p["worker_cpu_per_reply_pair_s"] * u)
    merge = (p["server_cpu_per_msg_s"] * w + p["server_cpu_per_pair_s"] * w * k / s) / 1.58
    hand = 0.002 + wcpu + max(w * push / rate, merge) + w * reply / rate + 100e-6
    if r["bottleneck"] != "links" or abs(r["round_s"] / hand - 1) > 1e-9:
        bad.append(f"link-bound cell: {r['round_s']} s ({r['bottleneck']}), by hand {hand} s")
    # Link bytes per server fall as 1/S (within the headers), and so does a link-bound round.
    prev = None
    for s in (16, 64, 250):
        r = model.cluster(p, 1000, s, 1e9, rho, 10, "bsp", 4)
        if prev and not (r["server_link_bytes"] < prev["server_link_bytes"] and
                         r["round_s"] < prev["round_s"]):
            bad.append(f"S={s}: server link bytes or round time did not fall")
        prev = r
    # validate-netns on the checked-in netns cells: one row per passing cell, and round_sim
    # within +-25 % of every configuration (its exit status).
    import glob
    import json
    files = sorted(glob.glob(os.path.join(SCALE, "measured", "netns-scale-*.json")))
    if files:
        rc, out = run("validate-netns", *files)
        cells = sum(c["pass"] for f in files for c in json.load(open(f))["cells"])
        runs = out.split("\nper configuration")[0]
        rows = [l for l in runs.splitlines() if l.split() and "x" in l.split()[0] and
                l.split()[0].replace("x", "").isdigit()]
        if rc != 0 or len(rows) != cells:
            print(out)
            bad.append(f"validate-netns: exit {rc}, {len(rows)} rows for {cells} cells")
    # netns_round's closed forms: a link-bound cell without burst or framing is compute + worker
    # CPU + push bytes / rate + reply bytes / rate; with a bucket it is never below the busiest
    # link's bytes / rate (the throughput bound) nor above the plain path.
    c = {"W": 16, "S": 4, "D": 1e6, "rho": 0.001, "compute_s": 0.002, "hb_per_s": 20.0,
         "cores": 0.2, "cpus": 2, "link_bytes_per_s": 1.25e6, "tbf_burst_bytes": 65536}
    x = model.cell_costs(p, 16, 4, 1e6, 0.001, "bsp", 4)
    hand = (0.002 + x["worker_cpu"] + max(x["worker_up"], x["server_in"]) / 1.25e6 +
            max(x["worker_down"], x["server_out"]) / 1.25e6)
    plain = model.netns_round(p, c)
    corr = model.netns_round(p, c, burst=True)
    if abs(plain["round_s"] / hand - 1) > 1e-9 or plain["bound"] != "link path":
        bad.append(f"netns_round plain: {plain['round_s']} ({plain['bound']}), by hand {hand}")
    if not (x["server_out"] / 1.25e6 - 1e-12 <= corr["round_s"] <= plain["round_s"]):
        bad.append(f"netns_round with burst: {corr['round_s']} outside "
                   f"[{x['server_out'] / 1.25e6}, {plain['round_s']}]")
    # round_sim's closed forms. Links only (no CPU, no burst): one worker, one server, a round is
    # its push's and its reply's bytes over the rate, plus the compute and two hand-overs.
    import round_sim
    zero = {"push_bytes_shard": 5e4, "reply_bytes_shard": 2e5, "worker_cpu": 0.0,
            "worker_apply_cpu": 0.0, "merge_cpu": 0.0, "update_cpu": 0.0, "update_send_cpu": 0.0}
    got = round_sim.bsp_rounds(1, 1, zero, 0.003, 1e7, 0.0, 2.0, latency_s=1e-4)
    if abs(got / (0.003 + 2.5e5 / 1e7 + 2e-4) - 1) > 1e-9:
        bad.append(f"round_sim links only: {got} s, by hand {0.003 + 2.5e5 / 1e7 + 2e-4} s")
    # A server's W replies share its uplink: W = 4 workers, a round is W replies + one push
    # (a worker pushes as soon as its reply is in, while the others' replies are on the link;
    # the last worker's push decides).
    got = round_sim.bsp_rounds(4, 1, zero, 0.0, 1e7, 0.0, 2.0)
    if abs(got / ((4 * 2e5 + 5e4) / 1e7) - 1) > 1e-9:
        bad.append(f"round_sim 4 replies: {got} s, by hand {(4 * 2e5 + 5e4) / 1e7} s")
    # A bucket whose credit covers every message leaves only the compute.
    got = round_sim.bsp_rounds(4, 1, zero, 0.003, 1e7, 1e9, 2.0)
    if abs(got / 0.003 - 1) > 1e-9:
        bad.append(f"round_sim with ample burst: {got} s, not the 0.003 s compute")
    # CPU only (links of 1e30 B/s): 4 workers' 10 ms of CPU each on 2 cores take 20 ms, on 8
    # cores 10 ms (a task runs on at most one core); the server's work adds after the barrier.
    cpu = dict(zero, worker_cpu=0.01, worker_apply_cpu=0.004, merge_cpu=0.002, update_cpu=0.001)
    for cores, hand in ((2.0, 0.02 + 0.002 / 2 + 0.001), (8.0, 0.01 + 0.002 / 4 + 0.001)):
        got = round_sim.bsp_rounds(4, 1, cpu, 0.0, 1e30, 0.0, cores)
        if abs(got / hand - 1) > 1e-6:
            bad.append(f"round_sim CPU only on {cores} cores: {got} s, by hand {hand} s")
    print("".join(f"model_test: FAIL {line}\n" for line in bad) +
          f"model_test: {'FAIL' if bad else 'PASS'}")
    return int(bool(bad))


if __name__ == "__main__":
    sys.exit(main())
