"""Credential vending: short-lived storage credentials that open one table's prefix (docs/security.md).

The facade's ``POST /temporary-table-credentials`` and ``/temporary-path-credentials`` land here once the
handler has checked the caller's token. For S3 the owner calls STS ``AssumeRole`` on ``vend_role_arn``
with an inline session policy built by :func:`session_policy`; AWS grants the intersection of the role's
own policies and that document, so the role may be broad and the credentials still open one prefix.
An ``abfss://`` location gets a SAS (``vending_azure.py``), a ``gs://`` one a downscoped OAuth token
(``vending_gcs.py``). A ``file://`` location has no secret to vend: the reply carries ``expiration_time`` and
``url`` only, as Unity Catalog OSS answers.

What an S3 or GCS write credential never opens: the files the owner alone writes below ``_delta_log`` (every
versioned file, the checkpoint hint, sidecars, the ``/api/v1`` commit folder). A writer stages its
commits in ``_delta_log/_staged_commits/`` and the owner ratifies and publishes them. An Azure SAS cannot
say "except": a write SAS opens them too (docs/security.md, decision 72).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from typing import Any

from client.contract.errors import InvalidArgumentError, UnavailableError
from client.contract.layout import is_local, normalize_location, split_cloud
from coordinator.core.vending_rules import Access, owner_only_keys
from coordinator.runtime.settings import Settings
from coordinator.store.vended import VendedStore

log = logging.getLogger("commit_owner.vending")

# Unity Catalog's operation names -> what the credential may do, and the token action it needs.
TABLE_OPERATIONS: dict[str, tuple[Access, str]] = {"READ": ("read", "read"), "READ_WRITE": ("write", "commit")}
PATH_OPERATIONS: dict[str, tuple[Access, str]] = {"PATH_READ": ("read", "read"),
                                                  "PATH_READ_WRITE": ("write", "commit"),
                                                  "PATH_CREATE_TABLE": ("create", "admin")}
# The Delta REST Catalog API's names for two of them: READ, or READ_WRITE to create an external table there.
DELTA_PATH_OPERATIONS = {"READ": PATH_OPERATIONS["PATH_READ"], "READ_WRITE": PATH_OPERATIONS["PATH_READ_WRITE"]}
# STS refuses a packed session policy above 2048 characters.
POLICY_LIMIT = 2048


def split_s3(location: str) -> tuple[str, str]:
    """``(bucket, key prefix)`` of a canonical ``s3://bucket/prefix`` location."""
    rest = location[len("s3://"):]
    bucket, _, key = rest.partition("/")
    return bucket, key


def session_policy(location: str, access: Access, partition: str = "aws") -> dict[str, Any]:
    """The inline session policy of a credential for ``location`` (canonical ``s3://``).

    read: ``s3:GetObject`` below the prefix and ``s3:ListBucket`` on the bucket conditioned on the prefix.
    write: also ``s3:PutObject`` / ``s3:DeleteObject`` below the prefix, with an explicit Deny on the
    owner's files below ``_delta_log`` (:func:`owner_only_keys`); ``_staged_commits/`` stays open.
    create (a path where no table is registered yet, version 0 included): read and write, no Deny.
    """
    bucket, key = split_s3(location)
    objects = f"arn:{partition}:s3:::{bucket}/{key}/*"
    statements: list[dict[str, Any]] = [
        {"Sid": "ReadObjects", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [objects]},
        {"Sid": "ListPrefix", "Effect": "Allow", "Action": ["s3:ListBucket"],
         "Resource": [f"arn:{partition}:s3:::{bucket}"],
         "Condition": {"StringLike": {"s3:prefix": [key, f"{key}/*"]}}},
    ]
    if access in ("write", "create"):
        statements.append({"Sid": "WriteObjects", "Effect": "Allow", "Action": ["s3:PutObject", "s3:DeleteObject"],
                           "Resource": [objects]})
    if access == "write":
        statements.append({"Sid": "OwnerLogFiles", "Effect": "Deny", "Action": ["s3:PutObject", "s3:DeleteObject"],
                           "Resource": [f"arn:{partition}:s3:::{bucket}/{p}" for p in owner_only_keys(key)]})
    return {"Version": "2012-10-17", "Statement": statements}


def packed(policy: dict[str, Any]) -> str:
    return json.dumps(policy, separators=(",", ":"))


@dataclasses.dataclass(frozen=True)
class Vended:
    url: str
    expiration_ms: int
    aws: dict[str, str] | None = None
    azure_sas: str | None = None  # a SAS token (query string without "?")
    gcs_token: str | None = None  # a downscoped OAuth 2.0 access token

    @property
    def kind(self) -> str:
        """What the credential is, as the ledger, the metric and the log name it."""
        if self.aws is not None:
            return "s3"
        if self.azure_sas is not None:
            return "azure"
        if self.gcs_token is not None:
            return "gcs"
        return "local"

    def to_json(self) -> dict[str, Any]:
        """Unity Catalog's TemporaryCredentials shape."""
        out: dict[str, Any] = {"expiration_time": self.expiration_ms, "url": self.url}
        if self.aws is not None:
            out["aws_temp_credentials"] = self.aws
        if self.azure_sas is not None:  # UC's one Azure field, a user-delegation or a service SAS alike
            out["azure_user_delegation_sas"] = {"sas_token": self.azure_sas}
        if self.gcs_token is not None:
            out["gcp_oauth_token"] = {"oauth_token": self.gcs_token}
        return out


class CredentialVendor:
    """Issues credentials for a location the caller is already allowed to touch (the handler checked)."""

    def __init__(self, settings: Settings, ledger: VendedStore | None = None) -> None:
        self.settings = settings
        self.ledger = ledger  # every credential vended is remembered with its token (revocation reads it)
        self._sts: Any = None

    def _client(self) -> Any:
        if self._sts is None:
            import boto3

            s = self.settings
            self._sts = boto3.client(
                "sts", endpoint_url=s.sts_endpoint_url or s.s3_endpoint_url or None, region_name=s.s3_region,
                aws_access_key_id=s.s3_access_key_id or None, aws_secret_access_key=s.s3_secret_access_key or None)
        return self._sts

    async def vend(self, location: str, access: Access, *, session_name: str, token_id: str = "-",
                   operation: str = "") -> Vended:
        """Credentials for ``location``, remembered in the ledger with ``token_id`` before they are handed out.
        Raises InvalidArgumentError when the location's cloud has no vending configured, UnavailableError when
        the cloud's token service fails or the ledger cannot record them (then nobody gets them)."""
        vended = await self._vend(normalize_location(location), access, session_name)
        if self.ledger is not None:
            await self.ledger.record(token_id, vended.url, operation or access, vended.kind, vended.expiration_ms)
        return vended

    async def _vend(self, location: str, access: Access, session_name: str) -> Vended:
        duration = self.settings.vend_duration_seconds
        if is_local(location):
            return Vended(location, int((time.time() + duration) * 1000))
        scheme = split_cloud(location).scheme
        if scheme == "abfss":
            from coordinator.core.vending_azure import azure_sas

            sas, expires_ms = await azure_sas(self.settings, location, access)
            return Vended(location, expires_ms, azure_sas=sas)
        if scheme == "gs":
            from coordinator.core.vending_gcs import downscoped_token

            token, expires_ms = await downscoped_token(self.settings, location, access)
            return Vended(location, expires_ms, gcs_token=token)
        if not self.settings.vend_role_arn:
            raise InvalidArgumentError(
                "this owner vends no S3 credentials: set vend_role_arn (--vend-role-arn / "
                "COMMIT_OWNER_VEND_ROLE_ARN) to a role the owner may assume")
        policy = packed(session_policy(location, access))
        if len(policy) > POLICY_LIMIT:
            raise InvalidArgumentError(f"the session policy for {location[:200]} is {len(policy)} characters, "
                                       f"above STS's {POLICY_LIMIT}: the location is too long")
        try:
            reply = await asyncio.to_thread(
                self._client().assume_role, RoleArn=self.settings.vend_role_arn, RoleSessionName=session_name,
                Policy=policy, DurationSeconds=duration)
        except Exception as e:  # noqa: BLE001  (botocore's errors: no common base worth naming)
            log.warning("STS AssumeRole on %s failed: %s", self.settings.vend_role_arn, type(e).__name__)
            raise UnavailableError(f"STS refused or failed to vend credentials ({type(e).__name__}); see the "
                                   "owner's log") from None
        c = reply["Credentials"]
        return Vended(location, int(c["Expiration"].timestamp() * 1000),
                      {"access_key_id": c["AccessKeyId"], "secret_access_key": c["SecretAccessKey"],
                       "session_token": c["SessionToken"]})
