"""With --auth tokens, a transaction (and a consistent read) needs the right on EVERY table it names, checked
before anything is written: one table outside the token's scope refuses the whole request, changing nothing."""

from __future__ import annotations

import json
import uuid

from tests.security.conftest import State, call, local_auth, store_token  # noqa: F401  (local_auth: a fixture)
from tests.support import Service, actions, delta_file, ndjson, version0, wait_until


def _create(svc: Service, token: str, loc: str) -> str:
    info = svc.client(token=token, deadline=10).register_table(loc)
    svc.backend.write(delta_file(loc, 0), ndjson(version0()))
    return info.table_id


def _tx(*ids: str) -> bytes:
    return json.dumps({"commits": [{"tableId": t, "version": 1, "actions": actions()} for t in ids]}).encode()


def test_every_table_of_a_transaction_needs_the_commit_right_and_a_refusal_changes_nothing(
        local_auth: Service) -> None:  # noqa: F811
    svc = local_auth
    wh = f"file://{svc.backend.tmp}/wh"
    admin = store_token(svc.backend, "*:admin")
    a = _create(svc, admin, f"{wh}/tx-a/t1")
    b = _create(svc, admin, f"{wh}/tx-b/t1")
    a_commit = store_token(svc.backend, f"{wh}/tx-a:commit")
    both = store_token(svc.backend, f"{wh}/tx-a:commit", f"{wh}/tx-b:commit")
    a_read = store_token(svc.backend, f"{wh}/tx-a:read")
    state = State(svc.backend, wh)
    before = state.take()
    status, reply, _ = call(svc.endpoint, "POST", "/api/v1/transactions", _tx(a, b), token=a_commit)
    assert status == 403 and reply["error"]["code"] == "PERMISSION_DENIED", reply
    status, reply, _ = call(svc.endpoint, "POST", "/api/v1/transactions", _tx(a, b), token=a_read)
    assert status == 403, reply
    status, reply, _ = call(svc.endpoint, "POST", "/api/v1/transactions", _tx(a, b))
    assert status == 401, reply
    assert state.take() == before
    status, reply, _ = call(svc.endpoint, "POST", "/api/v1/snapshots", json.dumps({"tableIds": [a, b]}).encode(),
                            token=a_read)
    assert status == 403, reply
    status, reply, _ = call(svc.endpoint, "POST", "/api/v1/snapshots", json.dumps({"tableIds": [a]}).encode(),
                            token=a_read)
    assert status == 200 and reply["tables"][0]["tableId"] == a, reply
    status, reply, _ = call(svc.endpoint, "POST", "/api/v1/transactions", _tx(a, b), token=both)
    assert status == 200 and [c["version"] for c in reply["commits"]] == [1, 1], reply


def test_a_replayed_transaction_needs_the_commit_right_on_every_table_again(local_auth: Service) -> None:  # noqa: F811
    """A replay answers the first attempt's result only to a token allowed every table of it (decision 69)."""
    svc = local_auth
    wh = f"file://{svc.backend.tmp}/wh"
    admin = store_token(svc.backend, "*:admin")
    a = _create(svc, admin, f"{wh}/rp-a/t1")
    b = _create(svc, admin, f"{wh}/rp-b/t1")
    both = store_token(svc.backend, f"{wh}/rp-a:commit", f"{wh}/rp-b:commit")
    a_commit = store_token(svc.backend, f"{wh}/rp-a:commit")
    key, body = {"Idempotency-Key": str(uuid.uuid4())}, _tx(a, b)
    status, first, _ = call(svc.endpoint, "POST", "/api/v1/transactions", body, token=both, headers=key)
    assert status == 200, first
    wait_until(lambda: all(call(svc.endpoint, "GET", f"/api/v1/tables/{t}", token=admin)[1]
                           ["latestBackfilledVersion"] == 1 for t in (a, b)),
               what="the transaction published")  # (the service backfills after every commit)
    state = State(svc.backend, wh)
    before = state.take()
    status, reply, _ = call(svc.endpoint, "POST", "/api/v1/transactions", body, token=a_commit, headers=key)
    assert status == 403 and reply["error"]["code"] == "PERMISSION_DENIED", reply
    # (the permission before the key's comparison: another body under the key tells this token nothing either)
    status, reply, _ = call(svc.endpoint, "POST", "/api/v1/transactions", _tx(a, b), token=a_commit, headers=key)
    assert status == 403 and reply["error"]["code"] == "PERMISSION_DENIED", reply
    assert state.take() == before
    status, again, _ = call(svc.endpoint, "POST", "/api/v1/transactions", body, token=both, headers=key)
    assert status == 200 and again == first, again
