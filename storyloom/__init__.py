"""storyloom: a local-first engine and web app for AI roleplay and long-form fiction."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("storyloom")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
