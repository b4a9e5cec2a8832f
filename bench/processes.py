"""Figures measured in several processes a side (bench/pool_alloc.py,
bench/frameworks_alloc.py).

Small calls run at one of two speeds for a whole process, whatever the
implementation (bench/NOTES.md, "Two speeds a process"): of eight
processes of one build, some take a 1 MiB allocate + free in 1.7 us and
the others in 2.6.  Which speed a process draws is not the code's, so
the median over a few processes a side compares draws as much as
implementations.  Each side reports two figures: the median of its
processes, and the figure of its fast processes, the lower quartile of
its processes' figures, which is a fast process's figure whenever at
least a quarter of the side drew the fast speed.  The ratio of the fast
figures compares the implementations speed for speed; targets are
judged on it, and both are printed.
"""

import statistics


def fast(figures):
    """The fast processes' figure of FIGURES (times, one a process): their
    lower quartile (the smallest with fewer than four)."""
    ordered = sorted(figures)
    if len(ordered) < 4:
        return ordered[0]
    return statistics.quantiles(ordered, n=4, method="inclusive")[0]


def summary(figures):
    """(median, fast figure) of FIGURES."""
    return statistics.median(figures), fast(figures)
