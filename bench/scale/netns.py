"""Emulated hosts for the scale harness ("netns hosts"): every node of a job in its own
network namespace with its own address on one bridge, each node's link shaped with tc.

The topology is deploy/local/netns/run's (read there, implemented here for Python): a "switch"
namespace holds a bridge br0; node i gets a veth pair, eth0 in its own namespace with address
SUBNET.(i + 1)/24 and port p<i> on the bridge. A link of RATE is shaped in both directions with a
token bucket (tbf rate RATE, burst = max(1 ms at RATE, 64 KiB) so that one GSO segment fits): on
the node's eth0 (its upload) and on its bridge port (its download), so every node has a full-duplex
link of RATE to a non-blocking switch. Each bucket has a queue; a packet that finds it full is
dropped. The download's (the switch port's) is `queue`, 100 ms by default. The upload's is
`upload_queue`: None = `queue` as well (deploy/local/netns/run's topology), or HOST_QUEUE, a real
host's: 1000 full frames (Linux's default txqueuelen), which on a 10 Mbit/s link is 1.2 s. The
difference matters because the upload's queue is the sender's own: a segment its qdisc refuses was
never sent, TCP does not treat it as a loss, and a connection with nothing else in flight waits for
its probe timer (about one RTO) to try again; a real NIC's qdisc is rarely that shallow, and a
shallow buffer on the path is the switch's, whose drops TCP recovers as losses. With a congestion
control (cc), each node's route to the subnet carries it as a route metric (`ip route ... congctl
CC`), so every TCP connection of the node, accepted ones included, uses it whatever the kernel's
default is (a namespace may not change its own default to an algorithm outside
tcp_allowed_congestion_control, and the machine's default, BBR on some kernels and CUBIC on most,
changes how a shallow shaped queue's drops cost time). Nothing is created in the root namespace.
The processes keep the harness's PID namespace (`ip netns exec` only switches the network and mount
namespaces, then execs), so /proc/<pid> sampling and wait4() work as on loopback.

    with Hosts(nodes=6, rate="1gbit") as h:
        argv = h.wrap(0, ["sieve-scheduler", f"--bind={h.ip(0)}", ...])

Hosts.close() (also on an exception, KeyboardInterrupt or SIGTERM turned into SystemExit by the
caller) kills whatever still runs in its namespaces and deletes them; deleting a namespace
deletes its veth ends and their peers.
"""
import os
import re
import shutil
import subprocess

# W + S + 1 <= MAX_NODES: the "netns hosts for N <= 32", i.e. up to the 32 x 8 cell.
MAX_NODES = 41
# upload_queue=HOST_QUEUE: the node's own qdisc holds HOST_QUEUE_FRAMES frames of 1514 B.
HOST_QUEUE = "host"
HOST_QUEUE_FRAMES = 1000
HOST_QUEUE_BYTES = HOST_QUEUE_FRAMES * 1514
# The scale harness's own /24s, away from deploy/local/netns/run's default 10.77.0.
DEFAULT_SUBNET_BASE = "10.78"

_UNITS = {"bit": 1 / 8, "kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8,
          "bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9}


class NetnsError(Exception):
    """A usage or environment problem: the caller prints it and exits 2."""


def rate_bytes_per_s(rate):
    """Bytes per second of a tc rate: 1gbit, 500mbit, 12500000bps ..."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([a-z]+)", rate.strip().lower())
    if not m or m.group(2) not in _UNITS or float(m.group(1)) <= 0:
        raise NetnsError(f"--link: {rate!r} is not a rate (1gbit, 10gbit, 100mbit, ...)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def check_queue(text, flag):
    """A queue as tc's latency (100ms, 1s, 500us) or, for flag --upload_queue, HOST_QUEUE."""
    if flag == "--upload_queue" and text == HOST_QUEUE:
        return
    if not re.fullmatch(r"\d+(?:\.\d+)?(?:us|ms|s)", text.strip()):
        extra = f", '{HOST_QUEUE}' or 'same'" if flag == "--upload_queue" else ""
        raise NetnsError(f"{flag}: {text!r} is not a queue (a time such as 100ms or 1s{extra})")


def tbf_burst_bytes(rate):
    """The token bucket's depth: 1 ms at the line rate, at least 64 KiB (one GSO segment)."""
    return max(int(rate_bytes_per_s(rate) / 1000), 65536)


def available_congestion_controls():
    """The TCP congestion controls this kernel has loaded (tcp_available_congestion_control)."""
    try:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            return f.read().split()
    except OSError:
        return []


def check_congestion_control(cc):
    """Raise NetnsError unless cc is a congestion control this kernel has."""
    have = available_congestion_controls()
    if cc not in have:
        raise NetnsError(f"--tcp_cc: {cc!r} is not available here (tcp_available_congestion_"
                         f"control: {' '.join(have) or 'unreadable'})")


def check_environment():
    """Raise NetnsError unless this process can create namespaces and shape links."""
    if os.geteuid() != 0:
        raise NetnsError("--netns needs root (ip netns, veth, tc)")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise NetnsError(f"--netns needs iproute2: '{tool}' is not on PATH")


def _run(argv):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise NetnsError(f"{' '.join(argv)}: exit {r.returncode}: {r.stdout.strip()}")
    return r.stdout


def _tc_sent(ns, dev_pattern):
    """{the dev pattern's group: (bytes sent, packets dropped)} of the root qdiscs in namespace
    ns (tc -s)."""
    r = subprocess.run(["tc", "-s", "-n", ns, "qdisc", "show"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    out, dev = {}, None
    for line in r.stdout.splitlines():
        m = re.match(r"qdisc \S+ \S+ dev (\S+) root", line)
        if m:
            d = re.fullmatch(dev_pattern, m.group(1))
            dev = d.group(1) if d else None
            continue
        m = re.match(r"\s*Sent (\d+) bytes \d+ pkt \(dropped (\d+)", line)
        if m and dev is not None:
            out[dev] = (int(m.group(1)), int(m.group(2)))
            dev = None
    return out


class Hosts:
    """nodes namespaces on one bridge, each link shaped to rate (None or "" = unshaped)."""

    def __init__(self, nodes, rate=None, prefix=None, subnet=None, queue="100ms", cc=None,
                 upload_queue=None):
        if not 1 <= nodes <= MAX_NODES:
            raise NetnsError(f"--netns: {nodes} nodes (W + S + 1); at most {MAX_NODES}")
        if rate:
            rate_bytes_per_s(rate)  # validates
        if cc:
            check_congestion_control(cc)
        check_queue(queue, "--link_queue")
        if upload_queue:
            check_queue(upload_queue, "--upload_queue")
        self.nodes, self.rate, self.queue, self.cc = nodes, rate or None, queue, cc or None
        self.upload_queue = upload_queue or queue
        self.default_cc = None  # the kernel's default in a new namespace, read by open()
        self.prefix = prefix or f"sscale-{os.getpid()}"
        self.subnet = subnet or f"{DEFAULT_SUBNET_BASE}.{os.getpid() % 250}"
        self.switch = f"{self.prefix}-sw"
        self.created = []
        self.upload_nodes = set()  # nodes whose upload counters sent() reads

    def ns(self, i):
        return f"{self.prefix}-n{i}"

    def ip(self, i):
        return f"{self.subnet}.{i + 1}"

    def wrap(self, i, argv):
        """argv run inside node i's namespace."""
        return ["ip", "netns", "exec", self.ns(i), *argv]

    def _add_ns(self, name):
        existing = {line.split()[0] for line in _run(["ip", "netns", "list"]).splitlines()
                    if line.strip()}
        if name in existing:
            raise NetnsError(f"namespace {name} exists already (another run with this prefix?)")
        _run(["ip", "netns", "add", name])
        self.created.append(name)
        _run(["ip", "-n", name, "link", "set", "lo", "up"])

    def _shape(self, ns, dev, queue):
        if self.rate:
            size = (["limit", str(HOST_QUEUE_BYTES)] if queue == HOST_QUEUE
                    else ["latency", queue])
            _run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate,
                  "burst", str(tbf_burst_bytes(self.rate)), *size])

    def open(self):
        try:
            self._add_ns(self.switch)
            _run(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
            _run(["ip", "-n", self.switch, "link", "set", "br0", "up"])
            for i in range(self.nodes):
                ns, port = self.ns(i), f"p{i}"
                self._add_ns(ns)
                _run(["ip", "-n", self.switch, "link", "add", port, "type", "veth", "peer",
                      "name", "eth0", "netns", ns])
                _run(["ip", "-n", self.switch, "link", "set", port, "master", "br0"])
                _run(["ip", "-n", self.switch, "link", "set", port, "up"])
                _run(["ip", "-n", ns, "addr", "add", f"{self.ip(i)}/24", "dev", "eth0"])
                _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
                if self.cc:
                    _run(["ip", "-n", ns, "route", "replace", f"{self.subnet}.0/24", "dev",
                          "eth0", "proto", "kernel", "scope", "link", "src", self.ip(i),
                          "congctl", self.cc])
                self._shape(ns, "eth0", self.upload_queue)   # the node's upload
                self._shape(self.switch, port, self.queue)   # its download
            self.default_cc = _run(["ip", "netns", "exec", self.ns(0), "cat",
                                    "/proc/sys/net/ipv4/tcp_congestion_control"]).strip()
        except BaseException:
            self.close()
            raise
        return self

    def congestion_controls(self, i):
        """(connections, names): how many established TCP connections node i has now and the
        sorted names of their congestion controls (ss -ti); (0, []) when ss fails."""
        r = subprocess.run(["ip", "netns", "exec", self.ns(i), "ss", "-tinH", "state",
                            "established"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True)
        # ss prints each connection's line, then its info line (indented), whose first word is
        # the congestion control's name (the other fields are name:value).
        words = [line.split()[0] for line in r.stdout.splitlines()
                 if line[:1].isspace() and line.split()]
        return len(words), sorted({w for w in words if ":" not in w})

    def close(self):
        """Kill what still runs in the namespaces, then delete them (and their veths)."""
        for name in self.created:
            r = subprocess.run(["ip", "netns", "pids", name], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), 9)
                except (OSError, ValueError):
                    pass
        for name in reversed(self.created):
            subprocess.run(["ip", "netns", "del", name], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        self.created = []

    def sent(self, all=False):
        """tc's counters now: {node: (download bytes, upload bytes, download drops, upload
        drops)}: L2 bytes (TCP/IP and Ethernet headers included) through each shaped link and
        the packets its token bucket dropped (queue full). Downloads of every node come from one
        call (the switch's ports); uploads (else None) only for the nodes in self.upload_nodes,
        one call each, or every node with all=True."""
        down = _tc_sent(self.switch, r"p(\d+)")
        out = {}
        for i in range(self.nodes):
            up = (_tc_sent(self.ns(i), r"(eth)0").get("eth")
                  if all or i in self.upload_nodes else None)
            d = down.get(str(i)) or (None, None)
            u = up or (None, None)
            out[i] = (d[0], u[0], d[1], u[1])
        return out

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()
        return False

    def describe(self):
        return {"nodes": self.nodes, "link": self.rate or "unshaped",
                "queue": self.queue, "upload_queue": self.upload_queue,
                "shaping": ("tbf rate %s burst %d on each node's eth0 (upload, queue %s) and "
                            "its bridge port (download, queue %s)" % (
                                self.rate, tbf_burst_bytes(self.rate),
                                f"{HOST_QUEUE_FRAMES} frames" if self.upload_queue == HOST_QUEUE
                                else self.upload_queue, self.queue)
                            if self.rate else "none"),
                "subnet": f"{self.subnet}.0/24", "prefix": self.prefix,
                # the congestion control every node's route carries (None: the kernel's
                # default, tcp_cc_default, for every connection)
                "tcp_cc": self.cc, "tcp_cc_default": self.default_cc}
