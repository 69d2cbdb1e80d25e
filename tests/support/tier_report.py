"""pytest plugin (``-p tests.support.tier_report``, loaded by ``tools/testgate.py``): every test's markers
go into the JUnit report as a ``markers`` property, so the gate can tell a skip of a tier that may skip
(``kind``, ``image_build``) from a skip of a tier that was prepared."""
from __future__ import annotations


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        names = sorted({m.name for m in item.iter_markers()})
        item.user_properties.append(("markers", ",".join(names)))
