"""Allowed roots: the only places where the owner registers tables (``--allow-location``).

A location is allowed when, after normalisation (``normalize_location``: scheme case, ``.``/``..``,
one round of percent-decoding, look-alike characters refused), it lies strictly below one root on
path-segment boundaries. On local disk both sides are also resolved with ``realpath``, so a symlink
inside a root that points out of it does not open a way out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from client.contract.errors import LocationNotAllowedError
from client.contract.layout import LOG_DIR, has_scheme, local_path, normalize_prefix


@dataclass(frozen=True)
class Root:
    uri: str  # canonical: file:///abs/path or s3://bucket[/prefix]
    real: str | None = None  # realpath of a local root

    def holds(self, location: str) -> bool:
        if not location.startswith(self.uri + "/"):
            return False
        if self.real is None:
            return True
        real = os.path.realpath(local_path(location))
        return real.startswith(self.real.rstrip("/") + "/")


def parse_root(raw: str, cwd: str | None = None) -> Root:
    """One root; a path without a scheme is relative to ``cwd``. Raises InvalidArgumentError."""
    text = raw.strip()
    if not has_scheme(text):
        text = "file://" + os.path.abspath(os.path.join(cwd or os.getcwd(), text))
    uri = normalize_prefix(text)
    if uri.startswith("file://"):
        return Root(uri, os.path.realpath(local_path(uri)))
    return Root(uri)


def parse_roots(raw: Iterable[str], cwd: str | None = None) -> tuple[Root, ...]:
    return tuple(parse_root(r, cwd) for r in raw if r.strip())


def check_allowed(location: str, roots: Iterable[Root]) -> None:
    """Raise LocationNotAllowedError unless the canonical ``location`` lies below one of ``roots``."""
    if not any(r.holds(location) for r in roots):
        raise LocationNotAllowedError(
            "location is outside every allowed root of this service (see --allow-location)")


def check_local_log(location: str, commit_dir: str, roots: Iterable[Root]) -> None:
    """On local disk, refuse when ``_delta_log`` or its commit folder resolves (symlinks) outside every root.

    Checked at registration and before each commit, so a symlink planted later cannot redirect writes.
    Raises LocationNotAllowedError.
    """
    if not location.startswith("file://"):
        return
    local_roots = [r for r in roots if r.real is not None]
    for sub in (LOG_DIR, f"{LOG_DIR}/{commit_dir}"):
        real = os.path.realpath(os.path.join(local_path(location), sub))
        if not any(real.startswith(r.real.rstrip("/") + "/") for r in local_roots):  # type: ignore[union-attr]
            raise LocationNotAllowedError(
                f"the table's {sub} resolves outside every allowed root of this service (a symlink?)")
