"""delta-commit-owner's service: HTTP API, ratification rules, ownership store and log storage."""

from importlib.metadata import PackageNotFoundError, version

try:  # the release's name lives in pyproject.toml only
    __version__ = version("delta-commit-owner")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
