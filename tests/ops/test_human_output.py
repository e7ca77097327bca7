"""The human output of every listing command, on a populated database: no Python `None`, `True` or `False`,
times readable, named tables by their `catalog.schema.table`; `--json` keeps the real JSON values."""

from __future__ import annotations

import json
import re

from tests.ops.helpers import call, name_a_table, post_commit
from tests.ops.test_cli import cli
from tests.support import Service, actions, create_owned_table, delta_file

PYTHON_WORDS = re.compile(r"\b(None|True|False)\b")
ISO_SECOND = re.compile(r"\b20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ\b")


def test_no_listing_prints_none_true_or_false_and_named_tables_show_their_name(manual_service: Service) -> None:
    svc = manual_service
    db = svc.backend.database_url
    fresh_id, fresh_loc = create_owned_table(svc)  # no commit yet: no last commit time, no status reason
    behind_id, behind_loc = create_owned_table(svc)
    for v in (1, 2):
        assert post_commit(svc, behind_id, v, actions())[0] == 200
    fenced_id, fenced_loc = create_owned_table(svc)  # not accepting, with a reason and a backfill error
    assert post_commit(svc, fenced_id, 1, actions())[0] == 200
    svc.backend.write(delta_file(fenced_loc, 1), b'{"commitInfo":{"written":"around the owner"}}\n')
    assert call(svc, "POST", f"/api/v1/tables/{fenced_id}/backfill", b"{}")[0] == 409
    name, named_loc = name_a_table(svc)
    made = cli("tokens", "create", "--scope", "*:read", "--json", "--database-url", db)
    assert made.returncode == 0, made.stderr
    assert cli("tokens", "revoke", json.loads(made.stdout)["id"], "--database-url", db).returncode == 0
    assert cli("tokens", "create", "--scope", "*:ops", "--database-url", db).returncode == 0  # one not revoked

    listings = [
        ("tables", "list"),
        *(("tables", "show", ref) for ref in (fresh_loc, behind_id, fenced_id, named_loc)),
        ("tokens", "list"),
        ("config", "show"),
        ("janitor", "--dry-run"),
        ("backfill", "--table", fresh_id),
    ]
    out = {}
    for command in listings:
        res = cli(*command, "--database-url", db)
        assert res.returncode == 0, (command, res.stderr)
        assert res.stdout.strip(), command
        assert PYTHON_WORDS.search(res.stdout) is None, (command, res.stdout)
        out[command] = res.stdout

    tables = out[("tables", "list")].splitlines()
    [named_line] = [line for line in tables if line.endswith(named_loc)]
    assert named_line.split()[1] == name
    [fresh_line] = [line for line in tables if line.startswith(fresh_id)]
    assert fresh_line.split()[1] == "-"  # no name
    [fenced_line] = [line for line in tables if line.startswith(fenced_id)]
    assert fenced_line.split()[5:7] == ["no", "FENCED"]  # accepting: no
    assert ISO_SECOND.search(fenced_line)  # its last commit time

    shown = dict(line.split(None, 1) for line in out[("tables", "show", named_loc)].splitlines()
                 if line and not line.startswith(("recent", " ")))
    assert shown["name"] == name and shown["acceptingCommits"] == "yes" and shown["statusReason"] == "-"
    behind = out[("tables", "show", behind_id)]
    assert len(re.findall(r"^  v\d+ .* committed 20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ  UNBACKFILLED$", behind, re.M)) == 2
    assert "recent commits: none" in out[("tables", "show", fresh_loc)]

    tokens = out[("tokens", "list")].splitlines()[1:]
    assert len(tokens) == 2 and all(ISO_SECOND.search(line) for line in tokens)
    assert sorted(line.split()[2] == "-" for line in tokens) == [False, True]  # one revoked, one not

    # --json keeps JSON's own values
    info = json.loads(cli("tables", "show", named_loc, "--json", "--database-url", db).stdout)
    assert info["name"] == name and info["acceptingCommits"] is True and info["statusReason"] is None
    [row] = [r for r in json.loads(cli("tables", "list", "--json", "--database-url", db).stdout)
             if r["tableId"] == fresh_id]
    assert row["name"] is None and row["lastCommitAt"] is None and row["acceptingCommits"] is True


def test_tables_show_finds_a_table_by_id_name_location_or_relative_path(manual_service: Service) -> None:
    import os

    from tests.ops.test_cli import ROOT

    svc = manual_service
    db = svc.backend.database_url
    name, loc = name_a_table(svc)
    table_id = json.loads(cli("tables", "show", loc, "--json", "--database-url", db).stdout)["tableId"]
    relative = os.path.relpath(loc[len("file://"):], ROOT)  # the command runs in the checkout's folder
    for ref in (table_id, name, loc, loc[len("file://"):], relative):
        res = cli("tables", "show", ref, "--json", "--database-url", db)
        assert res.returncode == 0, (ref, res.stderr)
        assert json.loads(res.stdout)["tableId"] == table_id, ref

    before = cli("tables", "list", "--json", "--database-url", db).stdout
    missing = cli("tables", "show", "main.nope.cities", "--database-url", db)
    assert missing.returncode == 1 and "table main.nope.cities does not exist (by name;" in missing.stderr, missing.stderr
    bad = cli("tables", "show", "s3:/one-slash", "--database-url", db)
    assert bad.returncode != 0 and "give a table id, a catalog.schema.table name or a location" in bad.stderr, bad.stderr
    assert cli("tables", "list", "--json", "--database-url", db).stdout == before  # refusals change nothing
