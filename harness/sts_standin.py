"""A STAND-IN for Google's Security Token Service token endpoint (``POST https://sts.googleapis.com/v1/token``),
for tests only: no real Google STS is reachable from the test machine.

What it does: it checks each request against the fields Google documents for downscoping a token with a
Credential Access Boundary (an RFC 8693 token exchange, form-encoded): ``grant_type`` the token-exchange grant,
``subject_token_type`` and ``requested_token_type`` the access-token type, a ``subject_token``, and ``options``
a JSON object ``{"accessBoundary": {"accessBoundaryRules": [...]}}`` whose 1 to 10 rules each name
``availablePermissions`` (``inRole:`` roles) and an ``availableResource`` of a bucket; it records every request
and answers ``{access_token, issued_token_type, token_type, expires_in}`` with an opaque token of its own, or
400 ``invalid_request`` naming the field at fault.

What it does not do: evaluate the boundary, know any IAM, or mint a token any service would accept. Nothing a
test does with it proves what a downscoped token opens on Google Cloud Storage (docs/security.md).
"""

from __future__ import annotations

import json
import secrets
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
BUCKET_RESOURCE = "//storage.googleapis.com/projects/_/buckets/"


def check_exchange(form: dict[str, str]) -> dict[str, Any]:
    """The access boundary of a well-formed downscoping request; ValueError naming what is wrong."""
    if form.get("grant_type") != TOKEN_EXCHANGE:
        raise ValueError(f"grant_type must be {TOKEN_EXCHANGE}")
    for name in ("subject_token_type", "requested_token_type"):
        if form.get(name) != ACCESS_TOKEN:
            raise ValueError(f"{name} must be {ACCESS_TOKEN}")
    if not form.get("subject_token"):
        raise ValueError("subject_token is required")
    raw = form.get("options")
    if not raw:
        raise ValueError("options (the Credential Access Boundary) is required")
    try:
        options = json.loads(urllib.parse.unquote(raw))
    except ValueError:
        raise ValueError("options is not JSON") from None
    rules = options.get("accessBoundary", {}).get("accessBoundaryRules") if isinstance(options, dict) else None
    if not isinstance(rules, list) or not 1 <= len(rules) <= 10:
        raise ValueError("options.accessBoundary.accessBoundaryRules must hold 1 to 10 rules")
    for rule in rules:
        perms = rule.get("availablePermissions")
        if not perms or not all(isinstance(p, str) and p.startswith("inRole:") for p in perms):
            raise ValueError("each rule's availablePermissions must be inRole: roles")
        if not str(rule.get("availableResource", "")).startswith(BUCKET_RESOURCE):
            raise ValueError(f"each rule's availableResource must be a bucket ({BUCKET_RESOURCE}<bucket>)")
        cond = rule.get("availabilityCondition")
        if cond is not None and not (isinstance(cond, dict) and isinstance(cond.get("expression"), str)):
            raise ValueError("an availabilityCondition must carry an expression")
    return options


class StsStandIn:
    """The stand-in on 127.0.0.1 in a thread of the test process; ``requests`` holds every form it received."""

    def __init__(self, expires_in: int = 3600) -> None:
        self.expires_in = expires_in
        self.requests: list[dict[str, str]] = []
        self.issued: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802  (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                outer.requests.append(form)
                try:
                    if self.path != "/v1/token":
                        raise ValueError(f"no endpoint {self.path}")
                    check_exchange(form)
                except ValueError as e:
                    self._answer(400, {"error": "invalid_request", "error_description": str(e)})
                    return
                token = "standin-" + secrets.token_urlsafe(16)
                outer.issued.append(token)
                self._answer(200, {"access_token": token, "issued_token_type": ACCESS_TOKEN,
                                   "token_type": "Bearer", "expires_in": outer.expires_in})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/token"

    def start(self) -> StsStandIn:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def boundary(self, form: dict[str, str]) -> dict[str, Any]:
        return check_exchange(form)
