#!/usr/bin/python3
"""ReadmeIsAFirstScreen: the README a newcomer reads first stays short and points everywhere.

- it starts with exactly the two commands (`scripts/demo`, `scripts/test`) in its first code block;
- it is at most 120 lines, and each of the four uses (launch a job, a PyTorch script, Kubernetes,
  comparing sync vs async) has a section of its own whose command is within the first 60 lines;
- its Documentation list names every page under docs/ and bench/README.md, and every file it
  names exists.
"""
import os
import re
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
USES = {  # heading -> the command its section shows
    "## Launch a job": "sieve launch --num_servers",
    "## Your PyTorch script as a worker": "--worker_cmd=",
    "## On Kubernetes": "kubectl apply",
    "## Compare synchronous and asynchronous training": "sieve compare",
}


def readme():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return f.read().split("\n")


class ReadmeIsAFirstScreen(unittest.TestCase):
    def test_starts_with_the_two_commands(self):
        lines = readme()
        start = lines.index("```bash")
        end = lines.index("```", start + 1)
        commands = [l.split("#")[0].strip() for l in lines[start + 1:end]]
        self.assertEqual(commands, ["scripts/demo", "scripts/test"])
        self.assertLess(start, 5, "the commands come first")

    def test_short_with_a_command_per_use(self):
        lines = readme()
        self.assertLessEqual(len(lines), 121, "README.md is over 120 lines")
        for heading, command in USES.items():
            self.assertIn(heading, lines, heading)
            at = lines.index(heading)
            shown = [i for i, l in enumerate(lines[at:at + 6], at) if command in l]
            self.assertTrue(shown, f"{heading}: no `{command}` in its first lines")
            self.assertLess(shown[0], 60, f"{heading}: its command is past line 60")

    def test_documentation_list_names_every_page(self):
        text = "\n".join(readme())
        docs = re.search(r"^## Documentation\n(.*?)(?=^## |\Z)", text, re.M | re.S).group(1)
        named = set(re.findall(r"`((?:docs|bench)/[\w./-]+\.md)`", docs))
        pages = {"docs/" + n for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md")}
        pages.add("bench/README.md")
        self.assertEqual(sorted(pages - named), [], "pages the Documentation list leaves out")
        for path in named:
            self.assertTrue(os.path.exists(os.path.join(ROOT, path)), path)


if __name__ == "__main__":
    sys.exit(unittest.main())
