"""Benchmark audit diagnostics (Jiang et al., "What Are We Actually Benchmarking in Robot
Manipulation?"): significance of claimed gains (Sec. 4, App. C), creeping-overfitting drift
(Sec. 5, App. A.2) and the determinism trace diff (App. B.2). Outcome tables are read by
``robosafe.stats.outcomes``."""
