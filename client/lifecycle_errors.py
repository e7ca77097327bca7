"""Errors of the table lifecycle and the snapshot reader, in the project's one error family.

They subclass the classes of :mod:`client.errors` whose handling they share (a caller catching
``InvalidArgumentError`` also catches ``NotADeltaTableError``), and carry their own ``code`` so the
server can answer them with the same envelope.
"""

from __future__ import annotations

from .errors import (
    CommitFailedError,
    CommitOwnerError,
    InvalidArgumentError,
    TableAlreadyExistsError,
    UnavailableError,
)


class NotADeltaTableError(InvalidArgumentError):
    """The location holds no Delta log (no ``_delta_log/<v>.json`` and no checkpoint) (400)."""

    code = "NOT_A_DELTA_TABLE"


class TableOwnedElsewhereError(TableAlreadyExistsError):
    """The table's properties already name a commit owner; release it there first (409)."""

    code = "TABLE_ALREADY_OWNED"


class VersionMismatchError(InvalidArgumentError):
    """The version given does not match the table's log (400)."""

    code = "VERSION_MISMATCH"


class VersionNotFoundError(InvalidArgumentError):
    """The requested snapshot version does not exist (yet) (400)."""

    code = "VERSION_NOT_FOUND"


class OwnershipProposalLostError(CommitFailedError):
    """The ownership commit lost its put-if-absent to a filesystem writer; the owner forgot the proposal.

    Retryable: read the table again and take ownership at its new version (true, true).
    """

    code = "OWNERSHIP_PROPOSAL_LOST"
    http_status = 409
    retryable = True
    conflict = True


class IncompleteLogError(CommitOwnerError):
    """The log lacks a version needed to build the snapshot (deleted or never published) (500)."""

    code = "INCOMPLETE_LOG"


class SnapshotRaceError(UnavailableError):
    """Listing and the owner's answer kept disagreeing after several re-lists; try again (503, retryable)."""

    code = "SNAPSHOT_RACE"


__all__ = [
    "NotADeltaTableError",
    "TableOwnedElsewhereError",
    "VersionMismatchError",
    "VersionNotFoundError",
    "OwnershipProposalLostError",
    "IncompleteLogError",
    "SnapshotRaceError",
]

# Replies carrying these codes come back as these classes (client.errors maps the core codes).
from .errors import _BY_CODE  # noqa: E402

_BY_CODE.update({cls.code: cls for cls in (NotADeltaTableError, TableOwnedElsewhereError, VersionMismatchError,
                                           VersionNotFoundError, OwnershipProposalLostError)})
_BY_CODE.setdefault("OWNERSHIP_PUBLISHED", InvalidArgumentError)
