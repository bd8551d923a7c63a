"""The package version, in its own module so every module can import it early."""

__version__ = "0.1.0"
