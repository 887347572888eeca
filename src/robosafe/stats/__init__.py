"""Statistics: intervals, aggregation into cells, breakdown tables."""

from robosafe.stats.intervals import Interval, bootstrap_mean_interval, wilson_interval

__all__ = ["Interval", "bootstrap_mean_interval", "wilson_interval"]
