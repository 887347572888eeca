"""Statistics: intervals, Wald tests, top-line significance cutoffs, cells and breakdowns.

Formulas follow SafeVLA-Bench App. E (Wilson, bootstrap) and the benchmark-audit paper
(App. A.2 intervals, Sec. 4 / App. C tests and cutoffs); each function cites its equation.
"""

from robosafe.stats.cutoffs import (
    classify_gain,
    cutoff_table,
    delta_exists,
    delta_forall,
    l_exists,
    l_forall,
    realizable_count,
)
from robosafe.stats.intervals import (
    Interval,
    bootstrap_mean_interval,
    newcombe_interval,
    paired_wald_interval,
    stratified_bootstrap_mean_interval,
    two_sample_wald_interval,
    wilson_interval,
)
from robosafe.stats.wald import independent_wald_test, paired_wald_test

__all__ = ["Interval", "bootstrap_mean_interval", "classify_gain", "cutoff_table",
           "delta_exists", "delta_forall", "independent_wald_test", "l_exists", "l_forall",
           "newcombe_interval", "paired_wald_interval", "paired_wald_test", "realizable_count",
           "stratified_bootstrap_mean_interval", "two_sample_wald_interval", "wilson_interval"]
