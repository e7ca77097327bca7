"""The backfiller: copies ratified commits to ``_delta_log/<v:020>.json``, strictly in version order."""

from backfill.publisher import BackfillResult, ForeignCommitFileError, backfill_table
from backfill.worker import Backfiller

__all__ = ["Backfiller", "BackfillResult", "ForeignCommitFileError", "backfill_table"]
