"""The Delta log layout: the one home of file names, commit folders and location spelling.

Standard library only (the client keeps no server dependency); the service, the backfiller, the janitor,
the lifecycle and the snapshot reader all import from here. Nothing here touches storage or the network.

* Locations: one canonical spelling per table (``file:///abs/path``, ``s3://bucket/prefix``,
  ``abfss://<container>@<account>.dfs.core.windows.net/prefix``, ``gs://bucket/prefix``; bucket, container and
  account in lower case as the clouds require), so comparisons, uniqueness and scope prefixes hold.
* ``_delta_log/<v:020>.json``: a published commit; ``<v:020>.checkpoint[.<i:010>.<n:010>].parquet``: a
  classic checkpoint; ``_delta_log/<folder>/<v:020>.<uuid>.json``: a staged (ratified, not yet published)
  commit, in ``_commits`` (the RFC, Delta 3.x) or ``_staged_commits`` (Delta >= 4.0, catalog-managed tables).
* "Already exists" as each backend reports a lost put-if-absent.
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import unicodedata
import uuid
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

from client.contract.errors import InvalidArgumentError

LOG_DIR = "_delta_log"
COMMITS_DIR = "_commits"
STAGED_COMMITS_DIR = "_staged_commits"
#: The folders a staged commit may live in, below ``_delta_log``.
COMMIT_DIRS = (COMMITS_DIR, STAGED_COMMITS_DIR)
#: Other names below ``_delta_log`` that readers open: the checkpoint hint and the V2-checkpoint sidecars.
LAST_CHECKPOINT = "_last_checkpoint"
SIDECARS_DIR = "_sidecars"
#: The first character of every versioned file name below ``_delta_log`` (``<v:020>.json``, checkpoints,
#: ``.crc``): versions are zero-padded to 20 digits and a Delta version (a long) stays below 10**19.
VERSIONED_NAME_START = "0"


def check_commit_dir(name: str) -> str:
    """``name`` when it is a staged-commit folder. Raises InvalidArgumentError naming the allowed ones."""
    if name not in COMMIT_DIRS:
        raise InvalidArgumentError(f"commit folder must be one of {', '.join(COMMIT_DIRS)}, got {name!r}")
    return name


# -- file names ---------------------------------------------------------------------------------------------

_DELTA_FILE = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_FILE = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
_STAGED_FILE = re.compile(r"^(\d{20})\.([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.json$")


class StagedName(NamedTuple):
    version: int
    uid: str


def random_uuid() -> str:
    """A random (version 4) UUID in its canonical spelling, as ``str(uuid.uuid4())`` gives it, for less than half
    its cost (a commit takes one or two)."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # the RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def delta_file_name(version: int) -> str:
    """``<v:020>.json``: the published commit of ``version``."""
    return f"{version:020d}.json"


def staged_file_name(version: int, uid: str | None = None) -> str:
    """``<v:020>.<uuid>.json``: a staged commit (a fresh uuid unless ``uid`` is given)."""
    return f"{version:020d}.{uid or random_uuid()}.json"


def checkpoint_file_names(version: int, parts: int = 1) -> list[str]:
    """The file names of a classic checkpoint of ``version`` in ``parts`` parts."""
    if parts == 1:
        return [f"{version:020d}.checkpoint.parquet"]
    return [f"{version:020d}.checkpoint.{i:010d}.{parts:010d}.parquet" for i in range(1, parts + 1)]


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_INDEX = {c: i for i, c in enumerate(_Z85)}


def z85_decode(text: str) -> bytes:
    """The bytes of Z85 ``text`` (ZeroMQ's Base85, as Delta spells deletion vectors: 5 characters per 4 bytes).
    Raises ValueError."""
    if len(text) % 5 or any(c not in _Z85_INDEX for c in text):
        raise ValueError(f"{text[:40]!r} is not Z85 text")
    raw = b""
    for i in range(0, len(text), 5):
        n = 0
        for c in text[i:i + 5]:
            n = n * 85 + _Z85_INDEX[c]
        if n >= 1 << 32:
            raise ValueError(f"{text[:40]!r} is not Z85 text")
        raw += n.to_bytes(4, "big")
    return raw


def deletion_vector_file(storage_type: str | None, path_or_inline_dv: str | None) -> str | None:
    """Where a deletion vector's file lies: a path relative to the table (``storageType`` ``u``: an optional
    random-prefix folder, then ``deletion_vector_<uuid>.bin`` with the uuid Z85-encoded in the last 20
    characters), the absolute path as given (``p``), or None (``i``, inline: no file). Raises
    InvalidArgumentError for an undecodable ``u`` value."""
    if storage_type == "p":
        return path_or_inline_dv
    if storage_type != "u":
        return None
    text = path_or_inline_dv or ""
    prefix, encoded = text[:-20], text[-20:]
    try:
        raw = z85_decode(encoded) if len(encoded) == 20 else b""
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise InvalidArgumentError(f"deletion vector path {text!r} does not end in a 20-character Z85 uuid")
    name = f"deletion_vector_{uuid.UUID(bytes=raw)}.bin"
    return f"{prefix}/{name}" if prefix else name


def parse_delta_file(name: str) -> int | None:
    """The version of a published commit file name, else None."""
    m = _DELTA_FILE.match(name)
    return int(m.group(1)) if m else None


def parse_checkpoint_file(name: str) -> tuple[int, int, int] | None:
    """``(version, part, parts)`` of a classic checkpoint file name (single part is ``(v, 1, 1)``), else None."""
    m = _CHECKPOINT_FILE.match(name)
    if not m:
        return None
    if m.group(2) is None:
        return int(m.group(1)), 1, 1
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def parse_staged_file(name: str) -> StagedName | None:
    """``(version, uuid)`` of a staged commit file name (one path segment), else None."""
    m = _STAGED_FILE.match(name)
    return StagedName(int(m.group(1)), m.group(2)) if m else None


def parse_versioned_file(name: str) -> int | None:
    """The version a published commit or a checkpoint file stands for, else None."""
    v = parse_delta_file(name)
    if v is not None:
        return v
    cp = parse_checkpoint_file(name)
    return cp[0] if cp else None


# -- data files ---------------------------------------------------------------------------------------------

#: Every write puts its data files in a fresh folder ``batch-<hex>/`` under the table root, so a write that
#: ends without a commit is undone by deleting that one folder.
BATCH_PREFIX = "batch-"


def new_batch_folder() -> str:
    """``batch-<32 hex>``: the folder of one write's data files, relative to the table root."""
    return f"{BATCH_PREFIX}{uuid.uuid4().hex}"


def data_file_name(index: int) -> str:
    """``part-<i:05>-<uuid>.parquet``: the name of one data file of a write."""
    return f"part-{index:05d}-{uuid.uuid4()}.parquet"


# -- locations ----------------------------------------------------------------------------------------------

#: The canonical schemes: local disk, S3, Azure (ADLS Gen2 / Blob) and Google Cloud Storage.
SUPPORTED_SCHEMES = ("file", "s3", "abfss", "gs")
_S3_SCHEMES = ("s3", "s3a", "s3n")
#: Azure spellings with the account in the host (``<container>@<account>.<dfs|blob>.core.windows.net``): every one
#: is the same table as its ``abfss://`` spelling. ``https://<account>.<dfs|blob>.core.windows.net/<container>/``
#: is accepted too.
_AZURE_SCHEMES = ("abfss", "abfs", "az", "azure", "wasbs", "wasb", "adl")
_GCS_SCHEMES = ("gs", "gcs")
AZURE_SUFFIX = ".dfs.core.windows.net"
_AZURE_HOST = re.compile(r"^([a-z0-9]{3,24})\.(?:dfs|blob)\.core\.windows\.net$")
_AZURE_CONTAINER = re.compile(r"^(?=.{3,63}$)[a-z0-9](?:[a-z0-9]|-(?!-))*[a-z0-9]$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_GCS_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")
_ENCODED = re.compile(r"%[0-9A-Fa-f]{2}")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_BUCKET_ONLY = re.compile(r"^(s3a?|s3n|gs|gcs)://([^/]+)/*$", re.I)
_CONTAINER_ONLY = re.compile(r"^(abfss?|az|azure|wasbs?|adl)://([^/@]+@[^/]+)/*$", re.I)
_SPELLINGS = "an absolute path, file://, s3://, abfss://<container>@<account>.dfs.core.windows.net/ or gs:// URI"


def _check_text(text: str) -> None:
    """Refuse characters that could make two spellings of one location compare different (or the reverse)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InvalidArgumentError("location contains control characters")
    if unicodedata.normalize("NFKC", text) != text:
        # Full-width dots and slashes, ligatures, ...: look-alikes that a reader may fold into '..' or '/'.
        raise InvalidArgumentError("location contains Unicode characters that change under NFKC normalisation "
                                   "(look-alikes); spell it in plain characters")


def normalize_location(location: str) -> str:
    """The canonical URI of a table location.

    ``/abs/path`` and ``file:/abs/path`` become ``file:///abs/path``; ``s3a://``, ``S3://`` and the bucket's
    case become ``s3://bucket``; every Azure spelling that names the account (``abfs[s]://``, ``az://``,
    ``wasb[s]://`` with ``<container>@<account>.dfs|blob.core.windows.net``, or
    ``https://<account>.dfs|blob.core.windows.net/<container>/``) becomes
    ``abfss://<container>@<account>.dfs.core.windows.net/<path>``; ``gcs://`` becomes ``gs://``. ``.``/``..``
    segments are resolved and a trailing slash dropped. Raises InvalidArgumentError for anything else (relative
    paths, other schemes, empty parts, an Azure spelling without its account).
    """
    if not isinstance(location, str) or not location.strip():
        raise InvalidArgumentError("location must be a non-empty string")
    loc = location.strip()
    _check_text(loc)
    if loc.startswith("/"):
        loc = "file://" + loc
    elif not _SCHEME.match(loc):
        raise InvalidArgumentError(f"location must be {_SPELLINGS}, got {location!r}")
    try:
        parts = urlsplit(loc)
    except ValueError:
        raise InvalidArgumentError("location is not a valid URI") from None
    scheme = parts.scheme.lower()
    netloc, path = parts.netloc, unquote(parts.path)
    if scheme == "https" and _AZURE_HOST.match(netloc.lower()):
        container, _, rest = path.lstrip("/").partition("/")
        scheme, netloc, path = "abfss", f"{container}@{netloc}", "/" + rest
    if scheme in _S3_SCHEMES:
        scheme = "s3"
    elif scheme in _AZURE_SCHEMES:
        scheme = "abfss"
    elif scheme in _GCS_SCHEMES:
        scheme = "gs"
    if scheme not in SUPPORTED_SCHEMES:
        raise InvalidArgumentError(f"unsupported location scheme {parts.scheme!r}: use file://, s3://, abfss:// "
                                   "or gs://")
    if parts.query or parts.fragment:
        raise InvalidArgumentError("location must not carry a query or fragment")
    _check_text(path)
    if _ENCODED.search(path):
        # Decoded once, still percent-encoded: a reader that decodes again would see another path.
        raise InvalidArgumentError("location is percent-encoded twice")
    if scheme == "file":
        if netloc not in ("", "localhost"):
            raise InvalidArgumentError("file:// locations must be absolute local paths")
        if not path.startswith("/"):
            raise InvalidArgumentError("file:// locations must be absolute")
        path = posixpath.normpath(path)
        if path == "/":
            raise InvalidArgumentError("location must not be the filesystem root")
        return "file://" + path
    root = _container_root(scheme, netloc)
    key = posixpath.normpath("/" + path).lstrip("/") if path.strip("/") else ""
    if not key:
        raise InvalidArgumentError(f"{scheme}:// locations need a prefix below the "
                                   f"{'container' if scheme == 'abfss' else 'bucket'}")
    return f"{root}/{key}"


def _container_root(scheme: str, netloc: str) -> str:
    """The canonical ``<scheme>://<bucket or container@account host>`` of a cloud location."""
    if scheme == "s3":
        return f"s3://{_bucket(netloc)}"
    if scheme == "gs":
        bucket = netloc.lower()
        if not _GCS_BUCKET.match(bucket) or ".." in bucket:
            raise InvalidArgumentError(f"gs:// bucket name {netloc!r} is not valid (3-63 of a-z, 0-9, '.', '_', "
                                       "'-'; starting and ending with a letter or digit)")
        return f"gs://{bucket}"
    container, at, host = netloc.lower().rpartition("@")
    if not at:
        raise InvalidArgumentError(
            f"Azure locations must name the storage account: abfss://<container>@<account>{AZURE_SUFFIX}/<path> "
            f"(got {netloc!r} without '@<account>{AZURE_SUFFIX}')")
    m = _AZURE_HOST.match(host)
    if not m:
        raise InvalidArgumentError(f"Azure host {host!r} is not <account>{AZURE_SUFFIX} (or .blob.core.windows.net"
                                   "; the account is 3-24 of a-z, 0-9)")
    if not _AZURE_CONTAINER.match(container):
        raise InvalidArgumentError(f"Azure container name {container!r} is not valid (3-63 of a-z, 0-9 and single "
                                   "'-', starting and ending with a letter or digit)")
    return f"abfss://{container}@{m.group(1)}{AZURE_SUFFIX}"


def _bucket(netloc: str) -> str:
    bucket = netloc.lower()
    if not bucket:
        raise InvalidArgumentError("s3:// locations need a bucket")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise InvalidArgumentError("s3:// bucket name is not valid (3-63 of a-z, 0-9, '.', '-'; no trailing dot)")
    return bucket


def normalize_prefix(prefix: str) -> str:
    """Canonical spelling of a location prefix (an allowed root, a token scope): a whole ``s3://bucket``,
    ``gs://bucket`` or ``abfss://<container>@<account>.dfs.core.windows.net``, or a canonical location. Raises
    InvalidArgumentError."""
    text = prefix.strip()
    m = _BUCKET_ONLY.match(text)
    if m:
        scheme = "gs" if m.group(1).lower() in _GCS_SCHEMES else "s3"
        return _container_root(scheme, m.group(2))
    m = _CONTAINER_ONLY.match(text)
    if m:
        return _container_root("abfss", m.group(2))
    return normalize_location(text)


class CloudPlace(NamedTuple):
    """A canonical cloud location taken apart: ``bucket`` is the S3 or GCS bucket or the Azure container,
    ``account`` the Azure storage account (empty elsewhere), ``key`` the path below the bucket (no slashes
    at either end)."""

    scheme: str
    account: str
    bucket: str
    key: str


def split_cloud(location: str) -> CloudPlace:
    """A canonical ``s3://``, ``gs://`` or ``abfss://`` URI (a location or a file below one) taken apart."""
    scheme, _, rest = location.partition("://")
    netloc, _, key = rest.partition("/")
    if scheme == "abfss":
        container, _, host = netloc.partition("@")
        return CloudPlace(scheme, host[: -len(AZURE_SUFFIX)], container, key.strip("/"))
    if scheme not in ("s3", "gs"):
        raise ValueError(f"not a canonical cloud location: {location[:200]!r}")
    return CloudPlace(scheme, "", netloc, key.strip("/"))


def object_key(uri: str) -> str:
    """``<bucket>/<key>`` of a canonical cloud URI, as fsspec filesystems (s3fs, gcsfs, adlfs) spell a path."""
    p = split_cloud(uri)
    return f"{p.bucket}/{p.key}" if p.key else p.bucket


def has_scheme(text: str) -> bool:
    """Whether ``text`` starts with a URI scheme (``file:``, ``s3://``, ...)."""
    return bool(_SCHEME.match(text))


def is_local(location: str) -> bool:
    return location.startswith("file://")


def local_path(location: str) -> str:
    """The OS path of a canonical ``file://`` location."""
    if not is_local(location):
        raise ValueError(f"not a file:// location: {location!r}")
    return os.path.normpath(location[len("file://"):])


def log_dir(location: str) -> str:
    """URI of a table's ``_delta_log``."""
    return f"{location}/{LOG_DIR}"


def commit_dir_uri(location: str, commit_dir: str) -> str:
    """URI of a table's staged-commit folder."""
    return f"{location}/{LOG_DIR}/{commit_dir}"


def delta_file(location: str, version: int) -> str:
    """URI of the published (backfilled) commit file of ``version``."""
    return f"{location}/{LOG_DIR}/{delta_file_name(version)}"


def staged_file(location: str, commit_dir: str, file_name: str) -> str:
    """URI of a staged commit file called ``file_name`` (see :func:`staged_file_name`)."""
    return f"{commit_dir_uri(location, commit_dir)}/{file_name}"


# -- "already exists", as each backend says it ---------------------------------------------------------------

def lost_put_if_absent(e: BaseException) -> bool:
    """Whether an error from a put-if-absent means the name was already taken.

    Local disk raises FileExistsError. S3 answers a conditional PUT on an existing key with 412
    PreconditionFailed, or 409 ConditionalRequestConflict while another conditional write of the key is
    in flight; s3fs turns these into FileExistsError or a generic OSError (EINVAL) carrying the code.
    """
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, FileExistsError):
            return True
        text = f"{type(seen).__name__} {seen!r}"
        if "PreconditionFailed" in text or "ConditionalRequestConflict" in text or "412" in text:
            return True
        if isinstance(seen, OSError) and seen.errno == errno.EINVAL and "ondition" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False
