"""Azure credential vending: a SAS on one table's folder (docs/security.md "Credential vending", decision 72).

The owner signs it itself: a **user-delegation SAS** when it runs with an Entra identity (``azure_use_identity``:
it asks the Blob service for a user delegation key with that identity, then signs with the key), else a
**service SAS** signed with the account key (``azure_account_key``, or the key of ``azure_connection_string``).
An owner that signs its own requests with a SAS only has nothing to sign with: 400 naming the settings.

Scope (``azure_vend_scope``): ``directory`` (the default) is a directory SAS (``sr=d``, ``sdd`` = the depth of
the table's folder), which opens the folder and everything below it and nothing else; Azure honours it on
accounts with a hierarchical namespace (ADLS Gen2, what ``abfss://`` names). ``container`` is a container SAS
(``sr=c``): it opens the whole container, for flat-namespace accounts (and azurite, which knows no ``sr=d``),
where a table alone cannot be scoped; an operator who chooses it keeps one table per container.

Permissions: read = read + list (``rl``); write and create = read, add, create, write, delete, list
(``racwdl``). A SAS has no Deny, so a write SAS also opens the owner's files below ``_delta_log``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any

from client.contract.errors import InvalidArgumentError, UnavailableError
from client.contract.layout import split_cloud
from coordinator.core.vending_rules import Access
from coordinator.runtime.settings import Settings
from coordinator.storage.azure import configured_account, other_account

log = logging.getLogger("commit_owner.vending")

READ_PERMISSIONS = "rl"
WRITE_PERMISSIONS = "racwdl"
NO_SIGNER = ("this owner vends no Azure credentials: it needs the account key to sign a service SAS "
             "(azure_account_key / COMMIT_OWNER_AZURE_ACCOUNT_KEY, or an AccountKey in azure_connection_string) "
             "or an Entra identity to sign a user-delegation SAS (azure_use_identity / "
             "COMMIT_OWNER_AZURE_USE_IDENTITY); a SAS of its own (azure_sas_token) cannot sign another")


def permissions(access: Access) -> str:
    return READ_PERMISSIONS if access == "read" else WRITE_PERMISSIONS


def account_and_key(settings: Settings) -> tuple[str, str | None, str]:
    """The owner's account, its key (None without one) and its Blob endpoint, from the settings or the
    connection string (read by azure-storage-blob itself)."""
    account, key = configured_account(settings), settings.azure_account_key or None
    endpoint = settings.azure_endpoint
    if settings.azure_connection_string:
        from azure.storage.blob import BlobServiceClient

        client = BlobServiceClient.from_connection_string(settings.azure_connection_string)
        cred = client.credential
        if key is None and getattr(cred, "account_key", None):
            key = cred.account_key
        endpoint = endpoint or client.primary_endpoint.split("?", 1)[0]
    return account, key, (endpoint or f"https://{account}.blob.core.windows.net").rstrip("/")


def _check_account(location: str, account: str) -> None:
    if not account:
        raise InvalidArgumentError("this owner vends no Azure credentials: azure_account_name "
                                   "(COMMIT_OWNER_AZURE_ACCOUNT_NAME) is not set")
    why = other_account(split_cloud(location), account)
    if why is not None:
        raise InvalidArgumentError(why)


def sas_for(location: str, access: Access, expiry: dt.datetime, *, account: str, scope: str,
            key: str | None = None, delegation: Any = None) -> str:
    """The SAS token (no leading ``?``) of ``location`` signed with ``key`` or the user delegation key
    ``delegation``."""
    from azure.storage.blob import generate_blob_sas, generate_container_sas

    place = split_cloud(location)
    signer: dict[str, Any] = {"user_delegation_key": delegation} if delegation is not None else {"account_key": key}
    if scope == "container" or not place.key:  # a table at a container's root: the container is its folder
        return generate_container_sas(account, place.bucket, permission=permissions(access), expiry=expiry,
                                      **signer)
    return generate_blob_sas(account, place.bucket, place.key, permission=permissions(access), expiry=expiry,
                             is_directory=True, **signer)


def _delegation_key(endpoint: str, start: dt.datetime, expiry: dt.datetime) -> Any:
    from azure.identity import DefaultAzureCredential
    from azure.storage.blob import BlobServiceClient

    with DefaultAzureCredential() as cred, BlobServiceClient(endpoint, credential=cred) as client:
        return client.get_user_delegation_key(start, expiry)


async def azure_sas(settings: Settings, location: str, access: Access) -> tuple[str, int]:
    """A SAS for ``location`` (canonical ``abfss://``) and its expiry in ms. Raises InvalidArgumentError when
    the owner has nothing to sign with or the location is another account's; UnavailableError when the user
    delegation key cannot be had."""
    account, key, endpoint = account_and_key(settings)
    _check_account(location, account)
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    expiry = now + dt.timedelta(seconds=settings.vend_duration_seconds)
    scope = settings.azure_vend_scope
    if settings.azure_use_identity:
        try:
            delegation = await asyncio.to_thread(_delegation_key, endpoint, now - dt.timedelta(minutes=5), expiry)
        except Exception as e:  # noqa: BLE001  (azure-identity's and azure-core's errors: no common base)
            log.warning("getting a user delegation key from %s failed: %s: %s", endpoint, type(e).__name__, e)
            raise UnavailableError(f"Azure refused or failed to give a user delegation key ({type(e).__name__}); "
                                   "see the owner's log") from None
        sas = sas_for(location, access, expiry, account=account, scope=scope, delegation=delegation)
    elif key:
        sas = sas_for(location, access, expiry, account=account, scope=scope, key=key)
    else:
        raise InvalidArgumentError(NO_SIGNER)
    return sas, int(expiry.timestamp() * 1000)
