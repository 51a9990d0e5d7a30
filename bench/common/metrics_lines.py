"""Reading a worker's --metrics_out file (docs/protocol.md): one JSON object per line, written
while the run goes on, so its last line may be cut short."""

import json


def read_metrics_lines(path):
    """The JSON objects of the metrics file `path`, in order. A line that is not a whole JSON
    object (a line still being written when the run was read or stopped) is skipped; a file that
    does not exist or cannot be read gives []."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    rows.append(row)
    except OSError:
        return []
    return rows
