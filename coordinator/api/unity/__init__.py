"""The Unity Catalog facade's HTTP handlers (``/api/2.1/unity-catalog``); routes in ``routes.py``."""
