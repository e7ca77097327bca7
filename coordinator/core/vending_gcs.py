"""GCS credential vending: a downscoped OAuth 2.0 token for one table's objects (docs/security.md, decision 72).

The owner exchanges its own access token at the Security Token Service (``gcs_sts_endpoint``, default
``https://sts.googleapis.com/v1/token``; RFC 8693 token exchange, google-auth's ``sts.Client``) for a token
bounded by a Credential Access Boundary on the table's bucket (:func:`access_boundary`). Google grants the
intersection of the owner's own IAM permissions and the boundary, so the owner may hold the whole lake and the
token still opens one prefix.

The owner's token: ``gcs_token`` as given, else one refreshed from the service-account key file
``gcs_credentials_file`` (or ``GOOGLE_APPLICATION_CREDENTIALS``). Without either: 400 naming the settings.
The downscoped token lives as long as the owner's token it came from (Google does not let the exchange set a
lifetime), so its expiry is the one the exchange answers, not ``vend_duration_seconds``.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import time
from typing import Any

from client.contract.errors import InvalidArgumentError, UnavailableError
from client.contract.layout import split_cloud
from coordinator.core.vending_rules import Access, owner_only_keys
from coordinator.runtime.settings import Settings

log = logging.getLogger("commit_owner.vending")

STS_URL = "https://sts.googleapis.com/v1/token"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
READ_ROLE = "inRole:roles/storage.objectViewer"
WRITE_ROLE = "inRole:roles/storage.objectUser"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
NO_CREDENTIALS = ("this owner vends no GCS credentials: it needs a token of its own to exchange: gcs_token "
                  "(COMMIT_OWNER_GCS_TOKEN) or a service-account key file in gcs_credentials_file "
                  "(COMMIT_OWNER_GCS_CREDENTIALS_FILE) or GOOGLE_APPLICATION_CREDENTIALS")


def _quoted(text: str) -> str:
    """``text`` as a CEL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def access_boundary(location: str, access: Access) -> dict[str, Any]:
    """The Credential Access Boundary of a token for ``location`` (canonical ``gs://``).

    read: ``roles/storage.objectViewer`` on the bucket, available only for objects below the table's prefix and
    for listings whose prefix lies below it. write: also ``roles/storage.objectUser`` for objects below the
    prefix but not the owner's files below ``_delta_log`` (``owner_only_keys``, as S3's Deny); create (a path
    with no table yet, version 0 included): objectUser below the prefix, no exception. Rules add up."""
    place = split_cloud(location)
    bucket = f"//storage.googleapis.com/projects/_/buckets/{place.bucket}"
    objects = f"projects/_/buckets/{place.bucket}/objects/"
    prefix = f"{place.key}/" if place.key else ""
    below = f"resource.name.startsWith({_quoted(objects + prefix)})"
    listing = f"api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith({_quoted(prefix)})"
    rules: list[dict[str, Any]] = [{
        "availablePermissions": [READ_ROLE], "availableResource": bucket,
        "availabilityCondition": {"title": "the table's objects", "expression": f"{below} || {listing}"}}]
    if access in ("write", "create"):
        expression = below
        if access == "write":
            owned = [p.removesuffix("*") for p in owner_only_keys(place.key)]
            expression += "".join(f" && !resource.name.startsWith({_quoted(objects + p)})" for p in owned)
        rules.append({"availablePermissions": [WRITE_ROLE], "availableResource": bucket,
                      "availabilityCondition": {"title": "the table's objects the writer may write",
                                                "expression": expression}})
    return {"accessBoundary": {"accessBoundaryRules": rules}}


def _owner_token(settings: Settings, request: Any) -> tuple[str, float | None]:
    """The owner's access token and its expiry (epoch seconds, None when unknown)."""
    if settings.gcs_token:
        return settings.gcs_token, None
    path = settings.gcs_credentials_file or os.environ.get("GOOGLE_APPLICATION_CREDENTIALS", "")
    if not path:
        raise InvalidArgumentError(NO_CREDENTIALS)
    import google.auth

    creds, _ = google.auth.load_credentials_from_file(path, scopes=[SCOPE])
    creds.refresh(request)
    expiry = creds.expiry.replace(tzinfo=datetime.timezone.utc).timestamp() if creds.expiry else None
    return creds.token, expiry


def _exchange(settings: Settings, location: str, access: Access) -> tuple[str, int]:
    from google.auth.transport.requests import Request
    from google.oauth2.sts import Client

    request = Request()
    subject, subject_expiry = _owner_token(settings, request)
    now = time.time()
    reply = Client(settings.gcs_sts_endpoint or STS_URL).exchange_token(
        request, grant_type=TOKEN_EXCHANGE, subject_token=subject, subject_token_type=ACCESS_TOKEN,
        requested_token_type=ACCESS_TOKEN, additional_options=access_boundary(location, access))
    token, lifetime = reply.get("access_token"), reply.get("expires_in")
    if not isinstance(token, str) or not token:
        raise UnavailableError("the token service answered no access_token")
    if isinstance(lifetime, (int, float)) and not isinstance(lifetime, bool):
        return token, int((now + lifetime) * 1000)
    if subject_expiry is not None:  # the downscoped token ends with the token it came from
        return token, int(subject_expiry * 1000)
    raise UnavailableError("the token service answered no expires_in and the owner's token has no known expiry")


async def downscoped_token(settings: Settings, location: str, access: Access) -> tuple[str, int]:
    """A downscoped token for ``location`` and its expiry in ms. Raises InvalidArgumentError when the owner
    has no token to exchange, UnavailableError when the exchange fails."""
    if not (settings.gcs_token or settings.gcs_credentials_file or os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")):
        raise InvalidArgumentError(NO_CREDENTIALS)
    try:
        return await asyncio.to_thread(_exchange, settings, location, access)
    except (InvalidArgumentError, UnavailableError):
        raise
    except Exception as e:  # noqa: BLE001  (google-auth's errors and the transport's: no common base)
        log.warning("the token exchange at %s failed: %s: %s", settings.gcs_sts_endpoint or STS_URL,
                    type(e).__name__, e)
        raise UnavailableError(f"the Security Token Service refused or failed to downscope the owner's token "
                               f"({type(e).__name__}); see the owner's log") from None
