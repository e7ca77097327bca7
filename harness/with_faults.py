"""`commit-owner serve` or `maintain` with faults injected into log storage, from outside the product:
``python -m harness.with_faults serve`` or ``python -m harness.with_faults maintain [TABLE ...]``.

Settings come from the environment (``COMMIT_OWNER_*``), as for `commit-owner`; the faults from
``HARNESS_STORAGE_FAULTS`` (harness/storage_faults.py). Each storage backend is wrapped inside its deadline
(``StorageRouter``'s ``inner``): ``serve`` builds every worker's app with ``create_app(..., storage_inner=...)``,
``maintain`` opens its storage with it. ``Service`` starts this instead of `commit-owner serve` when its
environment names faults.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from harness.storage_faults import faults_from


def _serve() -> None:
    from coordinator.cli.main import serve_settings
    from coordinator.cli.options import load_settings
    from coordinator.cli.supervisor import metrics_dir
    from coordinator.runtime.settings import worker_count

    inner = faults_from()
    settings = load_settings(None)
    workers = worker_count(settings.workers)

    def app_factory(s: Any) -> Any:
        from coordinator.api.app import create_app  # after metrics_dir: prometheus_client picks its mode at import

        return create_app(s, storage_inner=inner)

    with metrics_dir(workers) as folder:
        serve_settings(settings, workers, folder, app_factory=app_factory)


def _maintain(tables: list[str]) -> int:
    from coordinator.cli.options import load_settings
    from coordinator.ops.maintain import run_maintain
    from coordinator.runtime.logs import setup_logging

    settings = load_settings(None)
    setup_logging(settings.log_level, settings.log_format)
    out = asyncio.run(run_maintain(settings, tuple(tables), storage_inner=faults_from()))
    print(json.dumps(out, indent=2))
    return 1 if out["failures"] else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"] and len(argv) == 1:
        _serve()
        return 0
    if argv[:1] == ["maintain"]:
        return _maintain(argv[1:])
    print("usage: python -m harness.with_faults serve | maintain [TABLE ...]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
