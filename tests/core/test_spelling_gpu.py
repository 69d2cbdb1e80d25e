"""One judge of spellings (issue 33 item 4): a document's GPU type spelled otherwise than the catalog's key (B300)
is refused by validate as the CRD's CEL refuses it (core/rules/spec.py unknown-catalog-entry reads
Resolved.typed_gpu_type); a command line's --gpu-type is read in any case."""
from __future__ import annotations

from gpustack_k3.core.rules import validate

from .conftest import preset_doc


def test_a_document_gpu_type_in_another_case_is_refused_naming_the_key():
    found = [f for f in validate(preset_doc("vllm-fixed", {"hardware": {"gpuType": "B300"}}))
             if f.rule == "unknown-catalog-entry"]
    assert [f.field for f in found] == ["spec.hardware.gpuType"] and "'b300'" in found[0].message, found
    assert not [f for f in validate(preset_doc("vllm-fixed", {"hardware": {"gpuType": "b300"}}))
                if f.rule == "unknown-catalog-entry"]
