"""The package version, in one place (``tomstats.__version__`` and every file's provenance)."""

__version__ = "0.1.0"
