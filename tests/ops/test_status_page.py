"""The status page at `/`, loaded in headless Chromium (Debian's `chromium`, installed by
`make test-system-deps`), read from the rendered DOM."""

from __future__ import annotations

import os
import subprocess
from html.parser import HTMLParser
from pathlib import Path

from tests.ops.helpers import call, name_a_table, post_commit
from tests.support import Service, actions, create_owned_table, delta_file

CHROMIUM = "/usr/bin/chromium"


class _Tables(HTMLParser):
    """Rows of every <table id=...> as lists of cell texts; rows' attributes alongside."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[tuple[dict[str, str], list[str]]]] = {}
        self._table: str | None = None
        self._row: tuple[dict[str, str], list[str]] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "table" and "id" in a:
            self._table = a["id"]
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self._row = (a, [])
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row[1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def render_in_chromium(url: str, profile: Path) -> str:
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing: run `make test-system-deps`"
    res = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--dump-dom", url],
        capture_output=True, text=True, timeout=90,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def test_status_page_shows_tables_backlog_and_recent_errors_in_a_browser(manual_service: Service,
                                                                          tmp_path: Path) -> None:
    svc = manual_service
    behind_id, _ = create_owned_table(svc)
    for v in (1, 2):
        assert post_commit(svc, behind_id, v, actions())[0] == 200
    # a table fenced by a foreign _delta_log/1.json: the backfill refuses and records why
    fenced_id, fenced_loc = create_owned_table(svc)
    assert post_commit(svc, fenced_id, 1, actions())[0] == 200
    svc.backend.write(delta_file(fenced_loc, 1), b'{"commitInfo":{"written":"around the owner"}}\n')
    status, _, body = call(svc, "POST", f"/api/v1/tables/{fenced_id}/backfill", b"{}",
                           {"X-Request-Id": "ops-status-1"})
    assert status == 409 and body["error"]["code"] == "FOREIGN_COMMIT_FILE"

    name, named_loc = name_a_table(svc)
    named_id = svc.client().get_table(location=named_loc).table_id

    dom = render_in_chromium(svc.endpoint + "/", tmp_path / "chromium-profile")
    parsed = _Tables()
    parsed.feed(dom)
    header = parsed.tables["tables"][0][1]
    assert header[:9] == ["table id", "name", "location", "status", "accepting", "latest", "backfilled", "backlog",
                          "lag"]
    rows = {attrs.get("data-table-id"): cells for attrs, cells in parsed.tables["tables"][1:]}

    behind = rows[behind_id]
    assert behind[1] == ""  # registered without a name
    assert behind[3:8] == ["ACTIVE", "yes", "2", "0", "2"]
    assert behind[8].endswith(("s", "m", "h")) and float(behind[8][:-1]) >= 0  # lag of the oldest commit
    assert behind[9].endswith("Z")  # last commit time

    fenced = rows[fenced_id]
    assert fenced[3:8] == ["FENCED", "no", "1", "0", "1"]
    assert "fenced" in fenced[10]

    named = rows[named_id]
    assert named[1] == name and named[2] == named_loc and named[3] == "ACTIVE"

    errors = parsed.tables["errors"][1:]
    [err] = [cells for _, cells in errors if "ops-status-1" in cells]
    assert err[1] == "409" and err[2] == "FOREIGN_COMMIT_FILE" and "not ratify" in err[5]
