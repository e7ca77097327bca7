"""Every error reply is built here, in the envelope of the API the request belongs to.

The project's own envelope (``API``, the root prefix: ``/api/v1`` and the probes):
``{"error": {"code", "message", "retryable", "conflict", "latestTableVersion"}}``. Errors of the
CommitOwnerError family keep their code and flags; aiohttp's own HTTP errors (unknown route, wrong
method, body too large) are mapped to codes; anything else is a 500 INTERNAL whose message carries no
stack trace or host path (the trace goes to the log with the request id). Which API's envelope answers:
the matched route's, else the API of the longest prefix the path lies under (routes.py ``RouteTable``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Literal, overload

import orjson
from aiohttp import web

from client.contract.errors import CommitOwnerError, InternalError, InvalidArgumentError, PayloadTooLargeError
from coordinator.api.keys import OUTCOME, REQUEST_ID
from coordinator.api.routes import ROUTE_TABLE, Api, Handler

log = logging.getLogger("commit_owner.api")


_HTTP_CODES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
}


def json_response(data: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def envelope(err: CommitOwnerError) -> tuple[int, dict[str, Any]]:
    return err.http_status, err.to_envelope()


# The project's API: /api/v1 and the probes, and the root prefix (whatever no other API's prefix covers).
API = Api("v1", "/", envelope, openapi=Path(__file__).resolve().parent.parent / "openapi.json")


def cause_of(e: BaseException) -> str:
    """The error at the bottom of ``e``'s chain (the driver's own, under SQLAlchemy's wrapper), on one line."""
    seen = e
    while seen.__cause__ is not None and seen.__cause__ is not seen:
        seen = seen.__cause__
    orig = getattr(seen, "orig", None)
    if isinstance(orig, BaseException):
        seen = orig
    if seen is e:
        return "none recorded"
    text = " ".join(str(seen).split())
    return f"{type(seen).__module__}.{type(seen).__name__}: {text}" if text else type(seen).__name__


def api_of(request: web.Request) -> Api:
    """The API whose envelope answers ``request`` (the project's in an app without a route table)."""
    table = request.app.get(ROUTE_TABLE)
    return table.api_of(request) if table is not None else API


def error_response(err: CommitOwnerError, request_id: str | None = None, *, api: Api = API) -> web.Response:
    """The error reply in ``api``'s envelope."""
    status, body = api.envelope(err)
    resp = api.reply(status, body) if api.reply is not None else json_response(body, status=status)
    if request_id:
        resp.headers["X-Request-Id"] = request_id
    return resp


def _new_request_id() -> str:
    """32 random hex digits (a uuid4's ``hex`` without building the UUID object: this runs per request)."""
    return os.urandom(16).hex()


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    request_id = request.headers.get("X-Request-Id") or _new_request_id()
    if len(request_id) > 64 or not request_id.isprintable():
        request_id = _new_request_id()
    request[REQUEST_ID] = request_id
    try:
        resp = await handler(request)
    except CommitOwnerError as e:
        request[OUTCOME] = e.code
        if e.http_status == 503:
            # The answer names only the class of what failed (no hosts, no paths); the log names the error
            log.warning("%s (request %s): %s; cause: %s", e.code, request_id, e, cause_of(e))
        return error_response(e, request_id, api=api_of(request))
    except web.HTTPRequestEntityTooLarge:
        request[OUTCOME] = "PAYLOAD_TOO_LARGE"
        # (aiohttp's exception does not keep the limit as an attribute: the request does)
        return error_response(PayloadTooLargeError(f"request body larger than {request.client_max_size} bytes"),
                              request_id, api=api_of(request))
    except web.HTTPException as e:
        if e.status < 400:
            raise
        code = _HTTP_CODES.get(e.status, "INVALID_ARGUMENT" if e.status < 500 else "INTERNAL")
        request[OUTCOME] = code
        err = CommitOwnerError(e.reason or code, code=code, http_status=e.status)
        return error_response(err, request_id, api=api_of(request))
    except Exception:
        log.exception("unhandled error (request %s)", request_id)
        request[OUTCOME] = "INTERNAL"
        return error_response(InternalError(f"internal error; see the service log for request {request_id}"),
                              request_id, api=api_of(request))
    resp.headers["X-Request-Id"] = request_id
    return resp


@overload
def query_int(request: web.Request, name: str, *, required: Literal[True]) -> int: ...
@overload
def query_int(request: web.Request, name: str, *, required: bool = False) -> int | None: ...
def query_int(request: web.Request, name: str, *, required: bool = False) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        if required:
            raise InvalidArgumentError(f"query parameter {name} is required")
        return None
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgumentError(f"query parameter {name} must be an integer") from None
    if abs(value) > 2**62:
        raise InvalidArgumentError(f"query parameter {name} is out of range")
    return value


def _names(names: list[str]) -> str:
    # Names come from the caller: echo a few, shortened, so an error body never grows with the request.
    shown = [n if len(n) <= 40 else n[:40] + "..." for n in names[:5]]
    return ", ".join(repr(n) for n in shown) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def only_params(request: web.Request, allowed: set[str]) -> None:
    unknown = sorted(set(request.query) - allowed)
    if unknown:
        raise InvalidArgumentError(f"unknown query parameter(s): {_names(unknown)}")
    repeated = sorted(k for k in set(request.query) if len(request.query.getall(k)) > 1)
    if repeated:
        raise InvalidArgumentError(f"query parameter(s) given more than once: {_names(repeated)}")


async def json_object(request: web.Request) -> dict:
    """The request's JSON object (an empty body is ``{}``), its fields not judged yet: what the auth middleware
    reads to find the table a request acts on before anything else of the request is judged."""
    raw = await request.read()  # (aiohttp keeps the bytes: the handler reads the same body again)
    try:
        body = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        raise InvalidArgumentError("request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise InvalidArgumentError("request body must be a JSON object")
    return body


def only_fields(body: dict, allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidArgumentError(f"unknown field(s): {_names(unknown)}")


async def json_body(request: web.Request, allowed: set[str]) -> dict:
    body = await json_object(request)
    only_fields(body, allowed)
    return body
