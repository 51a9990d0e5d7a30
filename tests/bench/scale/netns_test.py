#!/usr/bin/python3
"""BenchScaleNetns: bench/scale/run.py --netns --link=1gbit at cell 4x1, D = 1e5, 400 rounds (a few
seconds: the harness reads the congestion control every 0.5 s once every node is connected, so the
job must outlive that; 50 rounds took ~0.3 s on an idle machine and often ended first). Passes when
the harness exits 0 with the cell passed, every process had its own namespace address and used it
(the local address of each of its established TCP sockets is its own; workers and servers talk only
to the other role and the scheduler, the scheduler to every node), tc's byte counters were read
(every node's download, the server's upload), and nothing of the run is left (namespaces, daemons),
and its connections used CUBIC (the harness's default --tcp_cc, whatever the kernel's default) and
the upload queue was a host's (--upload_queue=host); then that --tcp_cc=reno gives Reno, that
netns.Hosts gives the upload's token bucket 1000 frames of queue and the download's rate x latency
+ burst (tc's own report of each qdisc's limit), and with upload_queue=None the download's on both,
that SIGTERM mid-run removes the namespaces, and that a cell above the node limit, --link without
--netns, an unknown --tcp_cc and a bad --upload_queue are usage errors (exit 2).
Skipped (exit 77) without root or working `ip netns`.

usage: netns_test.py BUILD_DIR
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# The scale harness under test, bench/scale/ (this file is tests/bench/scale/).
SCALE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                      "..", "bench", "scale"))
sys.path.insert(0, SCALE)
import netns  # noqa: E402
import run  # noqa: E402 (the harness, bench/scale/run.py)


def skip(why):
    print("SKIPPED:", why)
    sys.exit(77)


def namespaces(prefix):
    r = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True)
    return [line.split()[0] for line in r.stdout.splitlines()
            if line.strip() and line.split()[0].startswith(prefix + "-")]


def daemons_of(subnet):
    """Daemons still bound to an address of subnet (a.b.c)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f"--bind={subnet}.".encode() in f.read():
                    out.append(pid)
        except OSError:
            pass
    return out


def harness(build, out, *extra, wait=True):
    argv = [sys.executable, os.path.join(SCALE, "run.py"), f"--build={build}", "--cells=4x1",
            "--d=1e5", "--rounds=400", "--timeout_s=60", "--netns", "--link=1gbit",
            f"--out={out}", *extra]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if not wait:
        return p
    text, _ = p.communicate(timeout=90)
    print(text, end="")
    return p


def check_cc(c, want, bad):
    """The cell recorded want as its congestion control and saw only it on the connections."""
    if c.get("tcp_cc") != want or c.get("tcp_cc_seen") != [want]:
        bad.append(f"congestion control: tcp_cc {c.get('tcp_cc')!r}, seen "
                   f"{c.get('tcp_cc_seen')!r}, expected {want!r} on every connection")


def check_cell(doc, bad):
    cells = doc.get("cells") or [{}]
    c = cells[0]
    if not c.get("pass"):
        bad.append(f"the cell failed: {c.get('problems')}")
    check_cc(c, "cubic", bad)
    procs = c.get("processes", [])
    if len(procs) != 6:
        return bad.append(f"{len(procs)} processes, expected 6")
    addr = {p["process"]: p.get("address") for p in procs}
    if None in addr.values() or len(set(addr.values())) != 6:
        bad.append(f"addresses not one per process: {addr}")
    servers = {addr[p["process"]] for p in procs if p["role"] == "server"}
    sched = addr["scheduler"]
    everyone = set(addr.values())
    for p in procs:
        own = p["address"]
        if p.get("tcp_local_addrs") != [own]:
            bad.append(f"{p['process']}: local addresses {p.get('tcp_local_addrs')}, expected "
                       f"only its own {own}")
        peers = set(p.get("tcp_peer_addrs") or [])
        want = {"scheduler": everyone - {sched}, "server": everyone - servers,
                "worker": servers | {sched}}[p["role"]]
        if peers != want:
            bad.append(f"{p['process']}: peers {sorted(peers)}, expected {sorted(want)}")
        if not p.get("link_down_bytes_total"):
            bad.append(f"{p['process']}: no tc download counter")
        if p["role"] == "server" and not p.get("link_up_bytes_total"):
            bad.append(f"{p['process']}: no tc upload counter")
    net = c.get("netns") or {}
    if (net.get("link") != "1gbit" or "tbf" not in net.get("shaping", "") or
            net.get("upload_queue") != netns.HOST_QUEUE):
        bad.append(f"cell's netns record: {net}")
    return net


def qdisc_limits(ns, dev):
    """Bytes DEV's root tbf in namespace NS queues (None when there is none): tc reports the
    queue as lat, the time to drain it less the burst, so rate x lat + burst."""
    r = subprocess.run(["tc", "-j", "-n", ns, "qdisc", "show", "dev", dev],
                       stdout=subprocess.PIPE, text=True)
    try:
        for q in json.loads(r.stdout or "[]"):
            if q.get("kind") == "tbf" and q.get("root"):
                o = q["options"]
                return o["rate"] * o["lat"] / 1e6 + o["burst"]
    except (ValueError, KeyError, TypeError):
        pass
    return None


def check_queues(bad):
    """The two token buckets' queues, as tc reports them, for both upload_queue settings."""
    burst = netns.tbf_burst_bytes("10mbit")
    down_want = 1.25e6 * 0.1 + burst  # tc's limit for latency 100ms: rate x latency + burst
    for upload, up_want in ((netns.HOST_QUEUE, netns.HOST_QUEUE_FRAMES * 1514),
                            (None, down_want)):
        with netns.Hosts(2, "10mbit", prefix=f"sscale-q{os.getpid()}", upload_queue=upload) as h:
            up = qdisc_limits(h.ns(1), "eth0")
            down = qdisc_limits(h.switch, "p1")
        for what, got, want in (("upload", up, up_want), ("download", down, down_want)):
            # tc keeps lat in microseconds: within 1 % of the bytes wanted.
            if got is None or abs(got - want) > 0.01 * want:
                bad.append(f"upload_queue={upload}: the {what} queue is {got} B, want ~{want:.0f}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    if os.geteuid() != 0:
        skip("needs root for network namespaces")
    if not shutil.which("ip") or not shutil.which("tc"):
        skip("iproute2 (ip, tc) not installed")
    probe = f"sscale-probe-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", probe], stderr=subprocess.DEVNULL).returncode:
        skip("'ip netns add' does not work here")
    works = subprocess.run(["ip", "netns", "exec", probe, "true"],
                           stderr=subprocess.DEVNULL).returncode == 0
    subprocess.run(["ip", "netns", "del", probe])
    if not works:
        skip("'ip netns exec' does not work here")
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "netns.json")
        t = time.time()
        p = harness(build, out)
        print(f"netns_test: the cell took {time.time() - t:.1f} s")
        if p.returncode != 0:
            bad.append(f"harness exit {p.returncode}")
        try:
            with open(out) as f:
                net = check_cell(json.load(f), bad)
        except (OSError, ValueError) as e:
            bad.append(f"no JSON: {e}")
            net = {}
        prefix, subnet = net.get("prefix", f"sscale-{p.pid}"), net.get("subnet", "")[:-5]
        if namespaces(prefix):
            bad.append(f"namespaces left: {namespaces(prefix)}")
        if subnet and daemons_of(subnet):
            bad.append(f"daemons left: {daemons_of(subnet)}")

        # Another congestion control than the default one: Reno is built into every kernel.
        out = os.path.join(tmp, "reno.json")
        p = harness(build, out, "--tcp_cc=reno")
        try:
            with open(out) as f:
                c = (json.load(f).get("cells") or [{}])[0]
            if p.returncode != 0 or not c.get("pass"):
                bad.append(f"--tcp_cc=reno: exit {p.returncode}, {c.get('problems')}")
            check_cc(c, "reno", bad)
        except (OSError, ValueError) as e:
            bad.append(f"--tcp_cc=reno: no JSON: {e}")

        check_queues(bad)

        # SIGTERM while the job runs: the namespaces go with the harness.
        p = harness(build, os.path.join(tmp, "term.json"), "--rounds=100000", wait=False)
        prefix = f"sscale-{p.pid}"
        end = time.time() + 20
        while time.time() < end and len(namespaces(prefix)) < 7:
            time.sleep(0.1)
        time.sleep(1.0)
        if len(namespaces(prefix)) != 7:
            bad.append(f"before SIGTERM: namespaces {namespaces(prefix)}, expected 7")
        p.send_signal(signal.SIGTERM)
        try:
            p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            bad.append("the harness did not exit within 20 s of SIGTERM")
        if namespaces(prefix):
            bad.append(f"namespaces left after SIGTERM: {namespaces(prefix)}")
            for ns in namespaces(prefix):  # leave the machine clean anyway
                subprocess.run(["ip", "netns", "del", ns])

        # Usage errors: exit 2 with a message, nothing created.
        base = [sys.executable, os.path.join(SCALE, "run.py"), f"--build={build}"]
        for extra, needle in ((["--netns", "--cells=4x1,40x8"], "W + S + 1 <= 41"),
                              (["--netns", "--link=fast"], "not a rate"),
                              (["--link=1gbit"], "--link needs --netns"),
                              (["--netns", "--tcp_cc=nonesuch"], "not available here"),
                              (["--netns", "--upload_queue=deep"], "not a queue")):
            q = subprocess.run(base + extra, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=30)
            if q.returncode != 2 or needle not in q.stdout:
                bad.append(f"{extra}: exit {q.returncode}, expected 2 and {needle!r}: "
                           f"{q.stdout.strip()}")
    return run.verdict("netns_test", bad)


if __name__ == "__main__":
    sys.exit(main())
