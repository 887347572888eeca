"""Statistics: intervals, Wald tests, top-line significance cutoffs, cells and breakdowns.

Formulas follow SafeVLA-Bench App. E (Wilson, bootstrap) and the benchmark-audit paper
(App. A.2 intervals, Sec. 4 / App. C tests and cutoffs); each function cites its equation.
The sequential tests (anytime-valid: stop when decided) are robosafe's own, in ``sequential``.
"""

from importlib import import_module

# Names are resolved on first use (PEP 562): importing robosafe.stats.intervals for a Wilson
# interval must not pull in numpy / scipy through the cutoffs and the Wald tests.
_HOME = {
    "classify_gain": "cutoffs", "cutoff_table": "cutoffs", "delta_exists": "cutoffs",
    "delta_forall": "cutoffs", "l_exists": "cutoffs", "l_forall": "cutoffs",
    "realizable_count": "cutoffs",
    "Interval": "intervals", "bootstrap_mean_interval": "intervals",
    "newcombe_interval": "intervals", "paired_wald_interval": "intervals",
    "stratified_bootstrap_mean_interval": "intervals", "two_sample_wald_interval": "intervals",
    "wilson_interval": "intervals",
    "independent_wald_test": "wald", "paired_wald_test": "wald",
    "multi_sequential": "sequential", "paired_sequential": "sequential",
    "proportion_sequential": "sequential", "unpaired_sequential": "sequential",
}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'robosafe.stats' has no attribute {name!r}")
    return getattr(import_module(f"robosafe.stats.{_HOME[name]}"), name)


__all__ = ["Interval", "bootstrap_mean_interval", "classify_gain", "cutoff_table",
           "delta_exists", "delta_forall", "independent_wald_test", "l_exists", "l_forall",
           "multi_sequential", "newcombe_interval", "paired_sequential", "paired_wald_interval",
           "paired_wald_test", "proportion_sequential", "realizable_count",
           "stratified_bootstrap_mean_interval", "two_sample_wald_interval",
           "unpaired_sequential", "wilson_interval"]
