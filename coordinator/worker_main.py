"""`commit-owner backfill-worker`: the backfiller alone, until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal

from backfill.worker import Backfiller

from .settings import Settings
from .storage import StorageRouter
from .store import OwnershipStore, SchemaOutOfDateError, check_schema, create_engine

log = logging.getLogger("commit_owner.worker")


async def run_worker(settings: Settings) -> int:
    engine = create_engine(settings.database_url, pool_size=settings.db_pool_size, timeout=settings.request_timeout_seconds)
    storage = StorageRouter(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        try:
            await check_schema(engine)
        except SchemaOutOfDateError as e:
            log.error("%s", e)
            return 3
        worker = Backfiller(OwnershipStore(engine), storage, settings, background=True)
        await worker.start()
        log.info("backfill worker %s running", worker.holder)
        await stop.wait()
        await worker.stop()
        return 0
    finally:
        await storage.close()
        await engine.dispose()
