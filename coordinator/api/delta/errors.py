"""The Delta REST Catalog API's error envelope, mapped from the project's error family in this one place.

``{"error": {"message", "type", "code"}}`` with ``type`` from the API's ``DeltaErrorType`` and ``code`` the HTTP
status. What a client does with the status decides the mapping: delta-spark 4.4 rebases on 409 and retries,
fails the statement on 400 and 404, and resends the same request on 429 and 5xx. So only errors that mean "you
lost a race" answer 409, and a refusal that no rebase can cure answers 400.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from client.contract import errors as e
from coordinator.api.routes import Api

PREFIX = "/api/2.1/unity-catalog/delta/v1"

# class -> (HTTP status, DeltaErrorType); the most specific class of an error decides (its MRO is walked)
BY_CLASS: dict[type[e.CommitOwnerError], tuple[int, str]] = {
    e.TableChangedError: (409, "UpdateRequirementConflictException"),
    e.CommitVersionConflictError: (409, "CommitVersionConflictException"),
    e.OwnershipProposalLostError: (409, "CommitVersionConflictException"),
    e.TooManyUnbackfilledCommitsError: (429, "ResourceExhaustedException"),
    e.LogAheadOfStoreError: (503, "InternalServerErrorException"),
    e.InvalidCommitError: (400, "InvalidParameterValueException"),
    e.IdempotencyKeyReusedError: (400, "InvalidParameterValueException"),
    e.TableNotAcceptingCommitsError: (400, "InvalidParameterValueException"),
    e.ForeignCommitFileError: (400, "InvalidParameterValueException"),
    e.CommitFailedError: (400, "BadRequestException"),
    e.NotADeltaTableError: (400, "UnsupportedTableFormatException"),
    e.InvalidArgumentError: (400, "BadRequestException"),
    e.TableNotFoundError: (404, "NoSuchTableException"),
    e.NotFoundError: (404, "NotFoundException"),
    e.TableAlreadyExistsError: (409, "AlreadyExistsException"),
    e.AlreadyExistsError: (409, "AlreadyExistsException"),
    e.PayloadTooLargeError: (413, "BadRequestException"),
    e.UnauthenticatedError: (401, "NotAuthorizedException"),
    e.PermissionDeniedError: (403, "PermissionDeniedException"),
    e.UnavailableError: (503, "InternalServerErrorException"),
    e.CommitStateUnknownError: (500, "CommitStateUnknownException"),
    e.InternalError: (500, "InternalServerErrorException"),
}

BY_STATUS = {401: "NotAuthorizedException", 403: "PermissionDeniedException", 404: "NotFoundException",
             409: "AlreadyExistsException", 429: "TooManyRequestsException", 501: "NotImplementedException"}


def delta_status_and_type(err: e.CommitOwnerError) -> tuple[int, str]:
    for cls in type(err).__mro__:
        hit = BY_CLASS.get(cls)  # type: ignore[arg-type]
        if hit is not None:
            return hit
    status = err.http_status or 500
    return status, BY_STATUS.get(status, "BadRequestException" if status < 500 else "InternalServerErrorException")


def delta_envelope(err: e.CommitOwnerError) -> tuple[int, dict[str, Any]]:
    status, kind = delta_status_and_type(err)
    return status, {"error": {"message": err.message, "type": kind, "code": status}}


API = Api("delta", PREFIX, delta_envelope, openapi=Path(__file__).resolve().parent / "openapi.json")
