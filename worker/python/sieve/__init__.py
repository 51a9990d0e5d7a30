"""sieve: a Python worker for sieve's parameter server (docs/worker-api.md, "The Python module").

The C++ core (`sieve._core`, pybind11) is re-exported here: `Client` (connect, pull_dense,
push_pull, barrier, finish, wait_shutdown, rank and sizes), `ErrorFeedback` (momentum + residual
and selection with every compressor, in cpu or cuda memory), `Selection`, and the pieces that make
a Python worker behave exactly like `sieve-worker` (data partition and shuffle, schedules, metrics
lines). `sieve.torch.DistributedOptimizer` is the training-loop side; `sieve.worker` reads the
job's address, rank and flags the way `sieve launch` passes them.
"""

from ._core import (  # noqa: F401
    Client,
    Error,
    ErrorFeedback,
    MetricsWriter,
    RoundMetrics,
    Selection,
    TimeoutError,
    counter_hash,
    cuda_compiled,
    epoch_batch_order,
    expand_rank_pattern,
    format_progress_line,
    init_params,
    k_for_density,
    learning_rate,
    load_fashion_mnist,
    model_layout,
    parse_compressor,
    partition_range,
    steps_per_epoch,
    worker_summary,
)

COMPRESSORS = ("none", "topk", "gaussiank", "gaussiank_paper", "dgc", "randomk")
