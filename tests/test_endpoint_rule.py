"""One rule for where a client or command finds its owner when no table names one (issue 43, item 6): the
endpoint given, else ``$COMMIT_OWNER_ENDPOINT``, else ``http://127.0.0.1:8080`` (`make run`'s); the CLI's
``--endpoint`` default is the same constant."""

from __future__ import annotations

import pytest

from client import CommitOwnerClient
from client.http import DEFAULT_ENDPOINT, ENDPOINT_ENV, resolve_endpoint


def test_a_client_without_an_endpoint_follows_the_one_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENDPOINT_ENV, raising=False)
    assert DEFAULT_ENDPOINT == "http://127.0.0.1:8080"
    assert CommitOwnerClient().endpoint == DEFAULT_ENDPOINT
    assert "set $COMMIT_OWNER_ENDPOINT" in (CommitOwnerClient().origin or "")
    monkeypatch.setenv(ENDPOINT_ENV, "http://owner.example:9000/")
    assert CommitOwnerClient().endpoint == "http://owner.example:9000"
    assert CommitOwnerClient().origin == "from $COMMIT_OWNER_ENDPOINT"
    assert CommitOwnerClient("http://other:1").endpoint == "http://other:1"  # given wins
    assert resolve_endpoint("http://other:1") == ("http://other:1", None)
    with pytest.raises(ValueError, match="endpoint must be an http"):
        CommitOwnerClient("owner.example:9000")


def test_the_cli_default_is_the_same_rule() -> None:
    from coordinator.cli.ops import tables_release

    endpoint = next(p for p in tables_release.params if p.name == "endpoint")
    assert endpoint.default == DEFAULT_ENDPOINT and endpoint.envvar == ENDPOINT_ENV
