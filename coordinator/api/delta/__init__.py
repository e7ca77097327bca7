"""The Delta REST Catalog API (``/api/2.1/unity-catalog/delta/v1``): its handlers, its routes (``ROUTES``,
routes.py), its error envelope (``API``, errors.py) and its OpenAPI operations (openapi.json)."""

from coordinator.api.delta.routes import ROUTES

__all__ = ["ROUTES"]
