"""Allowed roots: the only places where the owner registers tables (``--allow-location``).

A location is allowed when, after normalisation (``normalize_location``: scheme case, ``.``/``..``,
one round of percent-decoding, look-alike characters refused), it lies strictly below one root on
path-segment boundaries. On local disk both sides are also resolved with ``realpath``, so a symlink
inside a root that points out of it does not open a way out.

Resolving is :func:`resolve`: on Linux the kernel's own resolution of an open ``O_PATH`` descriptor (three
system calls), else ``os.path.realpath`` (an ``lstat`` per path segment, in Python): the same answer for a
path that exists, about a third of the cost; a path that does not exist, or any failure, takes ``realpath``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from client.contract.errors import LocationNotAllowedError
from client.contract.layout import LOG_DIR, has_scheme, local_path, normalize_prefix

_O_PATH = getattr(os, "O_PATH", 0)
_FD_LINKS = "/proc/self/fd/"
_fd_links = _O_PATH != 0 and os.path.isdir(_FD_LINKS)


def resolve(path: str) -> str:
    """``os.path.realpath(path)``: every symlink followed, ``.``/``..`` and repeated slashes gone.

    An existing folder is resolved by the kernel (``open(O_PATH | O_DIRECTORY)``, then ``readlink`` of its
    ``/proc/self/fd`` entry, which names the folder the open reached); anything else by ``realpath``."""
    if _fd_links:
        try:
            fd = os.open(path, _O_PATH | os.O_DIRECTORY)
        except OSError:
            return os.path.realpath(path)
        try:
            real = os.readlink(_FD_LINKS + str(fd))
        except OSError:
            real = ""
        finally:
            os.close(fd)
        if real.startswith("/") and not real.endswith(" (deleted)"):
            return real
    return os.path.realpath(path)


def _inside(real: str, bases: tuple[str, ...]) -> bool:
    """Whether the resolved path ``real`` lies strictly below one of ``bases`` (each ending in ``/``)."""
    return real.startswith(bases)


@dataclass(frozen=True)
class Root:
    uri: str  # canonical: file:///abs/path or s3://bucket[/prefix]
    real: str | None = None  # realpath of a local root

    def holds(self, location: str) -> bool:
        if not location.startswith(self.uri + "/"):
            return False
        if self.real is None:
            return True
        return _inside(resolve(local_path(location)), (self.real.rstrip("/") + "/",))


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
    bases = tuple(r.real.rstrip("/") + "/" for r in roots if r.real is not None)
    for sub in (LOG_DIR, f"{LOG_DIR}/{commit_dir}"):
        if not _inside(resolve(os.path.join(local_path(location), sub)), bases):
            raise LocationNotAllowedError(
                f"the table's {sub} resolves outside every allowed root of this service (a symlink?)")
