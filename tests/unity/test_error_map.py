"""Every error of the project's family answers, under /api/2.1/unity-catalog, one of Unity Catalog's codes
with its status, from the one table in coordinator/api/unity/errors.py."""

from __future__ import annotations

import client.contract.errors as errors
from coordinator.api.unity.errors import uc_envelope

# UC OSS's ErrorCode (status per code) plus the two newer codes its commits API answers.
UC_CODES = {"INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "OUT_OF_RANGE": 400, "UNAUTHENTICATED": 401,
            "PERMISSION_DENIED": 403, "NOT_FOUND": 404, "TABLE_NOT_FOUND": 404, "ALREADY_EXISTS": 409,
            "ABORTED": 409, "COMMIT_VERSION_CONFLICT": 409, "RESOURCE_EXHAUSTED": 429, "INTERNAL": 500,
            "UNIMPLEMENTED": 501, "UNAVAILABLE": 503}


def test_every_error_class_maps_to_a_unity_catalog_code_with_its_status() -> None:
    classes = [getattr(errors, n) for n in errors.__all__ if n.endswith("Error")]
    for cls in classes:
        status, body = uc_envelope(cls("why"))
        code = body["error_code"]
        if cls is errors.PayloadTooLargeError:
            assert (status, code) == (413, "RESOURCE_EXHAUSTED")
            continue
        if cls is errors.CommitStateUnknownError:
            continue  # client-side only: never answered by the service
        assert code in UC_CODES and UC_CODES[code] == status, (cls.__name__, status, code)
        assert body == {"error_code": code, "message": "why",
                        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": code}]}


def test_the_commit_outcomes_get_ucs_statuses() -> None:
    assert uc_envelope(errors.CommitVersionConflictError("x"))[1]["error_code"] == "COMMIT_VERSION_CONFLICT"
    assert uc_envelope(errors.InvalidCommitError("gap"))[0] == 400
    assert uc_envelope(errors.TooManyUnbackfilledCommitsError("x"))[:1] == (429,)
    assert uc_envelope(errors.TableNotFoundError("x"))[1]["error_code"] == "TABLE_NOT_FOUND"
    assert uc_envelope(errors.LocationNotAllowedError("x"))[1]["error_code"] == "PERMISSION_DENIED"
    # an error built from an aiohttp status (unknown route, wrong method) keeps its status
    assert uc_envelope(errors.CommitOwnerError("no", code="METHOD_NOT_ALLOWED", http_status=405))[0] == 405
