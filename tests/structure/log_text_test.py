#!/usr/bin/python3
"""NoConsumerReadsLogText: no code under deploy/, bench/ or tests/ matches the text of a daemon's
log message. The daemons' log lines are for people and may be reworded at any time; programs
learn about a job from data (the scheduler's job status: GET /v1/job, --status_file,
--termination_message_file; its --port_file; the documented output files), never from log text.

The messages are read from the daemons' own sources (scheduler/, server/, worker/, net/, daemon/):
the first string literal streamed into a glog LOG(...) statement, into a rate-limited log's
lambda (`os << "..."`, net/rejection_log.h and base/log_limiter.h), or printed by
PrintSummaryLine (daemon/daemon_main.h) — the "listening on" and "job finished" lines — and
kept when it has at least MIN_CHARS characters (a PrintSummaryLine text MIN_SUMMARY_CHARS) without its edges' spaces and punctuation (shorter
fragments such as "waiting for" are words, not a message's identity). A line of code that contains one
(comments are prose, not readings) is a failure, named with the line and the message. The message texts themselves may appear where they
are produced (the daemons' sources) and in this test.

The run summaries' line prefixes (`sieve-worker summary:`, `sieve-server summary:`,
`sieve-server shard summary:`, the constants k...SummaryPrefix) are in the list too: programs
read a run's summary from the daemons' --summary_out files (docs/protocol.md, "Run summaries").
"""
import os
import re
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCES = ["scheduler", "server", "worker", "net", "daemon"]
CONSUMERS = ["deploy", "bench", "tests"]
MIN_CHARS = 14
MIN_SUMMARY_CHARS = 8  # PrintSummaryLine's text follows the daemon's name: "listening on"
# Files that reproduce a daemon's own output on purpose: the launcher tests' stand-in daemons.
PRODUCERS = {os.path.join("tests", "deploy", "local", "standin_daemon.cc")}

LOG_LITERAL = re.compile(
    r'LOG(?:_IF|_EVERY_N|_FIRST_N)?\s*\((?:INFO|WARNING|ERROR|FATAL)[^;]*?<<\s*"((?:[^"\\]|\\.)*)"',
    re.S)
LAMBDA_LITERAL = re.compile(r'\bos\s*<<\s*"((?:[^"\\]|\\.)*)"')
SUMMARY_LITERAL = re.compile(r'PrintSummaryLine\([^;]*?"((?:[^"\\]|\\.)*)"', re.S)
SUMMARY_PREFIX = re.compile(r'k\w*SummaryPrefix\[\]\s*=\s*"((?:[^"\\]|\\.)*)"')


def core(text):
    """The message's identity: the literal without its escapes' newlines and without edge spaces
    and punctuation."""
    return text.replace("\\n", " ").strip(" :;,.()[]=-\"'")


def messages():
    out = {}
    for top in SOURCES:
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if not name.endswith((".cc", ".h")):
                    continue
                path = os.path.join(d, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for pattern, least in ((LOG_LITERAL, MIN_CHARS), (LAMBDA_LITERAL, MIN_CHARS),
                                       (SUMMARY_LITERAL, MIN_SUMMARY_CHARS)):
                    for m in pattern.finditer(text):
                        msg = core(m.group(1))
                        if len(msg) >= least and " summary" not in msg:
                            out.setdefault(msg, os.path.relpath(path, ROOT))
                for m in SUMMARY_PREFIX.finditer(text):
                    out.setdefault(core(m.group(1)), os.path.relpath(path, ROOT))
    return out


def consumer_files():
    for top in CONSUMERS:
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs if x not in ("__pycache__", "measured")]
            for name in files:
                if name.endswith((".py", ".cc", ".h", ".sh", ".js")) or "." not in name:
                    yield os.path.join(d, name)


class NoConsumerReadsLogText(unittest.TestCase):
    def test_the_message_list_is_not_empty(self):
        # The extraction itself: messages every daemon has had since its first version.
        found = messages()
        self.assertIn("every worker finished; shutting down", found)
        self.assertIn("listening on", " ".join(found))
        for prefix in ("sieve-worker summary", "sieve-server summary",
                       "sieve-server shard summary"):
            self.assertIn(prefix, found)
        self.assertGreater(len(found), 30, found)

    def test_no_consumer_matches_a_log_message(self):
        found = messages()
        me = os.path.abspath(__file__)
        hits = []
        for path in consumer_files():
            rel = os.path.relpath(path, ROOT)
            if os.path.abspath(path) == me or rel in PRODUCERS:
                continue
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.read().split("\n")
            except OSError:
                continue
            for number, line in enumerate(lines, 1):
                if line.lstrip().startswith(("//", "#", "*")):
                    continue  # prose about a message is not a reading of it
                for msg, source in found.items():
                    if msg in line:
                        hits.append(f"{rel}:{number}: \"{msg}\" (logged by {source})")
        self.assertEqual(hits, [], "code that reads a daemon's log text:\n" + "\n".join(hits))


if __name__ == "__main__":
    sys.exit(unittest.main())
