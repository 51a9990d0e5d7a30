"""DeployChecklist: the operator checklist of docs/deploy.md cannot go stale.

Every item of its "Operator checklist" section is a line `- [x] **Title.** ...` (done) or
`- [ ] **Title.** ...` (open). Each done item names at least one test as
`path::Class.test_name` (Python: `class Class` and `def test_name(` in the file) or
`path::Suite.TestName` (GoogleTest: `TEST(Suite, TestName)`, `TEST_F(...)` or `TEST_P(...)`);
every test named anywhere in the section must exist. The items the checklist must cover are
listed here too, so that none is dropped silently.

usage: checklist_test.py [SOURCE_DIR]
"""

import os
import re
import sys
import unittest

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SECTION = "## Operator checklist"
# The items the checklist must hold (titles, in any order).
REQUIRED = ("Retryable exit codes", "Per-index backoff", "Deadline", "Bounded init waits",
            "Success policy and dump order", "Per-run checkpoints", "Checkpoints go with the job",
            "Export of the trained weights", 'Pod Security "restricted"', "Egress", "PDB",
            "Immutable ConfigMap", "Images", "Kueue by default", "PodMonitor",
            "Termination message", "Labels", "Names at scale", "Schemas")
ITEM = re.compile(r"^- \[([ x])\] \*\*(.+?)\.\*\*")
REFERENCE = re.compile(r"`(tests/[\w./-]+)::(\w+)\.(\w+)`")


def checklist(text):
    """[(done, title, item text)] of the section, in order."""
    start = text.index(SECTION + "\n")
    end = text.find("\n## ", start + len(SECTION))
    items = []
    for line in text[start:end if end >= 0 else len(text)].splitlines():
        m = ITEM.match(line)
        if m:
            items.append([m.group(1) == "x", m.group(2), line])
        elif items and line.startswith("  "):
            items[-1][2] += "\n" + line
    return [tuple(i) for i in items]


def test_exists(source_dir, path, group, name):
    """Whether `path` defines the test group.name; a reason when it does not."""
    full = os.path.join(source_dir, path)
    if not os.path.isfile(full):
        return f"no file {path}"
    with open(full, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".py"):
        m = re.search(rf"^class {re.escape(group)}\b.*?(?=^class |\Z)", text, re.M | re.S)
        if not m:
            return f"{path}: no class {group}"
        if not re.search(rf"^    def {re.escape(name)}\(", m.group(0), re.M):
            return f"{path}: {group} has no {name}"
        return None
    if path.endswith((".cc", ".cpp")):
        if re.search(rf"\bTEST(?:_F|_P)?\(\s*{re.escape(group)}\s*,\s*{re.escape(name)}\s*\)",
                     text):
            return None
        return f"{path}: no TEST {group}.{name}"
    return f"{path}: not a Python or C++ test file"


class ChecklistTest(unittest.TestCase):

    def setUp(self):
        with open(os.path.join(SOURCE_DIR, "docs", "deploy.md"), encoding="utf-8") as f:
            self.items = checklist(f.read())

    def test_every_required_item_is_listed_once(self):
        titles = [t for _, t, _ in self.items]
        for title in REQUIRED:
            self.assertEqual(titles.count(title), 1, f"checklist item '{title}'")

    def test_every_done_item_names_a_test_and_every_named_test_exists(self):
        for done, title, text in self.items:
            refs = REFERENCE.findall(text)
            if done:
                self.assertTrue(refs, f"'{title}' is checked but names no test")
            for path, group, name in refs:
                with self.subTest(item=title, test=f"{path}::{group}.{name}"):
                    self.assertIsNone(test_exists(SOURCE_DIR, path, group, name))

    def test_the_check_catches_a_missing_test(self):
        """The existence check itself: a real test passes, renamed ones do not."""
        ok = test_exists(SOURCE_DIR, "tests/deploy/checklist_test.py", "ChecklistTest",
                         "test_the_check_catches_a_missing_test")
        self.assertIsNone(ok)
        self.assertIsNotNone(test_exists(SOURCE_DIR, "tests/deploy/checklist_test.py",
                                         "ChecklistTest", "test_gone"))
        self.assertIsNotNone(test_exists(SOURCE_DIR, "tests/deploy/checklist_test.py",
                                         "NoSuchClass", "test_the_check_catches_a_missing_test"))
        self.assertIsNone(test_exists(SOURCE_DIR, "tests/deploy/local/export_test.cc",
                                      "ExportTest", "FinalShardsAreTheVectorBitForBit"))
        self.assertIsNotNone(test_exists(SOURCE_DIR, "tests/deploy/local/export_test.cc",
                                         "ExportTest", "NoSuchTest"))
        self.assertIsNotNone(test_exists(SOURCE_DIR, "tests/deploy/nothing.py", "A", "b"))
        items = checklist(f"{SECTION}\n\n- [x] **Done.** no test named\n- [ ] **Open.** x\n"
                          "  `tests/a.py::B.c`\n\n## Next\n- [x] **Elsewhere.**\n")
        self.assertEqual([(d, t) for d, t, _ in items], [(True, "Done"), (False, "Open")])
        self.assertEqual(REFERENCE.findall(items[1][2]), [("tests/a.py", "B", "c")])


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        SOURCE_DIR = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
