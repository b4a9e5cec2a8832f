"""Figures measured in several processes a side, the sides in turn
(bench/pool_alloc.py, bench/frameworks_alloc.py).

Small calls run at one of two speeds for a whole process, whatever the
implementation, and the machine's speed drifts over minutes too
(bench/NOTES.md, "Two speeds a process"): of eight processes of one
build, some take a 1 MiB allocate + free in 1.7 us and the others in
2.6, and an hour later most took 3.0.  So the median over a few
processes a side compares draws as much as implementations.  The sides
run in turn, A B A B ..., and each pair of neighbours ran at nearly the
same time: the ratio judged is the median of the pairs' ratios, A's
i-th process over B's i-th.  The medians of each side and every
process's figure are printed beside it.
"""

import statistics


def paired_ratio(a, b):
    """The median of A[i] / B[i] over the pairs of processes A[i], B[i]
    that ran one after the other."""
    return statistics.median(x / y for x, y in zip(a, b))
