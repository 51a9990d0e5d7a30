"""A discrete-event simulation of BSP rounds on one machine whose nodes each have their own shaped
link (run.py --netns --link): the processes share the machine's cores, the messages share the
links. model.py's closed forms take the larger of the CPU bound and the link path; where the two
are of the same size (the "mixed" regime) neither is the round, because a worker's CPU work starts
only when its replies are in and a server's replies leave only when every push is in. This
simulation plays that out with the model's own per-round costs (model.cell_costs), nothing fitted
here.

What it simulates, per round and node:
  worker   when all S replies of round r are in: CPU (decode and scatter of the replies), the
           round's compute (a sleep, as the harness emulates it: no CPU), CPU (gradient, residual,
           selection, encoding), then its S pushes of round r + 1, one per shard, in shard order.
  server   each push in: CPU (its merge); when all W pushes of the round are merged: CPU (the
           union's update), then, worker by worker in rank order, CPU (that recipient's copy
           handed to the transport) and the reply onto the link.
  CPU      processor sharing: n runnable tasks on `cores` cores each progress at min(1, cores/n)
           of a core.
  links    every node has an uplink and a downlink, each a token bucket (tc tbf) of `rate` bytes
           per second and `burst` bytes of credit. A message from a to b waits for a's uplink and
           b's downlink to be free (first come, first served), then takes the longer of the two
           buckets' times: its bytes less the bucket's credit, over the rate (0 when the credit
           covers it; veth itself is not the limit). Both buckets pay its bytes.
  not      TCP (windows, slow start, loss recovery: a queue that overflows drops packets, and
           the retransmissions are not modelled), the scheduler's heartbeats (~0.1 % of a core).
           A message's hand-over latency is a parameter: its CPU is in the costs, but the thread
           wake-ups on its way leave the cores idle when nothing else is runnable.

Thread-safety: pure functions.
"""
import heapq


class _Bucket:
    def __init__(self, rate, burst):
        self.rate, self.burst = rate, burst
        self.tokens, self.at, self.free = burst, 0.0, 0.0

    def credit(self, t):
        return min(self.burst, self.tokens + self.rate * max(t - self.at, 0.0))

    def take(self, t, nbytes):
        tokens = self.credit(t)
        need = max(nbytes - tokens, 0.0) / self.rate
        return tokens, need

    def commit(self, t, tokens, nbytes, end):
        # What the message left of the credit at its start; it refills from its end on.
        self.tokens = max(tokens - nbytes, 0.0)
        self.at = end
        self.free = end


class _Sim:
    def __init__(self, cores):
        self.t = 0.0
        self.cores = cores
        self.events = []  # (time, seq, callback)
        self.seq = 0
        self.tasks = {}  # id -> [remaining CPU seconds, callback]
        self.next_task = 0

    def at(self, t, fn):
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, fn))

    def cpu(self, seconds, fn):
        if seconds <= 0:
            self.at(self.t, fn)
            return
        self.next_task += 1
        self.tasks[self.next_task] = [seconds, fn]

    def send(self, up, down, nbytes, fn, latency):
        start = max(self.t, up.free, down.free)
        tu, nu = up.take(start, nbytes)
        td, nd = down.take(start, nbytes)
        end = start + max(nu, nd)
        up.commit(start, tu, nbytes, end)
        down.commit(start, td, nbytes, end)
        self.at(end + latency, fn)

    def run(self, until_fn):
        while not until_fn():
            share = min(1.0, self.cores / len(self.tasks)) if self.tasks else 0.0
            t_cpu = (self.t + min(r for r, _ in self.tasks.values()) / share
                     if self.tasks else float("inf"))
            t_ev = self.events[0][0] if self.events else float("inf")
            t_next = min(t_cpu, t_ev)
            if t_next == float("inf"):
                raise RuntimeError("round_sim: nothing left to run (a deadlock in the model)")
            dt = t_next - self.t
            done = []
            for tid, task in self.tasks.items():
                task[0] -= dt * share
                if task[0] <= 1e-15:
                    done.append(tid)
            self.t = t_next
            for tid in done:
                fn = self.tasks.pop(tid)[1]
                self.at(self.t, fn)
            while self.events and self.events[0][0] <= self.t:
                _, _, fn = heapq.heappop(self.events)
                fn()


def bsp_rounds(w, s, costs, compute_s, rate, burst, cores, framing=1.0, latency_s=0.0, rounds=8):
    """Mean BSP round time (s) over the steady rounds (after two warm-up rounds) of W workers and
    S servers sharing `cores` cores, every node with its own up and down token bucket of `rate`
    bytes/s and `burst` bytes; a message is handed over latency_s after its last byte passed the
    links (the wake-ups of the transport's threads and the receiver's). costs: per-round single-thread CPU seconds and bytes as
    model.cell_costs returns them, plus "worker_apply_cpu" (the part of worker_cpu spent on the
    replies) and "update_send_cpu" (the part of update_cpu per recipient)."""
    sim = _Sim(cores)
    wup = [_Bucket(rate, burst) for _ in range(w)]
    wdown = [_Bucket(rate, burst) for _ in range(w)]
    sup = [_Bucket(rate, burst) for _ in range(s)]
    sdown = [_Bucket(rate, burst) for _ in range(s)]
    push_b = costs["push_bytes_shard"] * framing
    reply_b = costs["reply_bytes_shard"] * framing
    apply_cpu = costs["worker_apply_cpu"]
    rest_cpu = max(costs["worker_cpu"] - apply_cpu, 0.0)
    merge_one = costs["merge_cpu"] / w
    send_one = costs["update_send_cpu"]
    update_cpu = max(costs["update_cpu"] - w * send_one, 0.0)
    replies_in = [0] * w
    merged = [0] * s
    done_at = []  # worker 0's time at the end of each round

    def worker_push(j):
        for sh in range(s):
            sim.send(wup[j], sdown[sh], push_b, lambda sh=sh: server_push(sh), latency_s)

    def worker_round(j):  # compute, then CPU, then the pushes
        sim.at(sim.t + compute_s, lambda: sim.cpu(rest_cpu, lambda: worker_push(j)))

    def worker_reply(j):
        replies_in[j] += 1
        if replies_in[j] < s:
            return
        replies_in[j] = 0
        if j == 0:
            done_at.append(sim.t)
        sim.cpu(apply_cpu, lambda: worker_round(j))

    def server_push(sh):
        sim.cpu(merge_one, lambda: server_merged(sh))

    def server_merged(sh):
        merged[sh] += 1
        if merged[sh] < w:
            return
        merged[sh] = 0
        sim.cpu(update_cpu, lambda: server_send(sh, 0))

    def server_send(sh, j):
        if j == w:
            return

        def out():
            sim.send(sup[sh], wdown[j], reply_b, lambda: worker_reply(j), latency_s)
            server_send(sh, j + 1)
        sim.cpu(send_one, out)

    for j in range(w):
        worker_round(j)
    sim.run(lambda: len(done_at) >= rounds)
    steady = done_at[2:]
    return (steady[-1] - steady[0]) / (len(steady) - 1)
