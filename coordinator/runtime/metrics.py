"""Prometheus metrics of one application (``/metrics``).

Every :class:`Metrics` owns its own ``CollectorRegistry``: several apps in one process (tests, an
embedded owner) never clash over the global registry, and a fresh app starts from zero.

What is measured where:

* commits by outcome, commit latency and conflicts: ``Ratifier.commit`` (core/ratify.py);
* backfill lag (ratification acknowledged -> ``<v>.json`` published), published versions and
  failures: the ``Backfiller``;
* backlog and age of the oldest unbackfilled commit per table that has any (a table with nothing to
  publish has no series), and tables by status: read from the ownership store at scrape time, so the
  figures are right even when another process backfills;
* database errors: SQLAlchemy's ``handle_error`` engine event (integrity violations excluded, they
  are how the database decides a race); storage errors: a wrapper around each storage backend
  (``FileExistsError`` / ``FileNotFoundError`` excluded, they are answers, not failures);
* in-flight requests and requests by route and status: the access-log middleware.

Several worker processes (`serve --workers N`): prometheus_client's multiprocess mode, switched on by
``PROMETHEUS_MULTIPROC_DIR`` (set by `serve` before this module is imported). Each process writes its counters
and histograms to files of that folder and a scrape through any worker sums every worker's files; the
per-table figures are read from the database at scrape time by the worker that answers, so they are exposed
by a collector of that worker alone, never written to the shared files.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import values as prometheus_values
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from coordinator.runtime.timeline import OutcomeTimeline

__all__ = ["Metrics", "CONTENT_TYPE_LATEST", "MaintenanceMetrics", "RecentErrors"]

# In multiprocess mode every increment asks which process it runs in, to switch to that process's files after a
# fork: prometheus_client asks the kernel (``os.getpid``, a system call each time: 6% of a worker's samples under
# 64 writers, decision 62). The pid is known without asking: this process's, updated in every forked child.
_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


def _process_id() -> int:
    return _pid


if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.register_at_fork(after_in_child=_forked)
    prometheus_values.ValueClass = prometheus_values.MultiProcessValue(process_identifier=_process_id)

# Counts of the hot path (requests, commits, statements, storage calls) are added up in this process and written to
# prometheus_client's values once per this many seconds (and before every scrape), not per event: in multiprocess
# mode each write locks and packs into a shared file, about 3% of a busy worker's samples (decision 63).
TALLY_SECONDS = 0.05

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


class Metrics:
    """The metric families of one app, registered in a private registry."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.commits = Counter("commit_owner_commits", "Commit requests by outcome (ok or the error code).",
                               ["outcome"], registry=r)
        self.commit_latency = Histogram("commit_owner_commit_duration_seconds",
                                        "Time to answer a commit request (ratified or refused).",
                                        ["outcome"], buckets=_LATENCY_BUCKETS, registry=r)
        self.conflicts = Counter("commit_owner_commit_conflicts",
                                 "Commits that lost the race for their version (COMMIT_VERSION_CONFLICT).", registry=r)
        self.backfill_lag = Histogram("commit_owner_backfill_lag_seconds",
                                      "Time from a commit's ratification to its publication as _delta_log/<v>.json.",
                                      buckets=_LAG_BUCKETS, registry=r)
        self.backfill_published = Counter("commit_owner_backfill_published_versions",
                                          "Versions this process's backfiller published to _delta_log "
                                          "(or found already there).", registry=r)
        self.backfill_failures = Counter("commit_owner_backfill_failures",
                                         "Background backfill runs that failed (retried with backoff).", registry=r)
        self.table_figures = _TableFigures()
        r.register(self.table_figures)
        self.db_errors = Counter("commit_owner_database_errors",
                                 "Errors raised by the ownership store's database driver (constraint races excluded).",
                                 registry=r)
        self.storage_errors = Counter("commit_owner_storage_errors",
                                      "Failed log-storage operations (existing/missing files excluded).",
                                      ["operation"], registry=r)
        self.storage_timeouts = Counter("commit_owner_storage_timeouts",
                                        "Log-storage operations abandoned at request_timeout_seconds (also counted "
                                        "as errors).", ["operation"], registry=r)
        self.in_flight = Gauge("commit_owner_http_requests_in_flight", "HTTP requests being served.", registry=r,
                               multiprocess_mode="livesum")
        self.requests = Counter("commit_owner_http_requests", "HTTP requests answered, by route and status.",
                                ["method", "route", "status"], registry=r)
        self.request_latency = Histogram("commit_owner_http_request_duration_seconds",
                                         "Time to answer an HTTP request, by route.", ["method", "route"],
                                         buckets=_LATENCY_BUCKETS, registry=r)
        self.janitor_removed = Counter("commit_owner_janitor_removed_orphans",
                                       "Orphan commit files (never ratified) removed by this process's janitor.",
                                       registry=r)
        self.storage_requests = Counter("commit_owner_storage_requests",
                                        "Log-storage operations issued (each is one request to the object store or one file "
                                        "operation).",
                                        ["operation"], registry=r)
        self.db_statements = Counter("commit_owner_database_statements",
                                     "SQL statements sent to the ownership store (each is one database round trip).",
                                     registry=r)
        self.db_transactions = Counter("commit_owner_database_transactions",
                                       "Ownership-store transactions ended, by how they ended.", ["end"], registry=r)
        self.credentials_issued = Counter("commit_owner_credentials_issued",
                                          "Storage credentials vended (temporary table/path credentials), by Unity "
                                          "Catalog operation and kind (s3, azure, gcs, or local: no secret).",
                                          ["operation", "kind"], registry=r)
        self.metrics_reports = Counter("commit_owner_delta_metrics_reports",
                                       "Commit metrics reports received through the Delta REST Catalog API, by kind.",
                                       ["kind"], registry=r)
        self.outcomes = OutcomeTimeline()  # conflicts and refusals per minute, for the browser UI's charts
        # Labelled children by label values: labels() validates and takes a lock on every call, a dict lookup does
        # not (the label sets are small: routes, statuses, outcomes, storage operations).
        self._children: dict[tuple[Any, ...], Any] = {}
        self._tally: dict[Any, float] = {}  # counter or gauge child -> amount not yet written (``bump``)
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop whose timer writes the tally
        for outcome in ("ok", "COMMIT_VERSION_CONFLICT"):
            self.commits.labels(outcome)  # the usual series exist from the start (rate() needs a zero)
        self.storage_errors.labels("put_if_absent")

    # -- hooks ------------------------------------------------------------------------------------

    def child(self, family: Any, *values: str) -> Any:
        """``family.labels(*values)``, kept after its first use."""
        key = (id(family), *values)
        c = self._children.get(key)
        if c is None:
            c = self._children[key] = family.labels(*values)
        return c

    def bump(self, child: Any, amount: float = 1.0) -> None:
        """``child.inc(amount)`` (a counter's or gauge's child, or one value of a histogram's), written with the
        others of the moment by a timer of the app's event loop (``TALLY_SECONDS``) or at the next scrape; at once
        when called outside that loop (a thread, a test)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            child.inc(amount)
            return
        if loop is not self._loop:
            if self._loop is not None and not self._loop.is_closed():  # another loop's app shares these metrics
                child.inc(amount)
                return
            self.flush()  # what the closed loop's timer never wrote
            self._loop = loop
        tally = self._tally
        if not tally:
            loop.call_later(TALLY_SECONDS, self.flush)
        tally[child] = tally.get(child, 0.0) + amount

    def observe(self, child: Any, amount: float) -> None:
        """``child.observe(amount)`` (a histogram's child), added up as ``bump`` adds: its sum and its bucket are
        the two values an observation increments. A prometheus_client whose histogram no longer keeps them so
        gets ``observe`` itself (tests/ops/test_metrics.py compares the two)."""
        total, buckets, bounds = (getattr(child, a, None) for a in ("_sum", "_buckets", "_upper_bounds"))
        if total is None or buckets is None or bounds is None or len(buckets) != len(bounds):
            child.observe(amount)
            return
        self.bump(total, amount)
        i = bisect.bisect_left(bounds, amount)  # the first bound >= amount, as ``observe`` looks for it
        if i < len(buckets):
            self.bump(buckets[i])

    def flush(self) -> None:
        """Write the amounts ``bump`` added up (before a scrape, at the app's end, and by its timer)."""
        tally, self._tally = self._tally, {}
        for child, amount in tally.items():
            if amount:
                child.inc(amount)

    def observe_commit(self, outcome: str, seconds: float) -> None:
        self.bump(self.child(self.commits, outcome))
        self.observe(self.child(self.commit_latency, outcome), seconds)
        if outcome != "ok":
            self.outcomes.observe(outcome)
        if outcome == "COMMIT_VERSION_CONFLICT":
            self.conflicts.inc()

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.bump(self.child(self.requests, method, route, str(status)))
        self.observe(self.child(self.request_latency, method, route), seconds)

    def observe_published(self, ratified_at_ms: int) -> None:
        self.bump(self.backfill_published)
        self.observe(self.backfill_lag, max(0.0, time.time() - ratified_at_ms / 1000.0))

    def watch_engine(self, engine: Any) -> None:
        """Count the database errors of an AsyncEngine (SQLAlchemy ``handle_error`` event)."""
        from sqlalchemy import event
        from sqlalchemy.exc import IntegrityError

        def on_error(ctx: Any) -> None:
            if not isinstance(ctx.sqlalchemy_exception, IntegrityError):
                self.db_errors.inc()

        event.listen(engine.sync_engine, "handle_error", on_error)
        event.listen(engine.sync_engine, "before_cursor_execute", lambda *_a: self.bump(self.db_statements))

        def on_end(end: str) -> Any:
            def count(conn: Any) -> None:
                # An autocommit connection ends no database transaction (no round trip): not counted.
                if conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
                    self.bump(self.child(self.db_transactions, end))
            return count

        event.listen(engine.sync_engine, "commit", on_end("commit"))
        event.listen(engine.sync_engine, "rollback", on_end("rollback"))

    def storage_called(self, op: str) -> None:
        """A log-storage call (``coordinator/storage/metering.py`` counts them)."""
        self.bump(self.child(self.storage_requests, op))

    def storage_failed(self, op: str, *, timed_out: bool) -> None:
        """A log-storage call that failed (past its deadline: ``timed_out``)."""
        self.storage_errors.labels(op).inc()
        if timed_out:
            self.storage_timeouts.labels(op).inc()

    async def refresh_tables(self, counts: dict[str, int], behind: list[tuple[Any, int]]) -> None:
        """Set the per-table gauges (before a scrape) from the tables with unpublished commits, each with the
        ratification time (ms) of its oldest one, and the tables by status. A table with nothing to publish
        has no series: the series follow the backlog, not the number of tables."""
        now = time.time()
        self.table_figures.backlog = [(t.table_id, t.unbackfilled) for t, _ in behind]
        self.table_figures.backlog_age = [(t.table_id, max(0.0, now - oldest / 1000.0)) for t, oldest in behind]
        self.table_figures.tables = sorted(counts.items())

    def exposition(self) -> bytes:
        self.flush()
        if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            return generate_latest(self.registry)
        from prometheus_client import multiprocess

        every_worker = CollectorRegistry()
        multiprocess.MultiProcessCollector(every_worker)
        every_worker.register(self.table_figures)
        return generate_latest(every_worker)


class _TableFigures(Collector):
    """The per-table gauges, as read from the ownership store by the last :meth:`Metrics.refresh_tables`."""

    def __init__(self) -> None:
        self.backlog: list[tuple[str, float]] = []
        self.backlog_age: list[tuple[str, float]] = []
        self.tables: list[tuple[str, float]] = []

    def collect(self) -> Iterator[Metric]:
        for name, doc, label, values in (
            ("commit_owner_table_unbackfilled_commits",
             "Ratified commits not yet published to _delta_log, per table with any (read at scrape time).", "table_id",
             self.backlog),
            ("commit_owner_table_oldest_unbackfilled_age_seconds",
             "Age of the oldest unbackfilled commit, per table with any (read at scrape time).", "table_id",
             self.backlog_age),
            ("commit_owner_tables", "Owned tables by status (read at scrape time).", "status", self.tables),
        ):
            family = GaugeMetricFamily(name, doc, labels=[label])
            for key, value in values:
                family.add_metric([key], value)
            yield family


class MaintenanceMetrics:
    """The figures of `commit-owner maintain` / `vacuum` / `optimize`, processes of their own without an HTTP server: written
    as a Prometheus text file (``--metrics-file``, for node_exporter's textfile collector) after each pass."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.checkpoints_written = Counter("commit_owner_checkpoints_written",
                                           "Checkpoints this maintenance process wrote.", registry=r)
        self.checkpoint_lag = Gauge("commit_owner_checkpoint_lag_versions",
                                    "Published versions above the newest checkpoint, per table (last pass).",
                                    ["table_id"], registry=r)
        self.checkpoint_lag_max = Gauge("commit_owner_checkpoint_lag_versions_max",
                                        "The largest checkpoint lag of any table (last pass).", registry=r)
        self.log_files_removed = Counter("commit_owner_log_cleanup_deleted_files",
                                         "Expired _delta_log files (commits, checkpoints, staged commits) the log "
                                         "cleanup deleted.", registry=r)
        self.vacuum_files = Counter("commit_owner_vacuum_deleted_files", "Data files vacuum deleted.", registry=r)
        self.vacuum_bytes = Counter("commit_owner_vacuum_freed_bytes", "Bytes of the data files vacuum deleted.",
                                    registry=r)
        self.compaction_files_removed = Counter("commit_owner_compaction_removed_files",
                                                "Small data files compactions rewrote (removed from the table).",
                                                registry=r)
        self.compaction_files_added = Counter("commit_owner_compaction_added_files",
                                              "Data files compactions wrote in their place.", registry=r)
        self.compaction_bytes_removed = Counter("commit_owner_compaction_removed_bytes",
                                                "Bytes of the files compactions rewrote.", registry=r)
        self.compaction_bytes_added = Counter("commit_owner_compaction_added_bytes",
                                              "Bytes of the files compactions wrote.", registry=r)
        self.maintenance_steps = Counter("commit_owner_maintenance_steps",
                                         "Steps of the maintenance policy (checkpoint, log_cleanup, optimize, "
                                         "vacuum) that did something (done) or failed.", ["kind", "outcome"],
                                         registry=r)
        self.compaction_gave_up = Counter("commit_owner_compaction_gave_up",
                                          "Compactions that gave up to a commit that removed a file they rewrote.",
                                          registry=r)

    def write(self, path: str) -> None:
        """Replace ``path`` with the current figures (written to a temporary file, then renamed)."""
        from prometheus_client import write_to_textfile

        write_to_textfile(path, self.registry)


class RecentErrors:
    """The last few failed requests of this process, newest first, for the status page."""

    def __init__(self, size: int = 50) -> None:
        self._items: deque[dict[str, Any]] = deque(maxlen=size)

    def add(self, **item: Any) -> None:
        item.setdefault("at", time.time())
        self._items.appendleft(item)

    def items(self) -> list[dict[str, Any]]:
        return list(self._items)
