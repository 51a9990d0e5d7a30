"""`sieve compare` (deploy/local/compare_command.py) by idea: config (the YAML, the grid's cells
and runs, the flag check against the daemons), runner (each run's command, cache key and
summary), table (per-cell aggregation, summary.csv / runs.csv / summary.md) and plots. Each
module imports only those before it: config, table, runner, plots. The library prints
progress but never exits: a bad grid raises config.ConfigError, which the command reports."""
