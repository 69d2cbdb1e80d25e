"""Catalog: hardware, models, engines (with versions), rules and presets, as data validated on load."""
from gpustack_k3.catalog.loader import (
    Catalog,
    CatalogError,
    EngineVersion,
    load_catalog,
)

__all__ = ["Catalog", "CatalogError", "EngineVersion", "load_catalog"]
