"""Helpers of the operations tests: scraping /metrics, raw HTTP calls, the test database."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.support import Service, ndjson


def access_lines(svc: Service) -> list[dict[str, Any]]:
    """The service's access log so far: one JSON record per request."""
    out = []
    for line in svc.log_text().splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            if rec.get("logger") == "commit_owner.access":
                out.append(rec)
    return out


def scrape(svc: Service) -> dict[tuple[str, frozenset], float]:
    """Every sample of ``/metrics``: (sample name, labels) -> value."""
    with urllib.request.urlopen(svc.endpoint + "/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out: dict[tuple[str, frozenset], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def sample(samples: dict[tuple[str, frozenset], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def call(svc: Service, method: str, path: str, body: bytes | None = None,
         headers: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, dict[str, str], Any]:
    """One HTTP request, no retries: (status, headers, decoded JSON body or None)."""
    req = urllib.request.Request(svc.endpoint + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw, status, hdrs = r.read(), r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        raw, status, hdrs = e.read(), e.code, dict(e.headers)
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        data = raw.decode(errors="replace")
    return status, hdrs, data


def post_commit(svc: Service, table_id: str, version: int, acts: list[dict[str, Any]],
                headers: dict[str, str] | None = None, query: str = "") -> tuple[int, dict[str, str], Any]:
    h = {"Content-Type": "application/x-ndjson", "Idempotency-Key": str(uuid.uuid4()), **(headers or {})}
    return call(svc, "POST", f"/api/v1/tables/{table_id}/commits?version={version}{query}", ndjson(acts), h)


def pg_connect(database_url: str) -> Any:
    """A psycopg connection (autocommit) to the database of ``database_url``."""
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(database_url)
    return psycopg.connect(host=u.host, port=u.port or 5432, user=u.username, password=u.password,
                           dbname=u.database, autocommit=True)


def pg_connections(database_url: str) -> int:
    """Connections to the database of ``database_url`` other than the one asking."""
    from sqlalchemy.engine import make_url

    name = make_url(database_url).database
    with pg_connect(database_url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                           (name,)).fetchone()
    return int(row[0])


def name_a_table(svc: Service) -> tuple[str, str]:
    """A table registered with a name ``catalog.schema.table`` (a new catalog and schema through the Unity
    Catalog API, the table through /api/v1, version 0 written as a client does). Returns (name, location)."""
    from tests.support import delta_file, version0

    catalog, schema = f"c{uuid.uuid4().hex[:8]}", "ops"
    for path, body in (("/catalogs", {"name": catalog}), ("/schemas", {"name": schema, "catalog_name": catalog})):
        status, _, payload = call(svc, "POST", "/api/2.1/unity-catalog" + path, json.dumps(body).encode(),
                                  {"Content-Type": "application/json"})
        assert status == 200, payload
    loc = svc.backend.new_location()
    name = f"{catalog}.{schema}.orders"
    assert svc.client().register_table(loc, current_version=-1, name=name).name == name
    svc.backend.write(delta_file(loc, 0), ndjson(version0()))
    return name, loc
