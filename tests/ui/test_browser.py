"""The UI in a real browser (Debian's Chromium, headless, over the DevTools protocol): signing in, navigation
from the catalog list to one commit's actions, the charts, paging, the permission filter and the escaping."""

from __future__ import annotations

import pytest

from harness.browser import Browser
from tests.ui.conftest import World, facts, sign_in

pytestmark = pytest.mark.postgres


def test_sign_in_keeps_the_token_in_an_http_only_same_site_strict_cookie_and_refuses_a_bad_one(
        ui_world: World, browser: Browser) -> None:
    browser.clear_cookies()
    browser.open(ui_world.ui + "/")
    assert browser.count("form.login") == 1 and "Sign in" in browser.text("h1")  # 401: the sign-in form

    browser.submit("form.login", {"token": "dco_0123456789abcdef_" + "x" * 43})
    assert browser.count("form.login") == 1
    assert "invalid or revoked" in browser.text("p.problem")
    assert not [c for c in browser.cookies() if c["name"] == "commit_owner_ui_token"]

    sign_in(browser, ui_world, ui_world.admin)
    [cookie] = [c for c in browser.cookies() if c["name"] == "commit_owner_ui_token"]
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
    assert cookie["secure"] is False  # served over plain HTTP here; Secure over TLS (request.secure)
    assert "commit_owner_ui_token" not in browser.eval("document.cookie")  # no script can read it
    assert "everything" in browser.text("header .who")

    browser.click("header form.inline button")  # sign out
    assert browser.url() == ui_world.ui + "/login"
    assert not [c for c in browser.cookies() if c["name"] == "commit_owner_ui_token"]


def test_navigation_from_the_catalog_list_to_one_commit_of_a_table(ui_world: World, browser: Browser) -> None:
    sign_in(browser, ui_world, ui_world.admin)
    sales = ui_world.seeded.catalogs[0]
    rows = {r[0]: r for r in browser.eval(
        "Array.from(document.querySelectorAll('#catalogs tbody tr')).map(r => Array.from(r.cells).map(c => c.innerText))")}
    assert rows[sales][2] == "3"  # orders, customers, revenue
    assert "2 owned tables without a name" in browser.text("#unnamed")

    browser.click(f"#catalogs a[href='/ui/catalogs/{sales}']")
    assert browser.text("h1") == sales
    assert [r.strip() for r in browser.text("#schemas tbody").splitlines()] == ["gold\t\t1", "raw\t\t2"]

    browser.click("#schemas a[href$='/schemas/raw']")
    assert browser.text("h1") == f"{sales}.raw"
    assert [a.strip() for a in browser.text("#tables tbody").split("\n") if a.strip()][0].startswith("customers")

    orders = ui_world.seeded.tables["orders"]
    browser.click(f"#tables tr[data-table-id='{orders}'] a")
    assert browser.text("h1") == f"{sales}.raw.orders"
    identity = browser.text("#identity")
    assert orders in identity and ui_world.seeded.locations["orders"] in identity and "EXTERNAL" in identity
    assert "reader 3, writer 7" in identity and "inCommitTimestamp" in identity
    assert "id\tbigint" in browser.text("#columns")
    state = facts(browser, "#state")
    assert (state["latest ratified"], state["latest published"], state["accepting commits"]) == ("12", "12", "yes")
    # the history, newest first, with what each commit did (read from the log)
    versions = [int(v) for v in browser.attrs("#history tbody tr", "data-version")]
    assert versions == list(range(12, 0, -1))
    v4 = browser.eval("Array.from(document.querySelector('#history tr[data-version=\"4\"]').cells).map(c => c.innerText)")
    assert v4[2] == "MERGE" and v4[3] == "delta-rs:py-1.1.0" and v4[4] == "+1 −1" and v4[5] == "+1,000 −1,000"
    assert v4[7].startswith("00000000000000000004.") and v4[8].startswith("yes")
    # the table's pictures: one bar or more in each
    for chart in ("commits", "lag"):
        assert browser.count(f"#chart-{chart} svg rect.bar") >= 1, chart

    browser.click("#history tr[data-version='4'] a")
    assert browser.text("h1") == "Version 4"
    commit = facts(browser, "#commit")
    assert commit["operation"] == "MERGE" and len(commit["sha-256"]) == 64 and commit["rows"] == "+1,000 −1,000"
    assert browser.attrs("#actions li", "data-action") == ["commitInfo", "add", "remove"]
    assert '"numRecords\\": 1000' in browser.text("#actions")


def test_the_landing_page_charts_activity_refusals_and_backlog(ui_world: World, browser: Browser) -> None:
    sign_in(browser, ui_world, ui_world.ops)
    for chart in ("commits", "lag", "refusals"):
        assert browser.count(f"#chart-{chart} svg") == 1, chart
    assert browser.count("#chart-commits rect.bar.published") >= 1
    assert browser.count("#chart-refusals rect.bar.conflict") >= 1  # the seed's lost race (409)
    # the backlog chart: the table left unpublished (9 commits), then the fenced one (3), each a link to its page
    events, clicks = ui_world.seeded.tables["events"], ui_world.seeded.tables["clicks"]
    assert browser.attrs("#chart-backlog a", "href") == [f"/ui/tables/{events}", f"/ui/tables/{clicks}"]
    assert browser.eval("Array.from(document.querySelectorAll('#chart-backlog rect title')).map(t => t.textContent)"
                        ) == [f"{ui_world.seeded.locations['events']}: 9", f"{ui_world.seeded.locations['clicks']}: 3"]
    browser.open(ui_world.ui + f"/tables/{events}")
    assert facts(browser, "#state")["backlog"] == "9 commit(s) not yet published"
    assert browser.count("#chart-commits rect.bar.unpublished") >= 1
    assert browser.text("#history tr[data-version='9'] td:last-child") == "not yet"
    # an unpublished commit's actions come from the bytes its row keeps (decision 43): shown even while its staged
    # file is missing, and the page does not write the file back (no page changes state)
    staged = browser.text("#history tr[data-version='9'] td.file")
    path = f"{ui_world.seeded.locations['events']}/_delta_log/_commits/{staged}"
    ui_world.svc.backend.remove(path)
    browser.open(ui_world.ui + f"/tables/{events}")
    assert browser.text("#history tr[data-version='9'] td:nth-child(3)") in ("WRITE", "MERGE", "OPTIMIZE")
    assert not ui_world.svc.backend.exists(path)
    clicks = ui_world.seeded.tables["clicks"]  # fenced: a foreign _delta_log/1.json stopped its publication
    browser.open(ui_world.ui + f"/tables/{clicks}")
    state = facts(browser, "#state")
    assert state["status"] == "FENCED" and state["accepting commits"].startswith("no: fenced (")
    assert "_delta_log/00000000000000000001.json" in state["accepting commits"] + state["publication error"]


def test_pages_of_every_table_follow_one_another_without_gaps_or_repeats(ui_world: World, browser: Browser) -> None:
    sign_in(browser, ui_world, ui_world.admin)
    browser.open(ui_world.ui + "/tables?limit=2")
    seen: list[str] = []
    for _ in range(10):
        seen += browser.attrs("#tables tbody tr", "data-table-id")
        if browser.count("#next") == 0:
            break
        browser.click("#next")
    ours = set(ui_world.seeded.tables.values())
    assert len(seen) == len(set(seen)) and ours <= set(seen)
    by_id = {v: ui_world.seeded.locations[k] for k, v in ui_world.seeded.tables.items()}
    ordered = [by_id[t] for t in seen if t in by_id]
    assert ordered == sorted(ordered)


def test_a_read_token_sees_only_the_tables_its_scope_covers_and_ops_sees_every_one(ui_world: World,
                                                                                    browser: Browser) -> None:
    s = ui_world.seeded
    sign_in(browser, ui_world, ui_world.reader)
    assert browser.attrs("#catalogs a", "href") == [f"/ui/catalogs/{s.catalogs[0]}"]
    assert "0 owned tables without a name" in browser.text("#unnamed")
    assert browser.count("#chart-refusals") == 0  # owner-wide refusals: for ops and admin only
    browser.open(ui_world.ui + "/tables")
    assert browser.attrs("#tables tbody tr", "data-table-id") == [s.tables["orders"]]
    browser.open(ui_world.ui + f"/catalogs/{s.catalogs[0]}/schemas/gold")  # hidden from its lists: as if absent
    assert browser.count("#tables tbody tr") == 0 and browser.attrs("#error", "data-code") == ["NOT_FOUND"]
    browser.open(ui_world.ui + f"/tables/{s.tables['events']}")
    assert browser.attrs("#error", "data-code") == ["PERMISSION_DENIED"]
    browser.open(ui_world.ui + f"/tables/{s.tables['orders']}/commits/2")
    assert browser.text("h1") == "Version 2"

    sign_in(browser, ui_world, ui_world.ops)
    browser.open(ui_world.ui + "/tables?q=" + s.catalogs[0])
    assert {s.tables[k] for k in ("orders", "customers", "revenue")} == set(browser.attrs("#tables tbody tr", "data-table-id"))
    browser.open(ui_world.ui + f"/tables/{s.tables['events']}/commits/1")
    assert browser.text("h1") == "Version 1"


def test_a_table_named_script_renders_as_text(ui_world: World, browser: Browser) -> None:
    s = ui_world.seeded
    sign_in(browser, ui_world, ui_world.admin)
    name = f"{s.catalogs[1]}.audit.<script>"
    for url in (f"/tables/{s.tables['script']}", f"/catalogs/{s.catalogs[1]}/schemas/audit", "/tables?q=" + s.catalogs[1],
                f"/tables/{s.tables['script']}/commits/1"):
        browser.open(ui_world.ui + url)
        assert browser.count("script") == 0, url  # no element made of the name
        assert "&lt;script&gt;" in browser.html(), url
    browser.open(ui_world.ui + f"/tables/{s.tables['script']}")
    assert browser.text("h1") == name
    browser.open(ui_world.ui + f"/catalogs/{s.catalogs[1]}/schemas/audit")
    assert browser.text("#tables td.name") == "<script>"
