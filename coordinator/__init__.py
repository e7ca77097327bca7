"""delta-commit-owner's service: HTTP API, ratification rules, ownership store and log storage."""

__version__ = "0.1.0"
