"""The one error family of delta-commit-owner, shared by the client and (by name) the server.

Every error the owner can answer carries the JSON envelope
``{"error": {"code", "message", "retryable", "conflict", "latestTableVersion"}}``; the client maps
``code`` back to the class of the same meaning here. A version conflict of the owner's own API also carries
the commits the loser has not seen (``unseenCommits``, ``unseenCommitsComplete``; see
:class:`CommitVersionConflictError`) and its place in the table's line (``retrySlot``,
:class:`RetrySlot`). Classes are grouped by what a caller should do:

* ``retryable and conflict``: you lost the race for this version; rebase and retry at the next one.
* ``retryable and not conflict``: transient; retry the same request (the client does, with the same
  idempotency key).
* neither: give up; the request is wrong or the table refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class CommitOwnerError(Exception):
    """Root of every error raised by delta-commit-owner."""

    code = "INTERNAL"
    http_status = 500
    retryable = False
    conflict = False

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        conflict: bool | None = None,
        latest_table_version: int | None = None,
        code: str | None = None,
        http_status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if retryable is not None:
            self.retryable = retryable
        if conflict is not None:
            self.conflict = conflict
        if code is not None:
            self.code = code
        if http_status is not None:
            self.http_status = http_status
        self.latest_table_version = latest_table_version

    def to_envelope(self) -> dict[str, Any]:
        return {
            "error": {
                "code": self.code,
                "message": self.message,
                "retryable": self.retryable,
                "conflict": self.conflict,
                "latestTableVersion": self.latest_table_version,
            }
        }

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, code={self.code}, retryable={self.retryable}, "
            f"conflict={self.conflict}, latest_table_version={self.latest_table_version})"
        )


class InvalidArgumentError(CommitOwnerError):
    """The request is malformed or names something impossible (400, false/false)."""

    code = "INVALID_ARGUMENT"
    http_status = 400


class CommitFailedError(CommitOwnerError):
    """A commit was not ratified. ``retryable``/``conflict`` say what to do (Delta's CommitFailedException)."""

    code = "COMMIT_FAILED"
    http_status = 409


class InvalidCommitError(CommitFailedError):
    """The commit itself is invalid: version 0, a gap, bad NDJSON, bad inCommitTimestamp (400, false/false)."""

    code = "INVALID_COMMIT"
    http_status = 400


@dataclass(frozen=True)
class RetrySlot:
    """The place a 409 of ``/api/v1`` gives a loser in the table's line (``retrySlot``): send ``ticket`` as the
    ``Commit-Slot`` header with every further proposal to the table. ``position`` 1: the table's next turn is
    yours, retry at once (no backoff), it waits ``turn_ms`` for you; above 1: that many writers minus one go
    first, your proposal is held by the owner until your turn."""

    ticket: str
    position: int
    turn_ms: int

    def to_json(self) -> dict[str, Any]:
        return {"ticket": self.ticket, "position": self.position, "turnMs": self.turn_ms}

    @classmethod
    def from_json(cls, raw: Any) -> RetrySlot | None:
        """The slot an answer carried, or None when it carried none (or none this client can read)."""
        if not isinstance(raw, dict):
            return None
        ticket, position, turn_ms = raw.get("ticket"), raw.get("position"), raw.get("turnMs")
        if not isinstance(ticket, str) or not ticket or type(position) is not int or type(turn_ms) is not int:
            return None
        return cls(ticket, position, turn_ms)


class CommitVersionConflictError(CommitFailedError):
    """Another commit already holds this version; rebase onto ``latest_table_version`` (409, true/true).

    From the owner's ``/api/v1``, the answer also carries the ratified commits at and after the version that
    was asked for, ascending, as ``getCommits`` spells them (``unseen_commits``, at most a bounded number), and
    ``unseen_commits_complete``: whether they are every version from the one asked for up to
    ``latest_table_version``. Complete, a writer rebases on them without asking the owner again. Both are None
    when the answer did not carry them (another API, an older owner).
    """

    code = "COMMIT_VERSION_CONFLICT"
    http_status = 409
    retryable = True
    conflict = True
    unseen_commits: list[dict[str, Any]] | None = None
    unseen_commits_complete: bool | None = None
    #: The loser's place in the table's line (``retrySlot``), None when the answer carried none.
    retry_slot: RetrySlot | None = None

    def to_envelope(self) -> dict[str, Any]:
        envelope = super().to_envelope()
        if self.unseen_commits is not None:
            envelope["error"]["unseenCommits"] = self.unseen_commits
            envelope["error"]["unseenCommitsComplete"] = bool(self.unseen_commits_complete)
        if self.retry_slot is not None:
            envelope["error"]["retrySlot"] = self.retry_slot.to_json()
        return envelope


class TransactionConflictError(CommitFailedError):
    """A multi-table transaction was refused because at least one of its tables had moved past the version it
    proposed; NONE of its commits was ratified (409, conflict; retryable when every refusal is).

    ``tables`` lists each table that refused, in table-id order, as
    ``{"tableId", "version", "code", "message", "retryable", "conflict", "latestTableVersion"}`` plus, for a
    version conflict, ``unseenCommits`` and ``unseenCommitsComplete`` as a single commit's conflict carries
    them: rebase those tables and send the whole transaction again.
    """

    code = "TRANSACTION_CONFLICT"
    http_status = 409
    retryable = True
    conflict = True
    tables: list[dict[str, Any]] | None = None

    def to_envelope(self) -> dict[str, Any]:
        envelope = super().to_envelope()
        envelope["error"]["tables"] = list(self.tables or [])
        return envelope


class TableNotAcceptingCommitsError(CommitFailedError):
    """The table no longer takes commits through this owner (released or fenced) (409, false/false)."""

    code = "TABLE_NOT_ACCEPTING_COMMITS"
    http_status = 409


class IdempotencyKeyReusedError(CommitFailedError):
    """An idempotency key was sent again with a different body or version (422, false/false)."""

    code = "IDEMPOTENCY_KEY_REUSED"
    http_status = 422


class TooManyUnbackfilledCommitsError(CommitFailedError):
    """The table's backlog of unbackfilled commits is full; backfill, then retry (429, true/false)."""

    code = "TOO_MANY_UNBACKFILLED_COMMITS"
    http_status = 429
    retryable = True


class LogAheadOfStoreError(CommitFailedError):
    """The table's ``_delta_log`` holds a published version beyond the latest version the owner's store records
    (the store was restored from an older backup): nothing was ratified, and the table takes no commits until an
    operator runs ``commit-owner tables reconcile``. Retry the same request later; no rebase helps
    (503, true/false)."""

    code = "LOG_AHEAD_OF_STORE"
    http_status = 503
    retryable = True


class ForeignCommitFileError(CommitOwnerError):
    """``_delta_log/<v>.json`` exists with bytes the owner did not ratify: the table is fenced (409)."""

    code = "FOREIGN_COMMIT_FILE"
    http_status = 409


class TableNotFoundError(CommitOwnerError):
    """No table with this id or location is registered (404)."""

    code = "TABLE_NOT_FOUND"
    http_status = 404


class TableAlreadyExistsError(CommitOwnerError):
    """An owned table already holds this location (409)."""

    code = "TABLE_ALREADY_EXISTS"
    http_status = 409


class NotFoundError(CommitOwnerError):
    """No catalog, schema, staging table or table name of this name exists (404)."""

    code = "NOT_FOUND"
    http_status = 404


class AlreadyExistsError(CommitOwnerError):
    """A catalog, schema or table name of this name already exists (409)."""

    code = "ALREADY_EXISTS"
    http_status = 409


class PayloadTooLargeError(CommitOwnerError):
    """The request body is larger than the configured limit (413)."""

    code = "PAYLOAD_TOO_LARGE"
    http_status = 413


class UnauthenticatedError(CommitOwnerError):
    """No credentials or bad credentials (401)."""

    code = "UNAUTHENTICATED"
    http_status = 401


class PermissionDeniedError(CommitOwnerError):
    """Valid credentials without the right for this table or action (403)."""

    code = "PERMISSION_DENIED"
    http_status = 403


class LocationNotAllowedError(PermissionDeniedError):
    """The location lies outside every root the owner is configured to manage (403)."""

    code = "LOCATION_NOT_ALLOWED"


class UnavailableError(CommitOwnerError):
    """The database or storage cannot be reached, or the service is shutting down (503, true/false)."""

    code = "UNAVAILABLE"
    http_status = 503
    retryable = True


class CommitStateUnknownError(CommitOwnerError):
    """The client gave up without learning whether its commit landed (retries exhausted on transient errors).

    Ask the owner (``get_commits`` / ``get_table``) before committing the same change again, or
    resend with the same idempotency key, which can never create a second version.
    """

    code = "COMMIT_STATE_UNKNOWN"
    http_status = 0
    retryable = True


class InternalError(CommitOwnerError):
    """A bug in the owner; the message never carries a stack trace (500)."""

    code = "INTERNAL"
    http_status = 500


# Errors of the table lifecycle and the snapshot reader (client/lifecycle.py, client/snapshot.py).

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


class OwnershipPublishedError(InvalidArgumentError):
    """The table's first commit is published naming this owner: it is owned and cannot be forgotten;
    release it instead (400)."""

    code = "OWNERSHIP_PUBLISHED"


class IncompleteLogError(CommitOwnerError):
    """The log lacks a version needed to build the snapshot (deleted or never published) (500)."""

    code = "INCOMPLETE_LOG"


class SnapshotRaceError(UnavailableError):
    """Listing and the owner's answer kept disagreeing after several re-lists; try again (503, retryable)."""

    code = "SNAPSHOT_RACE"


class CheckpointUnreadableError(CommitOwnerError):
    """A checkpoint is needed but cannot be read (pyarrow missing, or the file is damaged) (500)."""

    code = "CHECKPOINT_UNREADABLE"


class TableChangedError(CommitFailedError):
    """An overwrite lost the race to a commit that changed the table; nothing was committed (false/true).

    Re-run the overwrite against the new state if it should still replace everything.
    """

    code = "TABLE_CHANGED"
    http_status = 409
    retryable = False
    conflict = True


# Errors of the service's own start-up and commands (never on the wire).

class SchemaOutOfDateError(CommitOwnerError):
    """The database has not been migrated to the schema this version of the service needs (exit code 3)."""

    code = "SCHEMA_OUT_OF_DATE"
    http_status = 503


# Errors of the delta-spark bridge (client/spark/bridge.py): raised in the driver, never sent by the owner.

class DeltaSparkUnavailableError(CommitOwnerError):
    """The driver JVM lacks what delta-spark's commit-coordinator API needs: delta-spark itself (>= 3.3), or
    the AWS SDK v1 DynamoDB classes its ``CommitCoordinatorProvider`` loads. The message says what to add."""

    code = "DELTA_SPARK_UNAVAILABLE"
    http_status = 0


class CommitDirMismatchError(CommitOwnerError):
    """The owner stages this table's commits in a folder this Delta version does not read.

    Delta >= 4.0 reads only ``_delta_log/_staged_commits``, Delta 3.3 only ``_delta_log/_commits``.
    """

    code = "COMMIT_DIR_MISMATCH"
    http_status = 0


_BY_CODE: dict[str, type[CommitOwnerError]] = {
    cls.code: cls
    for cls in (
        InvalidArgumentError,
        CommitFailedError,
        InvalidCommitError,
        CommitVersionConflictError,
        TransactionConflictError,
        TableNotAcceptingCommitsError,
        IdempotencyKeyReusedError,
        TooManyUnbackfilledCommitsError,
        LogAheadOfStoreError,
        ForeignCommitFileError,
        TableNotFoundError,
        TableAlreadyExistsError,
        NotFoundError,
        AlreadyExistsError,
        PayloadTooLargeError,
        UnauthenticatedError,
        PermissionDeniedError,
        LocationNotAllowedError,
        UnavailableError,
        InternalError,
        NotADeltaTableError,
        TableOwnedElsewhereError,
        VersionMismatchError,
        VersionNotFoundError,
        OwnershipProposalLostError,
        OwnershipPublishedError,
    )
}


# Replies without a known code (a proxy's 401, say) still map to the class their status means.
_BY_STATUS: dict[int, type[CommitOwnerError]] = {401: UnauthenticatedError, 403: PermissionDeniedError}


def error_from_envelope(status: int, body: Any) -> CommitOwnerError:
    """Rebuild the exception a server reply describes (unknown shapes become a generic error)."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        cls = _BY_STATUS.get(status, UnavailableError if status >= 500 else CommitOwnerError)
        return cls(f"HTTP {status} without an error envelope", http_status=status)
    code = str(err.get("code", "INTERNAL"))
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status, CommitOwnerError)
    error = cls(
        str(err.get("message", "")),
        retryable=bool(err.get("retryable", False)),
        conflict=bool(err.get("conflict", False)),
        latest_table_version=err.get("latestTableVersion"),
        code=code,
        http_status=status,
    )
    unseen = err.get("unseenCommits")
    if isinstance(error, CommitVersionConflictError) and isinstance(unseen, list):
        error.unseen_commits = [c for c in unseen if isinstance(c, dict)]
        error.unseen_commits_complete = err.get("unseenCommitsComplete") is True and len(error.unseen_commits) == len(unseen)
    if isinstance(error, CommitVersionConflictError):
        error.retry_slot = RetrySlot.from_json(err.get("retrySlot"))
    tables = err.get("tables")
    if isinstance(error, TransactionConflictError) and isinstance(tables, list):
        error.tables = [t for t in tables if isinstance(t, dict)]
    return error


__all__ = [name for name in dir() if name.endswith("Error")] + ["RetrySlot", "error_from_envelope"]
