"""The package version (one place: setup.cfg reads it, caches and result files record it)."""
__version__ = "0.1.0"
