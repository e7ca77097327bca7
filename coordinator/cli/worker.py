"""`commit-owner backfill-worker`: the backfiller alone, until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal

from backfill.worker import Backfiller
from coordinator.runtime.settings import Settings
from coordinator.storage import StorageRouter
from coordinator.store import OwnershipStore, open_engine

log = logging.getLogger("commit_owner.worker")


async def run_worker(settings: Settings) -> int:
    """Run until SIGINT/SIGTERM, then return 0. Raises SchemaOutOfDateError (exit code 3) before starting."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with open_engine(settings.database_url, pool_size=settings.db_pool_size,
                           timeout=settings.request_timeout_seconds,
                           connect_timeout=settings.db_connect_timeout_seconds) as engine:
        storage = StorageRouter(settings)
        try:
            store = OwnershipStore(engine, group_max_rows=settings.group_commit_max_rows)
            worker = Backfiller(store, storage, settings, background=True, ratifies=False)  # publishes all it finds
            await worker.start()
            log.info("backfill worker %s running", worker.holder)
            await stop.wait()
            await worker.stop()
            return 0
        finally:
            await storage.close()
