"""The UI's escaping rule, its SVG charts and the commit summary, on their own (no server)."""

from __future__ import annotations

import json
from html.parser import HTMLParser

from coordinator.api.ui.charts import Series, minute_bars, ranked_bars
from coordinator.api.ui.markup import Markup, esc, h, href, join
from coordinator.views.summary import summarize

EVIL = "<script>alert('x')</script>\"&"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(markup: str) -> _Tags:
    p = _Tags()
    p.feed(markup)
    return p


def test_every_value_is_escaped_unless_it_is_markup_already() -> None:
    out = h('<p title="{t}">{v}</p>', t=EVIL, v=EVIL)
    parsed = _parse(out)
    assert parsed.tags == ["p"] and "".join(parsed.text) == EVIL
    assert esc(None) == "" and esc(Markup("<b>")) == "<b>" and esc(3) == "3"
    assert join(["<a>", Markup("<b>")]) == "&lt;a&gt;<b>"
    assert href("catalogs", "a/b?c", query={"after": "x&y", "q": None}) == "/ui/catalogs/a%2Fb%3Fc?after=x%26y"


def test_charts_escape_their_labels_and_draw_one_bar_per_minute_with_a_value() -> None:
    chart = minute_bars("c", EVIL, 1000, 60, [Series(EVIL, "published", {1000: 3, 1059: 1}),
                                              Series("b", "unpublished", {1059: 2})])
    parsed = _parse(chart)
    assert "script" not in parsed.tags
    assert parsed.tags.count("rect") == 3 and parsed.tags.count("svg") == 1
    ranked = ranked_bars("r", "backlog", [(EVIL, 5.0, "/ui/tables/x"), ("t2", 1.0, "/ui/tables/y")])
    parsed = _parse(ranked)
    assert "script" not in parsed.tags and parsed.tags.count("rect") == 2 and parsed.tags.count("a") == 2
    assert "nothing in this window" in minute_bars("e", "empty", 0, 10, [Series("x", "lag", {})])


def test_a_commit_summary_counts_files_bytes_and_rows_and_says_when_rows_are_unknown() -> None:
    actions = [{"commitInfo": {"operation": "MERGE", "engineInfo": "Apache-Spark/3.5.3 Delta-Lake/3.3.0",
                               "inCommitTimestamp": 17}},
               {"add": {"path": "a", "size": 100, "stats": json.dumps({"numRecords": 7})}},
               {"add": {"path": "b", "size": 50, "stats": json.dumps({"numRecords": 3})}},
               {"remove": {"path": "c", "size": 20}},
               {"metaData": {"id": "x"}}]
    s = summarize(actions)
    assert (s.operation, s.engine, s.in_commit_timestamp) == ("MERGE", "Apache-Spark/3.5.3 Delta-Lake/3.3.0", 17)
    assert (s.files_added, s.bytes_added, s.rows_added) == (2, 150, 10)
    assert (s.files_removed, s.bytes_removed, s.rows_removed) == (1, 20, None)  # a remove without stats
    assert s.metadata_changed and not s.protocol_changed
    empty = summarize([{"commitInfo": {"operation": 3}}])
    assert empty.operation is None and empty.rows_added == 0 and empty.files_added == 0


def test_a_table_the_owner_has_not_yet_committed_to_shows_its_version_not_the_protocols_minus_one() -> None:
    from coordinator.api.ui.browse import _tables
    from coordinator.api.ui.table import _state
    from coordinator.store.rows import TableRow

    fresh = TableRow(table_id="t1", location="file:///w/t", commit_dir="_commits", base_version=0, latest_version=0,
                     latest_backfilled_version=0, last_commit_timestamp=None, accepting=True, status="ACTIVE",
                     status_reason=None, created_at=1, updated_at=1, last_commit_at=None)
    assert fresh.reported_latest == -1  # (what the Delta APIs answer: nothing ratified by the owner yet)
    listed = str(_tables([fresh]))
    assert '<td class="n">0</td><td class="n">0</td>' in listed and "-1" not in listed
    state = str(_state(fresh))
    assert "none yet (the log was at version 0 when the owner took it)" in state and "-1" not in state
    ratified = str(_state(TableRow(**{**fresh.__dict__, "latest_version": 3})))
    assert '<dd data-key="latest ratified">3</dd>' in ratified, ratified
