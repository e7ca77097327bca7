"""What every cloud's vended credential shares: the access it grants, and the files below ``_delta_log`` that only
the owner writes (an S3 Deny, a GCS boundary's exception; an Azure SAS cannot except them: decision 72)."""

from __future__ import annotations

from typing import Literal

from client.contract.layout import COMMITS_DIR, LAST_CHECKPOINT, LOG_DIR, SIDECARS_DIR, VERSIONED_NAME_START

Access = Literal["read", "write", "create"]


def owner_only_keys(key: str) -> list[str]:
    """The key patterns below a table's ``_delta_log`` that no vended S3 or GCS credential may write or delete."""
    log_prefix = f"{key}/{LOG_DIR}/"
    return [log_prefix + VERSIONED_NAME_START + "*", log_prefix + LAST_CHECKPOINT,
            log_prefix + SIDECARS_DIR + "/*", log_prefix + COMMITS_DIR + "/*"]
