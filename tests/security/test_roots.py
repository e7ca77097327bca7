"""Allowed roots: the owner registers tables only under --allow-location, however the location is spelled.

Each attempt must be refused with a clear 4xx and leave the database and storage as they were. On every
backend, with the app in this process (symlink tricks on the local-disk backends only)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.conftest import BACKENDS, make_backend
from tests.inprocess import InProcess
from tests.security.conftest import State

ALL = [f"{d}-{s}" for d, s in BACKENDS]
LOCAL = [b for b in ALL if b.endswith("-local")]
S3 = [b for b in ALL if b.endswith("-s3")]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def roots(request: pytest.FixtureRequest) -> AsyncIterator[tuple[InProcess, str]]:
    """The app allowing one root: ``<tmp>/wh`` (with symlinks planted in it) or ``s3://<bucket>/warehouse``.
    Its own database and bucket, so the before/after pictures see nothing but these tests."""
    db, storage = request.param.split("-")
    b = make_backend(request, db, storage, f"sec-roots-{request.param}")
    if storage == "s3":
        root, allow = f"s3://{b.bucket}/warehouse", f"s3://{b.bucket}/warehouse/"
    else:
        assert b.tmp is not None
        wh = b.tmp / "wh"
        wh.mkdir()
        (b.tmp / "outside").mkdir()
        os.symlink(b.tmp / "outside", wh / "link")  # a symlink inside the root that points out of it
        (wh / "inner").mkdir()
        os.symlink(wh / "inner", wh / "inner-link")  # one that stays inside
        root = allow = str(wh)
    app = await InProcess.start(b, {"COMMIT_OWNER_ALLOW_LOCATION": allow})
    yield app, root
    await app.stop()


def on(backends: list[str]) -> Any:
    return pytest.mark.parametrize("roots", backends, indirect=True, scope="module")


async def assert_refused(svc: InProcess, state: State, location: str, forbidden: str) -> None:
    before = await asyncio.to_thread(state.take)
    status, payload = await svc.register(location)
    assert 400 <= status < 500, (location, status, payload)
    err = payload["error"]
    assert err["code"] in ("LOCATION_NOT_ALLOWED", "INVALID_ARGUMENT"), (location, err)
    assert err["message"] and forbidden not in err["message"]  # says why, without the service's own paths
    assert await asyncio.to_thread(state.take) == before, location


LOCAL_ESCAPES = [
    "{root}/../outside/t",
    "file://{root}/../outside/t",
    "file://{root}/%2e%2e/outside/t",
    "file://{root}/%2E%2E/outside/t",
    "file://{root}/%252e%252e/outside/t",  # encoded twice
    "FILE://{root}/../outside/t",
    "File://{root}/sub/../../outside/t",
    "{root}/link/t",  # symlink out of the root
    "{root}/link",
    "{root}/\uff0e\uff0e/outside/t",  # full-width dots
    "{root}\uff0foutside",  # full-width solidus
    "{root}/t\u2024\u2024/x",  # one-dot leaders
    "{root}./t",  # trailing dot on the root's last segment: a sibling, not the root
    "{root}-evil/t",  # shares the root's spelling, not its path
    "{root}",  # the root itself is no table
    "{root}/",
    "{root}/t%00x",
    "{tmp}/outside/t",
    "/etc/t",
    "file://localhost/etc/t",
    "s3://bucket/t",
]


@on(LOCAL)
async def test_local_escapes_are_refused_and_change_nothing(roots: tuple[InProcess, str]) -> None:
    svc, root = roots
    tmp = os.path.dirname(root)
    state = State(svc.backend, f"file://{tmp}")
    for spelling in LOCAL_ESCAPES:
        await assert_refused(svc, state, spelling.format(root=root, tmp=tmp), forbidden=str(svc.backend.database_url))
    assert not os.listdir(os.path.join(tmp, "outside"))


@on(LOCAL)
async def test_local_spellings_inside_the_root_are_accepted_in_canonical_form(roots: tuple[InProcess, str]) -> None:
    svc, root = roots
    for spelling, canonical in [
        ("FILE://{root}/a/../ok1", "file://{root}/ok1"),
        ("{root}/./ok2/", "file://{root}/ok2"),
        ("file://{root}/%6fk3", "file://{root}/ok3"),
        ("{root}/inner-link/ok4", "file://{root}/inner-link/ok4"),  # a symlink that stays inside
        ("{root}/t..x", "file://{root}/t..x"),  # dots inside a name are just a name
    ]:
        status, payload = await svc.register(spelling.format(root=root))
        assert status == 201, (spelling, payload)
        assert payload["location"] == canonical.format(root=root)


S3_ESCAPES = [
    "s3://{bucket}/warehouse/../other/t",
    "s3://{bucket}/warehouse/%2e%2e/other/t",
    "s3://{bucket}/warehouse/%252e%252e/other/t",
    "S3A://{bucket}/other/t",
    "s3://{bucket}/other/t",
    "s3://{bucket}./warehouse/t",
    "s3://{bucket}/warehouse./t",
    "s3://{bucket}/warehouse-evil/t",
    "s3://{bucket}/warehouse",
    "s3://{bucket}/warehouse/\uff0e\uff0e/other",
    "s3://{bucket}\uff0fwarehouse/t",
    "s3://other-{bucket}/warehouse/t",
    "s3://user:secret@{bucket}/warehouse/t",
    "s3://{bucket}:9000/warehouse/t",
    "file:///warehouse/t",
]


@on(S3)
async def test_s3_escapes_are_refused_and_change_nothing(roots: tuple[InProcess, str]) -> None:
    svc, root = roots
    bucket = svc.backend.bucket
    state = State(svc.backend, f"s3://{bucket}")
    for spelling in S3_ESCAPES:
        await assert_refused(svc, state, spelling.format(bucket=bucket), forbidden="testing")


@on(S3)
async def test_s3_spellings_inside_the_root_are_accepted_in_canonical_form(roots: tuple[InProcess, str]) -> None:
    svc, root = roots
    bucket = svc.backend.bucket
    for spelling, canonical in [
        (f"S3://{bucket.upper()}/warehouse/a/../ok1", f"{root}/ok1"),
        (f"s3a://{bucket}/warehouse/ok2/", f"{root}/ok2"),
        (f"s3://{bucket}/warehouse/%6fk3", f"{root}/ok3"),
    ]:
        status, payload = await svc.register(spelling)
        assert status == 201, (spelling, payload)
        assert payload["location"] == canonical


def test_the_default_root_is_a_local_warehouse_under_the_working_directory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from coordinator.runtime.settings import Settings
    from coordinator.security.roots import parse_roots

    roots = parse_roots(Settings.load({}, environ={}).allow_location, cwd=str(tmp_path))
    assert [r.uri for r in roots] == [f"file://{tmp_path}/warehouse"]
    assert roots[0].holds(f"file://{tmp_path}/warehouse/t")
    assert not roots[0].holds(f"file://{tmp_path}/warehouse2/t")


@on(LOCAL)
async def test_a_delta_log_symlinked_out_of_the_root_is_refused_at_registration_and_at_commit(
        roots: tuple[InProcess, str]) -> None:
    from client.contract.errors import LocationNotAllowedError
    from tests.support import actions, delta_file, ndjson, version0

    svc, root = roots
    tmp = os.path.dirname(root)
    outside = os.path.join(tmp, "outside")
    state = State(svc.backend, f"file://{tmp}")

    planted = os.path.join(root, "planted")
    os.makedirs(planted)
    os.symlink(outside, os.path.join(planted, "_delta_log"))
    await assert_refused(svc, state, planted, forbidden=outside)

    # registered while harmless, then its _delta_log is swapped for a symlink out of the root
    loc = f"file://{root}/swapped"
    c = svc.client()  # the stdlib client blocks: it runs in a thread while this loop serves
    tid = (await asyncio.to_thread(c.register_table, loc)).table_id
    svc.backend.write(delta_file(loc, 0), ndjson(version0()))
    os.rename(os.path.join(root, "swapped", "_delta_log"), os.path.join(root, "swapped", "_delta_log.old"))
    os.symlink(outside, os.path.join(root, "swapped", "_delta_log"))
    before = state.take()
    with pytest.raises(LocationNotAllowedError):
        await asyncio.to_thread(c.commit, tid, 1, actions())
    c.close()
    assert state.take() == before
    assert not os.listdir(outside)


def test_resolve_names_what_realpath_names(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The allowed-roots check resolves a local folder with the kernel (``O_PATH`` + ``/proc/self/fd``): for
    every spelling, symlink escape, loop, missing tail, file and removed folder it answers what ``realpath`` does."""
    from coordinator.security.roots import resolve

    d = os.path.realpath(tmp_path)
    os.makedirs(f"{d}/wh/t/_delta_log/_commits")
    os.makedirs(f"{d}/outside/x")
    os.symlink(f"{d}/outside", f"{d}/wh/link")
    os.symlink("../..", f"{d}/wh/t/up")
    os.symlink("loop", f"{d}/wh/loop")
    os.symlink(f"{d}/outside/x", f"{d}/wh/t/_delta_log/_elsewhere")
    open(f"{d}/wh/file", "w").close()
    os.symlink(f"{d}/wh/file", f"{d}/wh/file-link")
    os.makedirs(f"{d}/wh/gone")
    cases = ["wh/t/_delta_log/_commits", "wh/link/x", "wh/link/x/missing/y", "wh/t/up/outside", "wh/t/up/wh/link",
             "wh/loop", "wh/loop/x", "wh/file", "wh/file-link", "wh//t/./_delta_log/../_delta_log/",
             "wh/t/_delta_log/_elsewhere", "wh/link/../wh", "nothing/here", "wh/gone"]
    for case in cases:
        assert resolve(f"{d}/{case}") == os.path.realpath(f"{d}/{case}"), case
    fd = os.open(f"{d}/wh/gone", os.O_RDONLY)
    try:
        os.rmdir(f"{d}/wh/gone")
        assert resolve(f"{d}/wh/gone") == os.path.realpath(f"{d}/wh/gone")
    finally:
        os.close(fd)
    assert resolve("/") == "/"
