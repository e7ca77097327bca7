"""Wait until a ratified version is published (``_delta_log/<v>.json``), so that every Delta reader sees it.

The owner publishes ratified commits in the background; a plain Delta reader (delta-rs, DuckDB, Spark without
the owner) sees only published versions. :func:`await_published` makes a write's version visible to all of
them before the writer returns: it asks the owner to backfill through that version (the owner's backfill is
idempotent and returns at once when its backfiller already did it). Without the right to ask (a commit-only
token) or when the owner runs no backfiller in its own process (a separate ``backfill-worker``), it watches the
table's published version instead, until ``timeout``.

The commit has landed whatever happens here, so nothing is raised: a version not published in time is a
warning, and the caller gets the published version it saw.
"""

from __future__ import annotations

import logging
import time

from client.contract.errors import CommitOwnerError, PermissionDeniedError, UnavailableError
from client.http import CommitOwnerClient

log = logging.getLogger(__name__)

#: Seconds a writer waits, by default, for its version to be published.
PUBLISH_WAIT_SECONDS = 30.0


def await_published(owner: CommitOwnerClient, table_id: str, version: int, *, location: str = "",
                    timeout: float = PUBLISH_WAIT_SECONDS) -> int:
    """The table's latest published version once it is at least ``version``, or, after ``timeout`` seconds or
    an error that waiting cannot cure, the latest one known (a warning says so). Never raises the owner's
    errors."""
    started = time.monotonic()
    published = -1
    try:
        return owner.backfill_to_version(table_id, version, deadline=timeout).latest_backfilled_version
    except (PermissionDeniedError, UnavailableError) as e:
        reason = e.message  # no right to ask, or no backfiller here: watch the owner's own backfill
    except CommitOwnerError as e:
        return _late(location, version, published, e.message)
    delay = 0.02
    while True:
        try:
            published = owner.get_table(table_id).latest_backfilled_version
        except CommitOwnerError as e:
            return _late(location, version, published, e.message)
        if published >= version:
            return published
        if time.monotonic() - started >= timeout:
            return _late(location, version, published, f"not published within {timeout:.0f} s ({reason})")
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def _late(location: str, version: int, published: int, why: str) -> int:
    log.warning("%s: version %d is committed but not yet published (%s); readers of the published log see "
                "version %s for now; client.read_table reads it through the owner", location or "the table",
                version, why, published if published >= 0 else "an older one")
    return published


__all__ = ["PUBLISH_WAIT_SECONDS", "await_published"]
