"""polytile: a polyhedral loop optimizer toolkit."""
__version__ = "0.1.0"
