"""The asv suite of daskelastic (``asv.conf.json`` at the top of the repository).

Timed benchmarks (``time_``) of a local epoch per loss, a round's overhead and
whole fits to ``tol=1e-3``, in this process and on a ``LocalCluster``; tracked
numbers (``track_``) of the straggler and elastic studies on the simulated
cluster, which are deterministic.  Every benchmark runs on a small slice of a
real table (:mod:`daskelastic.datasets`) so that the suite runs in minutes;
the comparison scripts ``benchmarks/bench_*.py`` measure the full tables.
"""
