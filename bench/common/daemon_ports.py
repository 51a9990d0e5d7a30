"""The ports of the sieve daemons that the benchmarks' and the tests' Python scripts start: the
HOST:PORT a daemon writes to its --port_file, and runs of free ports to give them."""

import socket
import time


def read_port_file(path):
    """The HOST:PORT in the --port_file `path`, or None while it is not there yet (the daemon
    replaces it atomically: once there it is whole, ending in a newline)."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    return text.strip() if text.endswith("\n") else None


def wait_port_file(path, timeout, alive, poll_s):
    """The HOST:PORT in the --port_file `path`, polled every `poll_s` seconds, or None when
    `alive()` turned false first or `timeout` seconds passed."""
    end = time.time() + timeout
    while time.time() < end:
        address = read_port_file(path)
        if address is not None:
            return address
        if not alive():
            return None
        time.sleep(poll_s)
    return None


def ports_free(base, count, host=""):
    """Whether the ports base..base+count-1 of `host` can all be bound now (checked, not
    reserved)."""
    socks = []
    try:
        for port in range(base, base + count):
            s = socket.socket()
            socks.append(s)
            s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()
