"""Fault injection around a log-storage backend, from outside the product: the harness wraps each backend
(``StorageRouter``'s ``inner=``, inside the deadline so injected latency hits it) of a service it starts with
``python -m harness.with_faults`` (``Service`` does when its environment holds ``STORAGE_FAULTS``), of an
in-process app (``create_app(..., storage_inner=...)``) or of `maintain`.

It makes storage fail and slow down on purpose: the reliability suite (``tests/reliability``) and
``scripts/chaos`` use it to prove that no acknowledged commit is lost when storage misbehaves. The spec
(the value of ``STORAGE_FAULTS``) is ``key=value`` pairs separated by ``;`` (or ``,``):

* ``put_error=P``: share of ``put_if_absent``/``delete`` calls that raise OSError before touching storage;
* ``put_lost_ack=P``: share of ``put_if_absent`` calls that write the object and then raise OSError (the
  write happened, its acknowledgment was lost);
* ``read_error=P``: share of ``read``/``info``/``exists``/``list_names``/``walk``/``check_container`` calls that
  raise OSError;
* ``latency_ms=A`` or ``latency_ms=A-B``: delay added before every call (uniform in A..B ms);
* ``match=TEXT``: only URIs containing TEXT are affected (e.g. one table's location);
* ``seed=N``: seed of the random choices (default: random).

Example: ``put_error=0.1;put_lost_ack=0.1;latency_ms=0-300``.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from coordinator.storage.base import FileInfo, Prepared, StorageBackend

log = logging.getLogger("commit_owner.faults")

STORAGE_FAULTS = "HARNESS_STORAGE_FAULTS"  # the environment variable holding the spec


@dataclass(frozen=True)
class FaultSpec:
    put_error: float = 0.0
    put_lost_ack: float = 0.0
    read_error: float = 0.0
    latency_min_ms: float = 0.0
    latency_max_ms: float = 0.0
    match: str = ""
    seed: int | None = None

    @classmethod
    def parse(cls, spec: str) -> FaultSpec:
        """Parse a spec. Raises ValueError naming the bad part."""
        values: dict[str, object] = {}
        for part in spec.replace(",", ";").split(";"):
            part = part.strip()
            if not part:
                continue
            key, sep, raw = part.partition("=")
            key, raw = key.strip(), raw.strip()
            if not sep:
                raise ValueError(f"storage faults: expected key=value, got {part!r}")
            if key in ("put_error", "put_lost_ack", "read_error"):
                p = float(raw)
                if not 0.0 <= p <= 1.0:
                    raise ValueError(f"storage faults: {key} must be between 0 and 1")
                values[key] = p
            elif key == "latency_ms":
                lo, _, hi = raw.partition("-")
                values["latency_min_ms"] = float(lo)
                values["latency_max_ms"] = float(hi or lo)
                if not 0 <= values["latency_min_ms"] <= values["latency_max_ms"]:  # type: ignore[operator]
                    raise ValueError("storage faults: latency_ms must be A or A-B with 0 <= A <= B")
            elif key == "match":
                values["match"] = raw
            elif key == "seed":
                values["seed"] = int(raw)
            else:
                raise ValueError(f"storage faults: unknown key {key!r}")
        return cls(**values)  # type: ignore[arg-type]


class FaultyStorage(StorageBackend):
    """Wraps a real backend and misbehaves as the spec says. Counts what it injected (``injected``)."""

    def __init__(self, inner: StorageBackend, spec: FaultSpec) -> None:
        self.inner = inner
        self.spec = spec
        self.scheme = inner.scheme
        self._rng = random.Random(spec.seed)

    def _hit(self, uri: str) -> bool:
        return not self.spec.match or self.spec.match in uri

    async def _delay(self, uri: str) -> None:
        if self.spec.latency_max_ms > 0 and self._hit(uri):
            await asyncio.sleep(self._rng.uniform(self.spec.latency_min_ms, self.spec.latency_max_ms) / 1000.0)

    def _maybe(self, kind: str, p: float, uri: str) -> None:
        if p > 0 and self._hit(uri) and self._rng.random() < p:
            log.warning("injected fault: %s on %s", kind, uri)
            raise OSError(errno.EIO, f"injected fault: {kind}", uri)

    async def put_if_absent(self, uri: str, data: bytes) -> FileInfo:
        await self._delay(uri)
        self._maybe("put_error", self.spec.put_error, uri)
        info = await self.inner.put_if_absent(uri, data)
        self._maybe("put_lost_ack", self.spec.put_lost_ack, uri)
        return info

    async def prepare(self, uri: str, data: bytes) -> Prepared:
        return await self.inner.prepare(uri, data)

    async def put_prepared(self, prepared: Prepared) -> FileInfo:
        """The faults of ``put_if_absent``, once the write is asked to go ahead (a failed one is dropped)."""
        try:
            await self._delay(prepared.uri)
            self._maybe("put_error", self.spec.put_error, prepared.uri)
        except BaseException:
            await self.inner.drop_prepared(prepared)
            raise
        info = await self.inner.put_prepared(prepared)
        self._maybe("put_lost_ack", self.spec.put_lost_ack, prepared.uri)
        return info

    async def drop_prepared(self, prepared: Prepared) -> None:
        await self.inner.drop_prepared(prepared)

    async def read(self, uri: str) -> bytes:
        await self._delay(uri)
        self._maybe("read_error", self.spec.read_error, uri)
        return await self.inner.read(uri)

    async def exists(self, uri: str) -> bool:
        await self._delay(uri)
        self._maybe("read_error", self.spec.read_error, uri)
        return await self.inner.exists(uri)

    async def delete(self, uri: str) -> None:
        await self._delay(uri)
        self._maybe("put_error", self.spec.put_error, uri)
        await self.inner.delete(uri)

    async def list_names(self, dir_uri: str) -> list[str]:
        await self._delay(dir_uri)
        self._maybe("read_error", self.spec.read_error, dir_uri)
        return await self.inner.list_names(dir_uri)

    async def info(self, uri: str) -> FileInfo:
        await self._delay(uri)
        self._maybe("read_error", self.spec.read_error, uri)
        return await self.inner.info(uri)

    async def replace(self, uri: str, data: bytes) -> None:
        await self._delay(uri)
        self._maybe("put_error", self.spec.put_error, uri)
        await self.inner.replace(uri, data)

    async def walk(self, dir_uri: str) -> list[FileInfo]:
        await self._delay(dir_uri)
        self._maybe("read_error", self.spec.read_error, dir_uri)
        return await self.inner.walk(dir_uri)

    async def check_container(self, location: str) -> None:
        await self._delay(location)
        self._maybe("read_error", self.spec.read_error, location)
        await self.inner.check_container(location)

    async def ping(self) -> None:
        await self.inner.ping()

    async def close(self) -> None:
        await self.inner.close()


def faults_from(environ: Mapping[str, str] | None = None) -> Callable[[StorageBackend], StorageBackend] | None:
    """The ``inner=`` wrapper of the spec in ``environ[STORAGE_FAULTS]`` (os.environ by default); None without one.
    Raises ValueError for a bad spec."""
    spec = (os.environ if environ is None else environ).get(STORAGE_FAULTS, "")
    if not spec:
        return None
    parsed = FaultSpec.parse(spec)
    return lambda backend: FaultyStorage(backend, parsed)
