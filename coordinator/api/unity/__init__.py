"""The Unity Catalog facade (``/api/2.1/unity-catalog``): its handlers, its routes (``ROUTES``, routes.py)
and its error envelope (``API``, errors.py)."""

from coordinator.api.unity.routes import ROUTES

__all__ = ["ROUTES"]
