"""Table locations: one canonical spelling per table so that comparisons and uniqueness hold."""

from __future__ import annotations

import os
import posixpath
import re
import unicodedata
from urllib.parse import unquote, urlsplit

from client.errors import InvalidArgumentError

SUPPORTED_SCHEMES = ("file", "s3")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_ENCODED = re.compile(r"%[0-9A-Fa-f]{2}")


def _check_text(text: str) -> None:
    """Refuse characters that could make two spellings of one location compare different (or the reverse)."""
    if "\x00" in text or any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InvalidArgumentError("location contains control characters")
    if unicodedata.normalize("NFKC", text) != text:
        # Full-width dots and slashes, ligatures, ...: look-alikes that a reader may fold into '..' or '/'.
        raise InvalidArgumentError("location contains Unicode characters that change under NFKC normalisation "
                                   "(look-alikes); spell it in plain characters")


def normalize_location(location: str) -> str:
    """Return the canonical URI of a table location.

    ``/abs/path`` and ``file:/abs/path`` become ``file:///abs/path``; ``s3a://`` and ``S3://`` become
    ``s3://``; ``.``/``..`` segments are resolved and a trailing slash dropped. Raises
    InvalidArgumentError for anything else (relative paths, other schemes, empty parts).
    """
    if not isinstance(location, str) or not location.strip():
        raise InvalidArgumentError("location must be a non-empty string")
    loc = location.strip()
    if "\x00" in loc or any(ord(c) < 32 for c in loc):
        raise InvalidArgumentError("location contains control characters")
    _check_text(loc)
    if loc.startswith("/"):
        loc = "file://" + loc
    try:
        parts = urlsplit(loc)
    except ValueError:
        raise InvalidArgumentError("location is not a valid URI") from None
    scheme = parts.scheme.lower()
    if scheme in ("s3a", "s3n"):
        scheme = "s3"
    if scheme not in SUPPORTED_SCHEMES:
        raise InvalidArgumentError(f"unsupported location scheme {parts.scheme!r}: use file:// or s3://")
    if parts.query or parts.fragment:
        raise InvalidArgumentError("location must not carry a query or fragment")
    path = unquote(parts.path)
    _check_text(path)
    if _ENCODED.search(path):
        # Decoded once, still percent-encoded: a reader that decodes again would see another path.
        raise InvalidArgumentError("location is percent-encoded twice")
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise InvalidArgumentError("file:// locations must be absolute local paths")
        if not path.startswith("/"):
            raise InvalidArgumentError("file:// locations must be absolute")
        path = posixpath.normpath(path)
        if path == "/":
            raise InvalidArgumentError("location must not be the filesystem root")
        return "file://" + path
    bucket = parts.netloc.lower()
    if not bucket:
        raise InvalidArgumentError("s3:// locations need a bucket")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise InvalidArgumentError("s3:// bucket name is not valid (3-63 of a-z, 0-9, '.', '-'; no trailing dot)")
    key = posixpath.normpath("/" + path).lstrip("/") if path.strip("/") else ""
    if not key:
        raise InvalidArgumentError("s3:// locations need a prefix below the bucket")
    return f"s3://{bucket}/{key}"


def local_path(location: str) -> str:
    """The OS path of a canonical ``file://`` location."""
    assert location.startswith("file://"), location
    return os.path.normpath(location[len("file://"):])


def log_dir(location: str) -> str:
    return location + "/_delta_log"


def delta_file(location: str, version: int) -> str:
    """URI of the published (backfilled) commit file of ``version``."""
    return f"{location}/_delta_log/{version:020d}.json"


def staged_file(location: str, commit_dir: str, version: int, uid: str) -> str:
    """URI of an unbackfilled (staged) commit file."""
    return f"{location}/_delta_log/{commit_dir}/{version:020d}.{uid}.json"
