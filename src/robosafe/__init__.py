"""robosafe: evaluate robot policies beyond task success."""

__version__ = "0.1.0"
