"""Cold-start phase tracker and log doctor for vLLM and SGLang (issue 5). Re-exports only."""
from .catalog import Catalog, CatalogError, load_catalog
from .doctor import diagnose
from .phases import DEFAULT_BUDGETS, LOG_PHASES, PHASES, PLATFORM_PHASES
from .tracker import (
    AttemptReport,
    ColdStartReport,
    ColdStartTracker,
    PhaseReport,
    PhaseTransition,
)

__all__ = [
    "AttemptReport", "Catalog", "CatalogError", "ColdStartReport", "ColdStartTracker",
    "DEFAULT_BUDGETS", "LOG_PHASES", "PHASES", "PLATFORM_PHASES", "PhaseReport",
    "PhaseTransition", "diagnose", "load_catalog",
]
