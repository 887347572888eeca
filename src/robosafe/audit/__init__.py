"""Benchmark audit diagnostics (Jiang et al., "What Are We Actually Benchmarking in Robot
Manipulation?"): creeping-overfitting drift (Sec. 5, App. A.2) and the determinism trace diff
(App. B.2)."""

from robosafe.audit.diff import (
    ChannelDiff,
    TraceDiff,
    diff_channel,
    load_trace_npz,
    trace_diff,
)
from robosafe.audit.drift import (
    DriftReport,
    DriftResult,
    OutcomeTable,
    creeping_drift,
    outcome_table,
    read_outcome_csv,
)

__all__ = ["ChannelDiff", "DriftReport", "DriftResult", "OutcomeTable", "TraceDiff",
           "creeping_drift", "diff_channel", "load_trace_npz", "outcome_table",
           "read_outcome_csv", "trace_diff"]
