"""The synchronous HTTP client of the commit owner (standard library only, safe to share across threads).

Transient failures (connection errors, timeouts, 503, 5xx) are retried with exponential backoff,
full jitter and a total deadline, and every retry is logged (a warning naming the endpoint, the fault, the
retry's number and the time left). A client that has never reached its owner gives up after
``FIRST_CONTACT_TRIES`` quick tries (within ``FIRST_CONTACT_DEADLINE`` seconds) when it cannot connect: a
refused connection on the first contact is almost always a wrong URL or a stopped owner, not a fault worth
two minutes of waiting, and the UnavailableError says which URL and what to check. Once the owner answered,
connection errors are retried as transient (an owner restarting is worth waiting for): reads (GET) for
``connect_deadline`` (10 s by default), so a reader whose table names an owner that moved or stopped fails
quickly with an UnavailableError that says where the endpoint came from, writes for ``deadline``. Commits always carry an
idempotency key (one is generated when the caller gives none) and every retry reuses it, so a retry
after a lost reply can never create a second version: the owner answers it with the original result.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode, urlsplit

from client.backoff import full_jitter
from client.contract.errors import (
    CommitStateUnknownError,
    CommitVersionConflictError,
    PermissionDeniedError,
    TooManyUnbackfilledCommitsError,
    UnavailableError,
    error_from_envelope,
)
from client.contract.layout import COMMITS_DIR
from client.models import Commit, CommitsPage, TableInfo, TransactionResult

Actions = bytes | str | Iterable[Mapping[str, Any] | str]

_NO_BODY = object()

#: Environment variable naming the owner's endpoint: the default of writers without ``endpoint=``, and for
#: readers an override of the endpoint a table's properties name (e.g. after the owner moved).
ENDPOINT_ENV = "COMMIT_OWNER_ENDPOINT"
#: Where an owner listens when nothing says otherwise: `make run`'s address.
DEFAULT_ENDPOINT = "http://127.0.0.1:8080"


def named_endpoint(given: str | None = None) -> str | None:
    """The owner's endpoint when one is named: ``given``, else ``$COMMIT_OWNER_ENDPOINT``; else None (a reader
    then asks the owner its table names)."""
    return given or os.environ.get(ENDPOINT_ENV) or None


def resolve_endpoint(given: str | None = None) -> tuple[str, str | None]:
    """The one rule for where a client or command finds its owner when no table names one: ``given``, else
    ``$COMMIT_OWNER_ENDPOINT``, else :data:`DEFAULT_ENDPOINT`; with where it came from (for errors)."""
    if given:
        return given, None
    named = named_endpoint()
    if named:
        return named, f"from ${ENDPOINT_ENV}"
    return DEFAULT_ENDPOINT, f"the default endpoint; set ${ENDPOINT_ENV} when the owner is elsewhere"
#: Default seconds a read (GET) keeps retrying an owner it cannot connect to (once it was reached).
READ_CONNECT_DEADLINE = 10.0
#: Tries to connect to an owner this client has never reached before it gives up ...
FIRST_CONTACT_TRIES = 3
#: ... and the seconds those tries may take in all (each connect attempt is bounded by what is left).
FIRST_CONTACT_DEADLINE = 3.0
#: The pause before the first of those retries (doubling for the next): an owner still binding its port gets
#: a moment, a wrong URL fails in about a second.
FIRST_CONTACT_PAUSE = 0.25

log = logging.getLogger(__name__)


def encode_actions(actions: Actions) -> bytes:
    """Turn actions into the exact NDJSON bytes of a commit file (one action per line, trailing newline)."""
    if isinstance(actions, bytes):
        return actions
    if isinstance(actions, str):
        return actions.encode("utf-8")
    lines = []
    for a in actions:
        line = a if isinstance(a, str) else json.dumps(a, separators=(",", ":"), ensure_ascii=False)
        lines.append(line.rstrip("\n"))
    return ("\n".join(lines) + "\n").encode("utf-8")


def action_objects(actions: Actions) -> list[Any]:
    """The actions as JSON objects (NDJSON bytes or text are split into their lines)."""
    if isinstance(actions, (bytes, str)):
        text = actions.decode("utf-8") if isinstance(actions, bytes) else actions
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return [json.loads(a) if isinstance(a, str) else dict(a) for a in actions]


class CommitOwnerClient:
    """Client of one commit-owner service.

    :param endpoint: base URL, e.g. ``http://127.0.0.1:8080``; by default ``$COMMIT_OWNER_ENDPOINT``, else
        ``http://127.0.0.1:8080`` (:func:`resolve_endpoint`).
    :param token: bearer token, if the service requires authentication.
    :param timeout: seconds for one HTTP request.
    :param deadline: total seconds a call may spend retrying transient failures.
    :param connect_deadline: seconds a read (GET) may spend failing to connect before it raises
        UnavailableError; writes keep ``deadline``, since an owner restarting is worth waiting for. Both apply
        once the owner has answered this client; before that, ``first_contact_tries`` quick tries within
        ``first_contact_deadline`` seconds decide (a wrong URL or a stopped owner fails within seconds).
    :param origin: where ``endpoint`` came from (e.g. a table property), said in the unreachable error.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        deadline: float = 120.0,
        backoff_base: float = 0.05,
        backoff_max: float = 2.0,
        connect_deadline: float = READ_CONNECT_DEADLINE,
        origin: str | None = None,
        first_contact_tries: int = FIRST_CONTACT_TRIES,
        first_contact_deadline: float = FIRST_CONTACT_DEADLINE,
    ) -> None:
        endpoint, found = resolve_endpoint(endpoint)
        origin = origin or found
        parts = urlsplit(endpoint.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"endpoint must be an http(s) URL, got {endpoint!r}")
        self.endpoint = endpoint.rstrip("/")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._prefix = parts.path.rstrip("/") + "/api/v1"
        self._token = token
        self.timeout = timeout
        self.deadline = deadline
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.connect_deadline = connect_deadline
        self.origin = origin
        self.first_contact_tries = first_contact_tries
        self.first_contact_deadline = first_contact_deadline
        #: True once the owner answered a request of this client (any status).
        self.reached = False
        self._local = threading.local()
        # table id -> this client's ticket in the table's line of racing writers (a 409's retrySlot), sent with
        # every later proposal to that table as Commit-Slot (docs/api.md "Racing writers take turns")
        self._tickets: dict[str, str] = {}

    # -- the Delta commit-owner contract ------------------------------------------------------------

    def register_table(
        self, location: str, *, current_version: int = -1, commit_dir: str = COMMITS_DIR, name: str | None = None,
        table_type: str | None = None,
    ) -> TableInfo:
        """Register ``location`` with the owner; the table's version before ownership is ``current_version``.
        ``name`` (``catalog.schema.table``, optional) makes it visible by name through the Unity Catalog API,
        as ``table_type`` (``MANAGED``: a catalogManaged table; default ``EXTERNAL``).

        Raises TableAlreadyExistsError, InvalidArgumentError, AlreadyExistsError, NotFoundError.
        """
        body: dict[str, Any] = {"location": location, "currentVersion": current_version, "commitDir": commit_dir}
        if name is not None:
            body["name"] = name
        if table_type is not None:
            body["tableType"] = table_type
        return TableInfo.from_json(self._call("POST", "/tables", json_body=body))

    def commit(
        self,
        table_id: str,
        version: int,
        actions: Actions,
        *,
        idempotency_key: str | None = None,
        backfill_on_backlog: bool = True,
    ) -> Commit:
        """Ask the owner to ratify ``actions`` as ``version``.

        Raises CommitFailedError (with ``retryable``/``conflict``/``latest_table_version``),
        TableNotFoundError, CommitStateUnknownError when the outcome could not be learned.
        """
        key = idempotency_key or str(uuid.uuid4())
        data = encode_actions(actions)
        path = f"/tables/{table_id}/commits?" + urlencode({"version": int(version)})
        headers = {"Content-Type": "application/x-ndjson", "Idempotency-Key": key}
        if (ticket := self._tickets.get(table_id)) is not None:
            headers["Commit-Slot"] = ticket
        started = time.monotonic()
        no_backfill_right = False
        while True:
            try:
                return Commit.from_json(self._call("POST", path, body=data, headers=headers, unknown_outcome=True))
            except CommitVersionConflictError as e:
                if e.retry_slot is not None:
                    self._tickets[table_id] = e.retry_slot.ticket
                raise
            except TooManyUnbackfilledCommitsError as e:
                if not backfill_on_backlog or time.monotonic() - started > self.deadline:
                    raise
                latest = e.latest_table_version
                if latest is not None and latest >= 0 and not no_backfill_right:
                    try:
                        self.backfill_to_version(table_id, latest)
                        continue
                    except PermissionDeniedError:
                        # backfill needs the admin scope; a commit-only token waits for the owner's own backfiller
                        no_backfill_right = True
                log.warning("commit owner at %s: table %s has a full backlog (429); waiting for its backfill, "
                            "%.0f s left", self.endpoint, table_id, self.deadline - (time.monotonic() - started))
                self._sleep(1, started)

    def commit_transaction(
        self,
        commits: Sequence[tuple[str, int, Actions]],
        *,
        idempotency_key: str | None = None,
    ) -> TransactionResult:
        """Ask the owner to ratify, together, one commit per table: ``(table_id, version, actions)`` each.

        Every commit is ratified in one database transaction, or none is. Retries after a lost reply reuse the
        idempotency key, so the transaction lands at most once. Raises TransactionConflictError (``tables``
        lists each table that moved on, with the commits it has not seen), the owner's other refusals (each
        naming its table), CommitStateUnknownError when the outcome could not be learned.
        """
        key = idempotency_key or str(uuid.uuid4())
        body = {"commits": [{"tableId": t, "version": int(v), "actions": action_objects(a)} for t, v, a in commits]}
        return TransactionResult.from_json(self._call("POST", "/transactions", json_body=body,
                                                      headers={"Idempotency-Key": key}, unknown_outcome=True))

    def snapshots(self, table_ids: Sequence[str]) -> dict[str, CommitsPage]:
        """Each table's latest ratified version and unpublished commits, all as of one instant (so a reader
        sees a multi-table transaction whole or not at all), by table id. Raises TableNotFoundError."""
        reply = self._call("POST", "/snapshots", json_body={"tableIds": list(table_ids)}, read=True)
        return {str(t["tableId"]): CommitsPage.from_json(t) for t in reply["tables"]}

    def get_commits(
        self, table_id: str, start_version: int | None = None, end_version: int | None = None
    ) -> CommitsPage:
        """Unbackfilled commits in ``[start_version, end_version]``, ascending, and the latest ratified version."""
        q = {}
        if start_version is not None:
            q["startVersion"] = int(start_version)
        if end_version is not None:
            q["endVersion"] = int(end_version)
        path = f"/tables/{table_id}/commits" + ("?" + urlencode(q) if q else "")
        return CommitsPage.from_json(self._call("GET", path))

    def backfill_to_version(
        self, table_id: str, version: int, last_known_backfilled_version: int | None = None,
        *, deadline: float | None = None,
    ) -> TableInfo:
        """Return once every version <= ``version`` exists as ``_delta_log/<v>.json``.

        ``deadline`` bounds this call's retries (default: the client's). Raises PermissionDeniedError (it
        needs the admin right), UnavailableError (e.g. the owner runs no backfiller), TableNotFoundError.
        """
        body: dict[str, Any] = {"version": int(version)}
        if last_known_backfilled_version is not None:
            body["lastKnownBackfilledVersion"] = int(last_known_backfilled_version)
        return TableInfo.from_json(self._call("POST", f"/tables/{table_id}/backfill", json_body=body,
                                              deadline=deadline))

    def get_table(self, table_id: str | None = None, *, location: str | None = None) -> TableInfo:
        """Look a table up by id or by location. Raises TableNotFoundError."""
        if (table_id is None) == (location is None):
            raise ValueError("give exactly one of table_id and location")
        if table_id is not None:
            return TableInfo.from_json(self._call("GET", f"/tables/{table_id}"))
        return TableInfo.from_json(self._call("GET", "/tables?" + urlencode({"location": location})))

    def forget_table(self, table_id: str) -> None:
        """Drop a registration whose first put-if-absent (version 0 or the ownership commit) never landed.

        The owner refuses once the table's first commit is published. Raises TableNotFoundError,
        InvalidArgumentError (already published).
        """
        self._call("DELETE", f"/tables/{table_id}")

    def list_tables(self) -> list[TableInfo]:
        return [TableInfo.from_json(t) for t in self._call("GET", "/tables")["tables"]]

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def __enter__(self) -> CommitOwnerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport ----------------------------------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def _sleep(self, attempt: int, started: float, deadline: float | None = None) -> bool:
        remaining = (self.deadline if deadline is None else deadline) - (time.monotonic() - started)
        if remaining <= 0:
            return False
        time.sleep(min(full_jitter(attempt, self.backoff_base, self.backoff_max), remaining))
        return True

    def _retry(self, what: str, fault: str, attempt: int, started: float, deadline: float | None = None,
               *, of: int | None = None) -> bool:
        """Wait before retry number ``attempt`` of ``what`` and say so (a warning); False when ``deadline`` is
        spent. With ``of`` (a known number of retries) the waits are fixed and grow, 0.25 s, 0.5 s, ..."""
        budget = self.deadline if deadline is None else deadline
        remaining = budget - (time.monotonic() - started)
        if remaining <= 0:
            return False
        if of is None:
            delay = min(full_jitter(attempt, self.backoff_base, self.backoff_max), remaining)
            count = f"retry {attempt}"
        else:
            delay = min(FIRST_CONTACT_PAUSE * 2 ** (attempt - 1), remaining)
            count = f"retry {attempt}/{of}"
        log.warning("commit owner at %s: %s failed (%s); %s in %.2f s (%.1f s left of %.0f s)",
                    self.endpoint, what, fault, count, delay, remaining, budget)
        time.sleep(delay)
        return True

    def _connect(self, conn: http.client.HTTPConnection, started: float | None, budget: float = 0.0) -> None:
        """Open the connection; with ``started``, the attempt is bounded by what is left of ``budget`` seconds."""
        if started is None:
            conn.connect()
            return
        left = budget - (time.monotonic() - started)
        conn.timeout = max(0.1, min(self.timeout, left))
        try:
            conn.connect()
        finally:
            conn.timeout = self.timeout
        if conn.sock is not None:
            conn.sock.settimeout(self.timeout)

    def _unreachable(self, e: BaseException, waited: float) -> str:
        origin = f" ({self.origin})" if self.origin else ""
        return f"commit owner unreachable at {self.endpoint}{origin} after {waited:.1f} s: {e}"

    def _never_reached(self, e: BaseException, tries: int, waited: float) -> str:
        origin = f" ({self.origin})" if self.origin else ""
        return (f"cannot reach the commit owner at {self.endpoint}{origin} ({fault_name(e)}; {tries} tries in "
                f"{waited:.1f} s): is it running (`make run` or `commit-owner serve`), and is the endpoint right "
                f"(${ENDPOINT_ENV}, --endpoint, endpoint=)?")

    def _call(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = _NO_BODY,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        unknown_outcome: bool = False,
        deadline: float | None = None,
        read: bool = False,
    ) -> Any:
        """One request, retried as the module says; ``read``: a POST that only reads (retried as a GET)."""
        hdrs = {"Accept": "application/json"}
        if headers:
            hdrs.update(headers)
        if json_body is not _NO_BODY:
            body = json.dumps(json_body).encode()
            hdrs["Content-Type"] = "application/json"
        if self._token:
            hdrs["Authorization"] = f"Bearer {self._token}"
        started = time.monotonic()
        attempt = 0
        reading = method == "GET" or read
        what = f"{method} {path.split('?')[0]}"
        sent_any = False
        # the first contact's budget: the caller's own bound for this kind of call, if that is shorter
        budget = self.deadline if deadline is None else deadline
        first_budget = min(self.first_contact_deadline, self.connect_deadline if reading else budget)
        while True:
            sent = False
            connecting = False
            first_contact = not self.reached
            try:
                conn = self._connection()
                if conn.sock is None:
                    connecting = True
                    if first_contact:
                        self._connect(conn, started, first_budget)
                    else:
                        self._connect(conn, started if reading else None, self.connect_deadline)
                    connecting = False
                sent_any = True  # from here on the owner may have received it, even if sending fails
                conn.request(method, self._prefix + path, body=body, headers=hdrs)
                sent = True
                resp = conn.getresponse()
                raw = resp.read()
                status = resp.status
                self.reached = True
            except (OSError, http.client.HTTPException) as e:
                self.close()
                if not sent and attempt == 0 and isinstance(e, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)):
                    # a kept-alive connection closed by the server before we used it: reconnect at once
                    attempt += 1
                    continue
                attempt += 1
                if connecting and first_contact:
                    # never reached: a wrong URL or a stopped owner, most likely; a few quick tries, no more
                    if attempt < self.first_contact_tries and self._retry(
                            what, fault_name(e), attempt, started, first_budget,
                            of=self.first_contact_tries - 1):
                        continue
                    raise UnavailableError(self._never_reached(e, attempt, time.monotonic() - started)) from e
                if connecting and reading:
                    if self._retry(what, fault_name(e), attempt, started, self.connect_deadline):
                        continue
                    raise UnavailableError(self._unreachable(e, time.monotonic() - started)) from e
                if self._retry(what, fault_name(e), attempt, started, budget):
                    continue
                if unknown_outcome and sent_any:
                    raise CommitStateUnknownError(
                        f"gave up after {attempt} attempts; the commit may or may not have landed: {e}"
                    ) from e
                raise UnavailableError(self._unreachable(e, time.monotonic() - started)) from e
            try:
                payload = json.loads(raw) if raw else None
            except ValueError:
                payload = None
            if 200 <= status < 300:
                return payload
            err = error_from_envelope(status, payload)
            transient = status >= 500 or (err.retryable and not err.conflict and status != 429)
            if transient:
                attempt += 1
                if self._retry(what, f"{status} {err.code}", attempt, started, budget):
                    continue
                if unknown_outcome and status != 503:
                    raise CommitStateUnknownError(f"gave up after {attempt} attempts: {err.message}") from err
                raise err
            raise err


def fault_name(e: BaseException) -> str:
    """A few words naming a transport fault, for messages: "connection refused", "connect timed out", ..."""
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, socket.gaierror):
        return f"host name not found: {e.strerror or e}"
    if isinstance(e, TimeoutError):
        return "timed out"
    if isinstance(e, ConnectionResetError):
        return "connection reset"
    if isinstance(e, http.client.RemoteDisconnected):
        return "connection closed without a reply"
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
