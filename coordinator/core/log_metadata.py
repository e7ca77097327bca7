"""The newest ``metaData`` (and ``protocol``) action of a published Delta log, read the cheap way.

The catalog fills a named table's columns from its log when its creator sent none (decision 40): the
newest ``metaData`` lies in the newest commit file that holds one. Commit files are read newest first, down to
the newest complete checkpoint; a log whose newest ``metaData`` lies only in a checkpoint (Parquet, which the
service does not read) answers None, as does a log without commits.
"""

from __future__ import annotations

from typing import Any

from client.contract.delta_log import parse_actions
from client.contract.errors import CommitOwnerError
from client.contract.layout import delta_file, log_dir, parse_delta_file
from coordinator.storage import StorageBackend

#: At most this many commit files are read for one answer (a checkpoint usually comes every 10 to 100).
MAX_FILES = 200


async def newest_metadata(storage: StorageBackend, location: str) -> dict[str, Any] | None:
    """The newest ``metaData`` action published in the log at ``location`` (None: not found in its commit
    files). Raises UnavailableError when storage cannot be read."""
    return (await newest_actions(storage, location, ("metaData",))).get("metaData")


async def newest_actions(storage: StorageBackend, location: str, kinds: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The newest action of each of ``kinds`` (``metaData``, ``protocol``) published in the log at ``location``,
    by kind; a kind not found in its commit files is missing. Raises UnavailableError when storage cannot be read."""
    from client.snapshot import complete_checkpoints

    names = await storage.list_names(log_dir(location))
    floor = max(complete_checkpoints(names), default=-1)
    versions = sorted((v for v in map(parse_delta_file, names) if v is not None and v > floor), reverse=True)
    found: dict[str, dict[str, Any]] = {}
    for version in versions[:MAX_FILES]:
        try:
            actions = parse_actions(await storage.read(delta_file(location, version)))
        except FileNotFoundError:
            continue  # removed by log cleanup since the listing
        except (CommitOwnerError, ValueError):
            return found  # not a log a reader could replay: nothing more to tell
        for action in actions:
            for kind in kinds:
                body = action.get(kind)
                if isinstance(body, dict) and kind not in found:
                    found[kind] = body
        if len(found) == len(kinds):
            break
    return found
