"""Writing an owner-written staged commit file: put-if-absent, and what a file already there means.

The file ``<v:020>.<uuid>.json`` is named by the proposal's idempotency key, so a file already there is the
earlier attempt of the same proposal: the same bytes make it this attempt's file, other bytes mean the key was
used for something else (IdempotencyKeyReusedError). Storage errors become UnavailableError.
"""

from __future__ import annotations

from typing import Any

from client.contract.errors import IdempotencyKeyReusedError, UnavailableError

from .storage.base import FileInfo


async def write_staged(storage: Any, path: str, data: bytes, uid: str, version: int) -> tuple[FileInfo, bool]:
    """Write ``data`` at ``path`` unless an earlier attempt did; returns its FileInfo and whether this call
    created it (only a created file may be removed after a certain refusal)."""
    try:
        try:
            return await storage.put_if_absent(path, data), True
        except FileExistsError:
            if await storage.read(path) != data:
                raise IdempotencyKeyReusedError(
                    f"idempotency key {uid} was already used for version {version} with different content"
                ) from None
            return await storage.info(path), False
    except OSError as e:
        raise UnavailableError(f"log storage unavailable while writing the commit file: {type(e).__name__}") from e
