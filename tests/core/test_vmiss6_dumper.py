"""tools/engine_parsers/_build.py typed_stub_unions: a stub's ``|`` with a typing form gives a Union the parser
helpers take apart, so an option typed ``torch.dtype | Literal[...]`` (LoRAConfig.lora_dtype,
vllm/config/lora.py:46@0.33.0) keeps its choices in the dump, as the release's parser has them (the engine
oracle, vLLM 0.33.0: ``--lora-dtype x`` refused with "invalid choice: 'x' (choose from 'auto', 'bfloat16',
'float16')")."""
from __future__ import annotations

import importlib.util
import typing
from pathlib import Path

import pytest

from gpustack_k3.catalog.loader import load_catalog
from gpustack_k3.core.argv import version_dump

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def stub_meta():
    from gpustack_k3.oracle.engine_side import stubs

    spec = importlib.util.spec_from_file_location("vmiss6_build", REPO / "tools" / "engine_parsers" / "_build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    meta = stubs._StubMeta
    saved = {name: meta.__dict__[name] for name in ("__or__", "__ror__")}
    yield stubs, build
    for name, op in saved.items():
        setattr(meta, name, op)


def test_a_stub_or_a_literal_is_a_union_of_both(stub_meta):
    stubs, build = stub_meta
    dtype = stubs._stub_class("dtype", "torch")
    lit = typing.Literal["auto", "bfloat16", "float16"]
    assert (dtype | lit) is dtype            # the plain stub: the Literal is lost (the dump's choices: null)
    build.typed_stub_unions(stubs)
    both = dtype | lit
    assert typing.get_origin(both) is typing.Union and set(typing.get_args(both)) == {dtype, lit}
    assert (dtype | None) is dtype           # anything else: as before
    assert (dtype | int) is dtype


@pytest.mark.parametrize("release", ["0.28.0", "0.29.0", "0.33.0", "0.34.0"])
def test_the_dumps_give_lora_dtype_its_choices(release):
    opt = version_dump(load_catalog().engines["vllm"].versions[release]).flag("--lora-dtype")
    assert list(opt.choices) == ["auto", "bfloat16", "float16"]


@pytest.mark.parametrize("release", ["0.33.0", "0.34.0"])
def test_check_args_refuses_a_lora_dtype_outside_them(release):
    from tests.core.test_vllm_checks import product

    out = product(release, ["/models/smollm2-hf", "--lora-dtype", "x"], {})
    assert out["verdict"] == "refuse", out
    assert product(release, ["/models/smollm2-hf", "--lora-dtype", "bfloat16"], {})["verdict"] == "pass"
