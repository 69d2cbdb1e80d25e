"""Which architectures of each vLLM release's model registry support LoRA, read with ``ast`` from the unpacked wheel
(nothing imported).

The release's own predicate: ``supports_lora(model)`` (vllm/model_executor/models/interfaces.py) is
``isinstance(model_cls, _SupportsLoRAType)``, a ``runtime_checkable`` Protocol; on a class, Python's protocol check
is ``hasattr`` of each of the protocol's members (``supports_lora``, ``packed_modules_mapping``,
``embedding_modules``, and in 0.11.0 ``embedding_padding_modules`` too; read per release from the protocol's
annotations), their values unchecked. ``SupportsLoRA`` (the mixin) defines them all, so a class is LoRA-capable when
the members are all class attributes somewhere along its bases: the tool collects the names each class body assigns
and follows its bases through the release's own modules (relative and ``vllm.`` imports; a base from outside the
wheel -- torch, transformers -- contributes none). ``ModelConfig.is_lora_supported`` reads the registry's
``_ModelInfo.supports_lora = supports_lora(model)`` (model_executor/models/registry.py).

The class an architecture names is the registry's ``(module, class)`` entry of ``_VLLM_MODELS`` (module
``vllm.model_executor.models.<m>``, or the fully-qualified ``vllm.models.<pkg>`` of the hardware-isolated packages).
Where the package picks the class by platform (``if current_platform.is_rocm(): from .amd.model import X else:
from .nvidia.model import X``, or a lazy module ``__getattr__``), the tool follows what the package picks on CUDA
(``is_cuda()`` / ``is_cuda_alike()`` true, ``is_rocm()`` / ``is_xpu()`` / ``is_cpu()`` / ``is_tpu()`` false,
``device_type == "cuda"``, ``TYPE_CHECKING`` false): the product targets NVIDIA B300/GB300.

Writes gpustack_k3/catalog/data/engines/vllm-lora-architectures.json, per release:
  ``architectures``     every key of ``_VLLM_MODELS`` (the registry; its file:line span in ``source``),
  ``not_lora_capable``  the registered architectures whose class does not support LoRA (the shorter list: most
                        registered classes do), with where each class is defined in ``classes``,
  ``unresolved``        architectures whose class this reading cannot find statically (a class made at run time,
                        e.g. by a factory call): neither capable nor not, rule vllm_checks_lora7 stays silent.

    python3 -m tools.engine_parsers.lora_archs [--unpacked DIR]
"""
from __future__ import annotations

import argparse
import ast
import json
from dataclasses import dataclass, field
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "gpustack_k3/catalog/data/engines/vllm-lora-architectures.json"
CACHE = Path.home() / ".cache/gpustack-k3"
REGISTRY = "vllm/model_executor/models/registry.py"
INTERFACES = "vllm/model_executor/models/interfaces.py"
MODELS_PKG = "vllm.model_executor.models"

# current_platform on CUDA (platforms/cuda.py: CudaPlatform, PlatformEnum.CUDA)
_CUDA_CALLS = {"is_cuda": True, "is_cuda_alike": True, "is_rocm": False, "is_xpu": False, "is_cpu": False,
               "is_tpu": False, "is_out_of_tree": False}
_CUDA_ATTRS = {"device_type": "cuda", "device_name": "cuda"}


class Unknown(Exception):
    """The static reading cannot decide (a condition, a binding, a class made at run time)."""


@dataclass(frozen=True)
class ClassRef:
    module: str
    node: ast.ClassDef


@dataclass(frozen=True)
class ModuleRef:
    module: str


@dataclass
class Wheel:
    root: Path
    trees: dict[str, ast.Module | None] = field(default_factory=dict)

    def file(self, module: str) -> Path | None:
        base = self.root / module.replace(".", "/")
        for p in (base.with_suffix(".py"), base / "__init__.py"):
            if p.is_file():
                return p
        return None

    def is_package(self, module: str) -> bool:
        return (self.root / module.replace(".", "/") / "__init__.py").is_file()

    def tree(self, module: str) -> ast.Module | None:
        if module not in self.trees:
            p = self.file(module)
            self.trees[module] = ast.parse(p.read_text(encoding="utf-8")) if p else None
        return self.trees[module]

    # --- name resolution on CUDA -------------------------------------------------------------------------------
    def absolute(self, module: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        parts = module.split(".")
        pkg = parts if self.is_package(module) else parts[:-1]
        pkg = pkg[:len(pkg) - (node.level - 1)] if node.level > 1 else pkg
        return ".".join(pkg + ([node.module] if node.module else []))

    def resolve(self, module: str, name: str, depth: int = 0) -> ClassRef | ModuleRef | None:
        """What ``name`` is bound to in ``module`` once the module has run on CUDA: a class of the wheel, a module of
        the wheel, or None (bound to something outside the wheel). Unknown where the reading cannot tell."""
        if depth > 40:
            raise Unknown(f"{module}.{name}: import chain too deep")
        tree = self.tree(module)
        if tree is None:
            raise Unknown(f"{module}: no source in the wheel")
        found = _Binder(self, module, name, depth).run(tree.body)
        if found is _UNBOUND:
            getattr_fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"),
                              None)
            if getattr_fn is not None:
                return _LazyGetattr(self, module, name, depth).run(getattr_fn, tree)
            sub = f"{module}.{name}"
            if self.file(sub):
                return ModuleRef(sub)
            raise Unknown(f"{module}: {name} not bound")
        return found

    def attrs(self, ref: ClassRef, depth: int = 0) -> set[str]:
        """The class attribute names along the class's bases (the wheel's classes only)."""
        if depth > 40:
            raise Unknown(f"{ref.module}.{ref.node.name}: bases too deep")
        names = _body_names(ref.node)
        for base in ref.node.bases:
            b = self.expr_ref(ref.module, base, depth)
            if isinstance(b, ClassRef):
                names |= self.attrs(b, depth + 1)
        return names

    def expr_ref(self, module: str, e: ast.expr, depth: int) -> ClassRef | ModuleRef | None:
        if isinstance(e, ast.Subscript):          # Generic[T], SupportsX[...]
            return self.expr_ref(module, e.value, depth)
        if isinstance(e, ast.Name):
            return self.resolve(module, e.id, depth + 1)
        if isinstance(e, ast.Attribute):
            owner = self.expr_ref(module, e.value, depth)
            if isinstance(owner, ModuleRef):
                return self.resolve(owner.module, e.attr, depth + 1)
            return None if owner is None else _raise(f"{module}: attribute {ast.unparse(e)} of a class")
        raise Unknown(f"{module}: base {ast.unparse(e)} made at run time")


_UNBOUND = object()


def _raise(msg: str):
    raise Unknown(msg)


def _body_names(node: ast.ClassDef) -> set[str]:
    out: set[str] = set()
    for s in node.body:
        if isinstance(s, ast.Assign):
            out |= {t.id for t in s.targets if isinstance(t, ast.Name)}
        elif isinstance(s, ast.AnnAssign) and s.value is not None and isinstance(s.target, ast.Name):
            out.add(s.target.id)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(s.name)
    return out


def cuda_truth(e: ast.expr, env: dict | None = None) -> bool:
    """A module-level condition's value on CUDA (TYPE_CHECKING false); Unknown for anything else."""
    env = env or {}
    if isinstance(e, ast.Name) and e.id == "TYPE_CHECKING":
        return False
    if isinstance(e, ast.Attribute) and e.attr == "TYPE_CHECKING":
        return False
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        return not cuda_truth(e.operand, env)
    if isinstance(e, ast.BoolOp):
        vals = (cuda_truth(v, env) for v in e.values)
        return all(vals) if isinstance(e.op, ast.And) else any(vals)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _CUDA_CALLS \
            and "platform" in ast.unparse(e.func.value):
        return _CUDA_CALLS[e.func.attr]
    if isinstance(e, ast.Compare) and len(e.ops) == 1:
        left, right = _value(e.left, env), _value(e.comparators[0], env)
        op = e.ops[0]
        if isinstance(op, ast.Eq):
            return left == right
        if isinstance(op, ast.NotEq):
            return left != right
        if isinstance(op, ast.In):
            return left in right
        if isinstance(op, ast.NotIn):
            return left not in right
    raise Unknown(f"condition {ast.unparse(e)}")


def _value(e: ast.expr, env: dict):
    if isinstance(e, ast.Constant):
        return e.value
    if isinstance(e, ast.Attribute) and e.attr in _CUDA_ATTRS and "platform" in ast.unparse(e.value):
        return _CUDA_ATTRS[e.attr]
    if isinstance(e, ast.Name) and e.id in env:
        return env[e.id]
    if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
        return [_value(x, env) for x in e.elts]
    raise Unknown(f"value {ast.unparse(e)}")


class _Binder:
    """Runs a module body's bindings of one name (imports, classes, plain assignments; ``if`` on CUDA)."""

    def __init__(self, wheel: Wheel, module: str, name: str, depth: int):
        self.w, self.module, self.name, self.depth = wheel, module, name, depth

    def run(self, body: list[ast.stmt]):
        bound = _UNBOUND
        for s in body:
            got = self.stmt(s)
            if got is not _UNBOUND:
                bound = got
        return bound

    def stmt(self, s: ast.stmt):
        w, name = self.w, self.name
        if isinstance(s, ast.ClassDef) and s.name == name:
            return ClassRef(self.module, s)
        if isinstance(s, ast.ImportFrom):
            for a in s.names:
                if (a.asname or a.name) == name:
                    src = w.absolute(self.module, s)
                    if not src.startswith("vllm"):
                        return None
                    if w.file(f"{src}.{a.name}") and not _binds(w, src, a.name):
                        return ModuleRef(f"{src}.{a.name}")
                    return w.resolve(src, a.name, self.depth + 1)
            return _UNBOUND
        if isinstance(s, ast.Import):
            for a in s.names:
                if a.asname == name:
                    return ModuleRef(a.name) if a.name.startswith("vllm") else None
            return _UNBOUND
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in s.targets):
            if isinstance(s.value, (ast.Name, ast.Attribute)):
                return self.w.expr_ref(self.module, s.value, self.depth)
            raise Unknown(f"{self.module}: {name} = {ast.unparse(s.value)}")
        if isinstance(s, ast.If):
            try:
                taken = s.body if cuda_truth(s.test) else s.orelse
            except Unknown:
                if not _mentions(s, name):
                    return _UNBOUND
                raise
            return self.run(taken)
        if isinstance(s, ast.Try):
            return self.run(s.body + s.orelse + s.finalbody)
        return _UNBOUND


def _binds(w: Wheel, module: str, name: str) -> bool:
    """``module`` (a package) binds ``name`` itself (else ``from module import name`` imports its submodule)."""
    tree = w.tree(module)
    if tree is None:
        return False
    for n in ast.walk(tree):
        if isinstance(n, ast.ClassDef) and n.name == name:
            return True
        if isinstance(n, (ast.ImportFrom, ast.Import)) and any((a.asname or a.name) == name for a in n.names):
            return True
    return False


def _mentions(s: ast.stmt, name: str) -> bool:
    for n in ast.walk(s):
        if isinstance(n, ast.ClassDef) and n.name == name:
            return True
        if isinstance(n, (ast.ImportFrom, ast.Import)) and any((a.asname or a.name) == name for a in n.names):
            return True
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
            return True
    return False


class _LazyGetattr:
    """A package's module-level ``__getattr__(name)`` (PEP 562) run for one name on CUDA: its ``if`` tests (on the
    platform, ``name == "X"``, ``name in __all__``), its ``from .x import mod`` imports and ``return getattr(mod,
    name)`` / ``return mod.X``."""

    def __init__(self, wheel: Wheel, module: str, name: str, depth: int):
        self.w, self.module, self.name, self.depth = wheel, module, name, depth
        self.mods: dict[str, str] = {}

    def run(self, fn: ast.FunctionDef, tree: ast.Module):
        env = {fn.args.args[0].arg: self.name, "__all__": _module_all(tree)}
        got = self.block(fn.body, env)
        if got is _UNBOUND:
            raise Unknown(f"{self.module}.__getattr__: {self.name} not returned")
        return got

    def block(self, body: list[ast.stmt], env: dict):
        for s in body:
            if isinstance(s, ast.ImportFrom):
                src = self.w.absolute(self.module, s)
                for a in s.names:
                    sub = f"{src}.{a.name}"
                    self.mods[a.asname or a.name] = sub if self.w.file(sub) else src
            elif isinstance(s, ast.If):
                got = self.block(s.body if cuda_truth(s.test, env) else s.orelse, env)
                if got is not _UNBOUND:
                    return got
            elif isinstance(s, ast.Return):
                v = s.value
                if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "getattr" \
                        and isinstance(v.args[0], ast.Name) and v.args[0].id in self.mods:
                    return self.w.resolve(self.mods[v.args[0].id], self.name, self.depth + 1)
                if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id in self.mods:
                    return self.w.resolve(self.mods[v.value.id], v.attr, self.depth + 1)
                raise Unknown(f"{self.module}.__getattr__: return {ast.unparse(v) if v else None}")
            elif isinstance(s, ast.Raise):
                raise Unknown(f"{self.module}.__getattr__ raises for {self.name}")
        return _UNBOUND


def _module_all(tree: ast.Module) -> list[str]:
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets):
            return [x.value for x in getattr(n.value, "elts", []) if isinstance(x, ast.Constant)]
    return []


# --- the registry and the predicate ------------------------------------------------------------------------------
def _module_dicts(tree: ast.Module) -> dict[str, ast.Assign | ast.AnnAssign]:
    out = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Dict):
            out[target.id] = node
    return out


def _dict_comp(comp: ast.DictComp, dicts: dict) -> ast.Dict:
    """``{k: (mod, arch) for k, (mod, arch) in _PART.items() if <test>}`` evaluated over _PART's literal entries."""
    gen = comp.generators[0]
    it = gen.iter
    if len(comp.generators) != 1 or not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                                         and it.func.attr == "items" and isinstance(it.func.value, ast.Name)):
        raise SystemExit(f"registry: dict comprehension {ast.unparse(comp)[:80]} not of the known shape")
    names = [ast.unparse(t) for t in ast.walk(gen.target) if isinstance(t, ast.Name)]   # k, mod, arch
    src = dicts[it.func.value.id].value
    keys, values = [], []
    for k, v in zip(src.keys, src.values):
        if k is None or not isinstance(v, ast.Tuple):
            continue
        env = dict(zip(names, [k.value, *(x.value for x in v.elts[:2])]))
        if all(cuda_truth(c, env) for c in gen.ifs):
            keys.append(k)
            values.append(v)
    return ast.Dict(keys=keys, values=values)


def registry_entries(registry: Path) -> tuple[dict[str, tuple[str, str]], str]:
    """({architecture: (module, class)} of ``_VLLM_MODELS`` (its ``**`` parts expanded), "first-last" span of the
    first part through ``_VLLM_MODELS``)."""
    tree = ast.parse(registry.read_text(encoding="utf-8"))
    dicts = _module_dicts(tree)
    top = dicts.get("_VLLM_MODELS")
    if top is None:
        raise SystemExit(f"{registry}: no _VLLM_MODELS dict")
    entries: dict[str, tuple[str, str]] = {}
    first = top.lineno

    def add(d: ast.Dict) -> None:
        nonlocal first
        for k, v in zip(d.keys, d.values):
            if k is None and isinstance(v, ast.DictComp):   # **{k: (mod, arch) for k, (mod, arch) in _X.items() if ..}
                add(_dict_comp(v, dicts))
            elif k is None:               # **_PART
                part = dicts[v.id]
                first = min(first, part.lineno)
                add(part.value)
            elif isinstance(k, ast.Constant) and isinstance(v, ast.Tuple) and len(v.elts) >= 2:
                mod, cls = (x.value for x in v.elts[:2])
                entries[k.value] = (mod if mod.startswith("vllm.") else f"{MODELS_PKG}.{mod}", cls)

    add(top.value)
    return entries, f"{first}-{top.end_lineno}"


def lora_members(interfaces: Path) -> tuple[frozenset[str], str]:
    """The members of ``_SupportsLoRAType`` (the protocol ``supports_lora`` checks a class against) and its line."""
    tree = ast.parse(interfaces.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "_SupportsLoRAType":
            members = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            return frozenset(members), f"{node.lineno}-{node.end_lineno}"
    raise SystemExit(f"{interfaces}: no _SupportsLoRAType")


def release(root: Path) -> dict:
    entries, span = registry_entries(root / REGISTRY)
    members, proto_span = lora_members(root / INTERFACES)
    w = Wheel(root)
    not_capable, unresolved, classes = [], {}, {}
    for arch, (mod, cls) in sorted(entries.items()):
        try:
            ref = w.resolve(mod, cls)
            if not isinstance(ref, ClassRef):
                raise Unknown(f"{mod}.{cls} is not a class of the wheel")
            capable = members <= w.attrs(ref)
        except Unknown as e:
            unresolved[arch] = str(e)
            continue
        if not capable:
            not_capable.append(arch)
            classes[arch] = f"{ref.module.replace('.', '/')}.py:{ref.node.lineno} {ref.node.name}".replace(
                "/py:", ".py:")
    return {"architectures": sorted(entries), "not_lora_capable": not_capable, "unresolved": unresolved,
            "classes": classes, "registry": span, "predicate": proto_span, "members": sorted(members)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unpacked", type=Path, default=CACHE / "engine-parsers/unpacked")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    roots = {d.name.split("-")[1]: d for d in sorted(a.unpacked.glob("vllm-*")) if (d / REGISTRY).is_file()}
    out = {}
    for version, root in sorted(roots.items()):
        rel = release(root)
        out[version] = {
            "source": f"vllm model_executor/models/registry.py:{rel.pop('registry')}@{version} (_VLLM_MODELS); "
                      f"model_executor/models/interfaces.py:{rel.pop('predicate')}@{version} (_SupportsLoRAType)",
            "platform": "cuda", **rel}
    a.out.write_text(json.dumps({"made_by": "tools/engine_parsers/lora_archs.py", "releases": out},
                                indent=1, sort_keys=True) + "\n", encoding="utf-8")
    counts = ", ".join(f"{v} {len(d['architectures'])} registered / {len(d['not_lora_capable'])} not LoRA-capable / "
                       f"{len(d['unresolved'])} unresolved" for v, d in out.items())
    print(f"{a.out}: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
