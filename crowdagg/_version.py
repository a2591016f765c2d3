"""The package version, in one place (the package, the CLI and saved models read it)."""

__version__ = "0.1.0"
