"""Log cleanup of owned tables (part of `commit-owner maintain`): old ``<v>.json``, checkpoints and staged commits.

Like Delta's metadata cleanup, files are removed only when they are older than the table property
``delta.logRetentionDuration`` (default 30 days) AND lie below a checkpoint that keeps every version
inside the retention readable:

* ``expired``: the newest version ``L`` such that ``<0..L>.json`` (those listed) are all older than
  ``now - retention`` (file mtimes, as Delta uses). A time travel to any instant inside the retention
  resolves to ``L`` or later.
* ``boundary``: the newest complete checkpoint ``c <= L`` of a published version, and never above the
  checkpoint ``_last_checkpoint`` names. Versions ``>= c`` stay readable from it, so only files of versions
  ``< c`` go: ``<v>.json``, checkpoint files, and staged commits in ``_commits/`` and ``_staged_commits/``
  (all of them published versions: ``c <= latest_backfilled_version``), each one only if it is itself older
  than the retention. Never ``_last_checkpoint``, the newest checkpoint, any version ``>= c``, anything
  unpublished. Commit rows in the database stay (audit).
* Deleted oldest version first (per version: staged file, ``<v>.json``, then its checkpoint), so a crash
  midway leaves the boundary checkpoint, every version after it and ``_last_checkpoint`` in place: the
  table and its retention window open as before. Only expired versions below the boundary may be left
  unopenable (e.g. ``<11..19>.json`` without checkpoint 10); the next pass removes them.

The ownership proof (``<base>.json`` naming the owner) is discussed in docs/decisions.md ("Log cleanup").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from client.contract.layout import (
    COMMIT_DIRS,
    LAST_CHECKPOINT,
    LOG_DIR,
    parse_checkpoint_file,
    parse_delta_file,
    parse_staged_file,
)
from client.snapshot import complete_checkpoints
from coordinator.ops.checkpoints import parse_duration
from coordinator.storage import StorageBackend

LOG_RETENTION = "delta.logRetentionDuration"
DEFAULT_LOG_RETENTION = "interval 30 days"


def log_retention_seconds(properties: dict[str, str]) -> float:
    """The table's ``delta.logRetentionDuration`` in seconds. Raises InvalidArgumentError naming the property."""
    return parse_duration(properties.get(LOG_RETENTION, DEFAULT_LOG_RETENTION), f"table property {LOG_RETENTION}")


@dataclass
class CleanupReport:
    location: str
    retention_seconds: float
    dry_run: bool
    boundary: int | None = None  # files of versions below it are removable; None: nothing to remove
    files: list[dict[str, Any]] = field(default_factory=list)  # {path (below _delta_log), version, size}
    deleted: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"retentionSeconds": self.retention_seconds, "dryRun": self.dry_run, "keptFrom": self.boundary,
                "files": self.files, "fileCount": len(self.files), "bytes": sum(f["size"] for f in self.files),
                "deleted": self.deleted}


def _kind_order(name: str) -> int:
    """Within one version: the staged file first, then ``<v>.json``, the checkpoint last (it serves later versions)."""
    base = name.rsplit("/", 1)[-1]
    if parse_staged_file(base) is not None and "/" in name:
        return 0
    return 1 if parse_delta_file(base) is not None else 2


async def _hint_version(backend: StorageBackend, location: str) -> int | None:
    try:
        hint = json.loads(await backend.read(f"{location}/{LOG_DIR}/{LAST_CHECKPOINT}"))
    except (FileNotFoundError, ValueError):
        return None
    v = hint.get("version") if isinstance(hint, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


async def clean_log(backend: StorageBackend, location: str, published: int, retention_seconds: float, *,
                    now_ms: int, dry_run: bool) -> CleanupReport:
    """List (``dry_run``) or delete the expired log files of ``location`` whose published version is ``published``.

    Raises OSError (storage); a failed delete stops the pass with the older files already gone, which
    leaves the log as a completed pass up to that version would.
    """
    rep = CleanupReport(location=location, retention_seconds=retention_seconds, dry_run=dry_run)
    cutoff = now_ms - int(retention_seconds * 1000)
    root = f"{location}/{LOG_DIR}/"
    infos = {f.path[len(root):]: f for f in await backend.walk(f"{location}/{LOG_DIR}") if f.path.startswith(root)}
    top = [n for n in infos if "/" not in n]
    deltas = {v: infos[n] for n in top if (v := parse_delta_file(n)) is not None and v <= published}
    expired = -1
    for v in sorted(deltas):  # stop at the first young (or missing-in-between) version: conservative
        if deltas[v].modification_time > cutoff or (expired >= 0 and v != expired + 1):
            break
        expired = v
    checkpoints = [v for v in complete_checkpoints(top) if v <= min(published, expired)]
    hint = await _hint_version(backend, location)
    if hint is not None:
        checkpoints = [v for v in checkpoints if v <= hint]
    if not checkpoints:
        return rep
    rep.boundary = boundary = max(checkpoints)
    victims: list[tuple[int, int, str]] = []
    for name, info in infos.items():
        parts = name.split("/")
        if len(parts) == 1:
            v = parse_delta_file(name)
            if v is None:
                cp = parse_checkpoint_file(name)
                v = cp[0] if cp else None
        elif len(parts) == 2 and parts[0] in COMMIT_DIRS:
            staged = parse_staged_file(parts[1])
            v = staged.version if staged else None
        else:
            v = None
        if v is None or v >= boundary or info.modification_time > cutoff:
            continue
        victims.append((v, _kind_order(name), name))
    for v, _, name in sorted(victims):
        rep.files.append({"path": f"{LOG_DIR}/{name}", "version": v, "size": infos[name].size})
    if not dry_run:
        for item in rep.files:
            await backend.delete(f"{location}/{item['path']}")  # already gone (another pass) is no error
            rep.deleted += 1
    return rep
