"""Catalog: hardware, models, engines (with versions) and presets, as data validated on load (rules: core/rules)."""
from gpustack_k3.catalog.loader import (
    Catalog,
    CatalogError,
    EngineVersion,
    load_catalog,
)

__all__ = ["Catalog", "CatalogError", "EngineVersion", "load_catalog"]
