"""Unity Catalog's error envelope, mapped from the project's error family in this one place.

``{"error_code", "message", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason"}]}``
with UC OSS's statuses. The most specific class of an error decides (its MRO is walked); errors without
a class of their own (aiohttp's 404/405/413, ...) keep their status and get the UC code of that status.
``API`` declares the facade: its prefix and this envelope (its routes: routes.py).
"""

from __future__ import annotations

from typing import Any

from client.contract import errors as e
from coordinator.api.routes import Api

PREFIX = "/api/2.1/unity-catalog"

# class -> (HTTP status, UC error_code)
BY_CLASS: dict[type[e.CommitOwnerError], tuple[int, str]] = {
    e.InvalidArgumentError: (400, "INVALID_ARGUMENT"),
    e.InvalidCommitError: (400, "INVALID_ARGUMENT"),
    e.IdempotencyKeyReusedError: (400, "INVALID_ARGUMENT"),
    e.CommitVersionConflictError: (409, "COMMIT_VERSION_CONFLICT"),
    e.TableNotAcceptingCommitsError: (400, "FAILED_PRECONDITION"),
    e.ForeignCommitFileError: (400, "FAILED_PRECONDITION"),
    e.CommitFailedError: (409, "ABORTED"),
    e.TooManyUnbackfilledCommitsError: (429, "RESOURCE_EXHAUSTED"),
    e.LogAheadOfStoreError: (503, "UNAVAILABLE"),
    e.TableNotFoundError: (404, "TABLE_NOT_FOUND"),
    e.NotFoundError: (404, "NOT_FOUND"),
    e.TableAlreadyExistsError: (409, "ALREADY_EXISTS"),
    e.AlreadyExistsError: (409, "ALREADY_EXISTS"),
    e.PayloadTooLargeError: (413, "RESOURCE_EXHAUSTED"),
    e.UnauthenticatedError: (401, "UNAUTHENTICATED"),
    e.PermissionDeniedError: (403, "PERMISSION_DENIED"),
    e.UnavailableError: (503, "UNAVAILABLE"),
    e.InternalError: (500, "INTERNAL"),
}

BY_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
             409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 501: "UNIMPLEMENTED", 503: "UNAVAILABLE"}


def uc_status_and_code(err: e.CommitOwnerError) -> tuple[int, str]:
    for cls in type(err).__mro__:
        hit = BY_CLASS.get(cls)  # type: ignore[arg-type]
        if hit is not None and cls is not e.CommitOwnerError:
            return hit
    status = err.http_status or 500
    return status, BY_STATUS.get(status, "INVALID_ARGUMENT" if status < 500 else "INTERNAL")


def uc_envelope(err: e.CommitOwnerError) -> tuple[int, dict[str, Any]]:
    status, code = uc_status_and_code(err)
    return status, {"error_code": code, "message": err.message,
                    "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": code}]}


# No OpenAPI file: Unity Catalog's own spec documents the facade (docs/unity-catalog.md lists its routes).
API = Api("unity", PREFIX, uc_envelope)
