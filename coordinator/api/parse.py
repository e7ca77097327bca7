"""Parsing of HTTP request input shared by every API adapter: ids and integer fields of JSON bodies.

Each raises InvalidArgumentError naming the field, so an adapter's error middleware answers 400 in its own envelope.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from client.contract.errors import InvalidArgumentError

_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def parse_uuid(value: Any, what: str) -> str:
    """``value`` in the canonical spelling of a UUID (one already spelled so, as clients send the ids they were
    given, is returned as it is without building a ``uuid.UUID``)."""
    if isinstance(value, str) and _CANONICAL_UUID.fullmatch(value):
        return value
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise InvalidArgumentError(f"{what} must be a UUID") from None


def int_field(body: dict[str, Any], name: str, *, default: int | None = None, required: bool = False,
              minimum: int | None = None) -> int | None:
    """The integer ``name`` of a JSON request body (``default`` when absent; null is absent): never a bool, at
    most 2**62 in size, at least ``minimum``."""
    v = body.get(name, default)
    if v is None:
        if required:
            raise InvalidArgumentError(f"{name} is required")
        return None
    if isinstance(v, bool) or not isinstance(v, int) or abs(v) > 2**62:
        raise InvalidArgumentError(f"{name} must be an integer")
    if minimum is not None and v < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}")
    return v


def str_field(body: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    """The non-empty string ``name`` of a JSON request body."""
    v = body.get(name)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not v:
        raise InvalidArgumentError(f"{name} is required and must be a non-empty string")
    return v


def location_field(body: dict[str, Any]) -> str:
    """The ``location`` of a JSON body that places a table (a registration, the Delta API's createTable), as given:
    what the auth middleware judges (``Locate.BODY``) and the handler then uses."""
    v = body.get("location")
    if not isinstance(v, str):
        raise InvalidArgumentError("location is required and must be a string")
    return v
