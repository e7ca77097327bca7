"""The backfiller: copies ratified commits to ``_delta_log/<v:020>.json``, strictly in version order."""

from .publisher import BackfillResult, ForeignCommitFileError, backfill_table
from .worker import Backfiller

__all__ = ["Backfiller", "BackfillResult", "ForeignCommitFileError", "backfill_table"]
