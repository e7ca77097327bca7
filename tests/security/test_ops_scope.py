"""The `ops` scope: what a monitoring system reads (/metrics, the status page, /readyz) and nothing else."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import make_backend
from tests.security.conftest import call, cli, make_token, store_token
from tests.support import ROOT, Service, actions, delta_file, ndjson, version0

NDJSON = {"Content-Type": "application/x-ndjson"}


@pytest.fixture(scope="module")
def svc(request: pytest.FixtureRequest) -> Iterator[Service]:
    b = make_backend(request, "sqlite", "local", "ops-scope")
    s = Service(b, extra_env={"COMMIT_OWNER_AUTH": "tokens"}).start()
    yield s
    s.stop()


def test_an_ops_token_reads_metrics_and_the_status_page_and_nothing_else(svc: Service) -> None:
    b = svc.backend
    ops = make_token(b, "*:ops")["token"]  # through the CLI
    admin = store_token(b, "*:admin")
    loc = b.new_location()
    table_id = svc.client(token=admin).register_table(loc).table_id
    b.write(delta_file(loc, 0), ndjson(version0()))
    before = b.snapshot(loc)

    assert call(svc.endpoint, "GET", "/metrics", token=ops)[0] == 200
    status, page, _ = call(svc.endpoint, "GET", "/", token=ops)
    assert status == 200 and loc.encode() in page
    assert call(svc.endpoint, "GET", "/readyz", token=ops)[0] == 200
    for method, path, body, headers in [
        ("GET", "/api/v1/tables", None, None),
        ("GET", f"/api/v1/tables/{table_id}", None, None),
        ("GET", f"/api/v1/tables/{table_id}/commits", None, None),
        ("POST", f"/api/v1/tables/{table_id}/commits?version=1", ndjson(actions()), NDJSON),
        ("POST", f"/api/v1/tables/{table_id}/backfill", b"{}", None),
        ("DELETE", f"/api/v1/tables/{table_id}", None, None),
        ("POST", "/api/v1/tables", f'{{"location": "{b.new_location()}"}}'.encode(), None),
    ]:
        status, payload, _ = call(svc.endpoint, method, path, body, token=ops, headers=headers)
        assert status == 403 and payload["error"]["code"] == "PERMISSION_DENIED", (method, path, payload)
    assert b.snapshot(loc) == before
    assert svc.client(token=admin).get_commits(table_id).latest_table_version == -1
    assert [t.table_id for t in svc.client(token=admin).list_tables()] == [table_id]


def test_table_scopes_do_not_open_the_monitoring_routes(svc: Service) -> None:
    b = svc.backend
    reader = store_token(b, f"file://{b.tmp}:read")
    committer = store_token(b, f"file://{b.tmp}:commit")
    for token in (reader, committer):
        for path in ("/metrics", "/"):
            status, payload, _ = call(svc.endpoint, "GET", path, token=token)
            assert status == 403 and "*:ops" in payload["error"]["message"]
    assert call(svc.endpoint, "GET", "/metrics", token=store_token(b, "*:admin"))[0] == 200


@pytest.mark.parametrize("scope", ["s3://lake/team-a:ops", "file:///data:read,ops"])
def test_ops_is_written_with_the_prefix_star_only(svc: Service, scope: str) -> None:
    res = cli(svc.backend, "tokens", "create", "--scope", scope, check=False)
    assert res.returncode == 2 and "write it as *:ops" in res.stderr


def test_the_runbooks_scrape_config_scrapes_with_an_ops_token(svc: Service, tmp_path) -> None:  # type: ignore[no-untyped-def]
    text = (ROOT / "docs" / "runbook.md").read_text()
    [block] = [b for b in re.findall(r"^```yaml\n(.*?)^```", text, re.M | re.S) if "scrape_configs" in b]
    [job] = yaml.safe_load(block)["scrape_configs"]
    assert job["authorization"]["type"] == "Bearer"
    create = re.search(r"^commit-owner tokens create --scope '(\*:ops)' > (\S+)$", text, re.M)
    assert create and create.group(2) == job["authorization"]["credentials_file"]
    token = cli(svc.backend, "tokens", "create", "--scope", create.group(1)).stdout.strip()
    req = urllib.request.Request(svc.endpoint + job["metrics_path"], headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        names = {f.name for f in text_string_to_metric_families(r.read().decode())}
    assert "commit_owner_commits" in names or "commit_owner_tables" in names
