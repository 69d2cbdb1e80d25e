"""What a raise site's guarding conditions test, as settings a command line can make (issue 31 item 1: the
site-directed synthesis of tools/engine_oracle/synth.py).

``site_knobs(tree, line, cls)``: the ``if`` tests on the path from the function to the raise (and an ``assert``'s own
test), each name they read turned into a knob: ``(chain, values, want)`` where ``chain`` is the attribute chain the
condition reads (``("self", "parallel_config", "tensor_parallel_size")``, ``("envs", "VLLM_USE_V2_MODEL_RUNNER")``,
``("hf_config", "architectures")``), ``values`` the candidate values, the one meeting the condition first (the
constant it is compared with, constant+-1 across ``<``/``>``, the elements of an ``in`` tuple, True/False for a bare
truth test, None for ``is None``), and ``want`` whether the site needs the test true.
``call_knobs(tree, name)``: the same for the branches around every call of ``name`` in a module (what makes a caller
enter a function the corpus never entered).

``resolve(chain, ...)``: where a chain lands on a command line: an environment variable (``VLLM_*``/``SGLANG_*``), a
config.json field (read from ``hf_config``/``hf_text_config``/``text_config``), a top-level option of the release's
parser (the chain's last name is one of its dests: vLLM's ``self.parallel_config.x`` is the flag of ``x``), or a
key of a JSON option (``self.speculative_config.method`` -> ``--speculative-config {"method": ...}``; inside a config
class, ``self.x`` -> that class's JSON option).
"""
from __future__ import annotations

import ast
import re

ENV_RE = re.compile(r"^(VLLM|SGLANG|SGL)_[A-Z0-9_]+$")
HF_NAMES = {"hf_config", "hf_text_config", "text_config", "hf_overrides", "model_arch_config", "hf_vision_config"}
_ENV_CALLS = {"get_bool_env_var", "get_int_env_var", "get_str_env_var", "getenv", "get_env_var", "is_set",
              "envs_is_set", "get_float_env_var"}
_EDGE = [0, 1, -1, 2, 8]


def chain_of(node) -> tuple[str, ...] | None:
    """``self.a.b`` -> ("self", "a", "b"); ``envs.X.get()`` / ``get_bool_env_var("X")`` / ``os.environ.get("X")``
    -> ("envs", "X"); ``getattr(o, "n", d)`` -> chain(o) + ("n",); ``x[0]`` -> chain(x); else None."""
    if isinstance(node, ast.Subscript):
        return chain_of(node.value)
    if isinstance(node, ast.Call):
        fn = node.func
        fname = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else None
        strs = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if fname in _ENV_CALLS or fname == "get" and isinstance(fn, ast.Attribute) and \
                ast.unparse(fn.value).endswith("environ"):
            if strs and ENV_RE.match(strs[0]):
                return ("envs", strs[0])
        if fname == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            base = chain_of(node.args[0])
            return (base or ("?",)) + (str(node.args[1].value),)
        if fname in ("get", "value") and isinstance(fn, ast.Attribute):   # envs.SGLANG_X.get()
            base = chain_of(fn.value)
            if base and ENV_RE.match(base[-1]):
                return ("envs", base[-1])
            if fname == "get" and base and strs:                           # some_dict.get("key")
                return base + (strs[0],)
        if fname in ("startswith", "endswith", "lower", "upper", "strip") and isinstance(fn, ast.Attribute):
            return chain_of(fn.value)
        return None
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and parts and \
            re.match(r"^(get_)?[a-z_]+?(_of)?$", node.func.id) and (node.func.id.startswith("get_") or
                                                                    node.func.id.endswith("_of")):
        # ``model_config_of(server_args).dtype`` / ``get_model_config(x).dtype``: the object the accessor returns
        parts.append(re.sub(r"^get_|_of$", "", node.func.id))
    elif isinstance(node, ast.Name):
        parts.append(node.id)
    else:
        return None
    return tuple(reversed(parts))


# module-level constant collections of the release's validation files (``DEPRECATED_QUANTIZATION_METHODS = [...]``):
# a condition ``x in NAME`` compares with their elements (filled by ``learn_constants``)
CONSTANTS: dict[str, list] = {}


def learn_constants(trees) -> dict[str, list]:
    out: dict[str, list] = {}
    for tree in trees:
        for st in getattr(tree, "body", []):
            target = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else \
                st.target if isinstance(st, ast.AnnAssign) else None
            value = getattr(st, "value", None)
            if isinstance(target, ast.Name) and isinstance(value, (ast.List, ast.Tuple, ast.Set)):
                vals = [e.value for e in value.elts if isinstance(e, ast.Constant)]
                if vals:
                    out[target.id] = vals
            elif isinstance(target, ast.Name) and isinstance(value, ast.Dict):
                vals = [k.value for k in value.keys if isinstance(k, ast.Constant)]
                if vals:
                    out[target.id] = vals
            elif isinstance(target, ast.Name) and target.id.isupper() and isinstance(value, ast.Constant) and \
                    isinstance(value.value, (int, float)) and not isinstance(value.value, bool):
                # a scalar bound (``MAX_WATERMARK_CONTEXT_WINDOW = 64``): ``x <= MAX`` compares with its value
                out[target.id] = [value.value]
    CONSTANTS.clear()
    CONSTANTS.update(out)
    ENUMS.clear()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any("Enum" in ast.unparse(b) for b in node.bases):
                names = [t.id for st in node.body if isinstance(st, ast.Assign) for t in st.targets
                         if isinstance(t, ast.Name) and t.id.isupper()]
                if names:
                    ENUMS.setdefault(node.name, names)
    return out


# enum class -> its member names (``AttentionBackendEnum`` -> ["FLASH_ATTN", ...]), filled by ``learn_constants``: a
# field annotated with the enum takes one of them
ENUMS: dict[str, list[str]] = {}


class local_constants:
    """``with local_constants(chain):`` the constant tuples/lists the function at the end of ``chain`` binds to a
    local once (``kda_architectures = ("KimiLinearForCausalLM", ...)``) are constants for ``_const`` meanwhile."""

    def __init__(self, chain):
        fn = next((n for n in reversed(chain) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        local = local_values(fn) if fn is not None else {}
        self.add = {k: [e.value for e in v.elts if isinstance(e, ast.Constant)] for k, v in local.items()
                    if isinstance(v, (ast.Tuple, ast.List, ast.Set)) and k not in CONSTANTS}
        self.add = {k: v for k, v in self.add.items() if v}

    def __enter__(self):
        CONSTANTS.update(self.add)
        return self

    def __exit__(self, *exc):
        for k in self.add:
            CONSTANTS.pop(k, None)


def imported_candidates(trees, root) -> list[tuple]:
    """Per module of the release's own package (vllm, sglang) that ``trees`` import, in name order: its two possible
    files (``mod.py``, ``mod/__init__.py``). ``imported_trees`` parses the first that exists; tools/engine_oracle/
    synth.py stamps both (a module added, changed or removed is another analysis)."""
    from pathlib import Path

    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
    out = []
    for mod in sorted(names):
        if mod.split(".")[0] in ("vllm", "sglang"):
            base = Path(root, *mod.split("."))
            out.append((base.with_suffix(".py"), base / "__init__.py"))
    return out


def imported_trees(trees, root) -> list:
    """The modules of the release's own package that the validation files import (``from vllm.model_executor.layers
    import quantization as me_quant``, ``from sglang.srt.utils import X``), parsed: their module-level constant
    collections are what conditions such as ``x in me_quant.DEPRECATED_QUANTIZATION_METHODS`` compare with."""
    out = []
    for files in imported_candidates(trees, root):
        for f in files:
            if f.is_file():
                try:
                    out.append(ast.parse(f.read_text(errors="replace")))
                except SyntaxError:
                    pass
                break
    return out


def _const(node):
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = node.id if isinstance(node, ast.Name) else node.attr
        if name in CONSTANTS:
            return list(CONSTANTS[name])
    if isinstance(node, ast.Constant):
        return [node.value]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, (int, float)):
        return [-node.operand.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        vals = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        return vals or None
    if isinstance(node, ast.Attribute) and node.attr.isupper():   # an enum member: Mode.NONE -> "NONE"
        return [node.attr, node.attr.lower()]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return [node.attr]   # torch.bfloat16: the --dtype value "bfloat16"
    return None


def _cmp_values(op, consts: list, want: bool) -> list:
    """Candidate values meeting ``x <op> consts`` (want True) or its negation (want False), best first."""
    c = consts[0]
    num = isinstance(c, (int, float)) and not isinstance(c, bool)
    if isinstance(op, (ast.In, ast.NotIn)):
        inside = isinstance(op, ast.In) == want
        return list(consts) if inside else ["__none_of__"] + [v for v in (-1, 0, 99) if v not in consts]
    if isinstance(op, (ast.Is, ast.IsNot)):
        is_ = isinstance(op, ast.Is) == want
        return [c] if is_ else ["__set__"]
    if num:
        gt = {ast.Gt: c + 1, ast.GtE: c, ast.Lt: c - 1, ast.LtE: c, ast.Eq: c, ast.NotEq: c + 1}
        lt = {ast.Gt: c, ast.GtE: c - 1, ast.Lt: c, ast.LtE: c + 1, ast.Eq: c + 1, ast.NotEq: c}
        best = (gt if want else lt).get(type(op), c)
        return list(dict.fromkeys([best, c, c + 1, c - 1, 0, -1]))
    if isinstance(op, ast.Eq) == want or isinstance(op, ast.NotEq) != want:
        return list(consts)
    return ["__other__"] + (list(consts) if isinstance(c, bool) else [])


def test_knobs(test, want: bool) -> list[tuple[tuple, list, bool]]:
    """The knobs of one condition; ``want``: the site needs it true."""
    out: list = []
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test_knobs(test.operand, not want)
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.And) and not want and len(test.values) > 1:
            # ``a and b`` false: one operand false is enough, the last (``x is not None and x > 0``: the test
            # proper), the others left to the line; all of them false would undo the knobs a later test wants
            return test_knobs(test.values[-1], want)
        for v in test.values:
            out += test_knobs(v, want)
        return out
    if isinstance(test, ast.Compare) and len(test.ops) > 1:
        # ``1 <= x <= 64``: the conjunction of its links (wanted false: the last one broken)
        links = [ast.Compare(left=a, ops=[op], comparators=[b])
                 for a, op, b in zip([test.left] + test.comparators[:-1], test.ops, test.comparators)]
        return test_knobs(ast.BoolOp(op=ast.And(), values=links), want)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        for a, b, flip in ((left, right, False), (right, left, True)):
            ch, consts = chain_of(a), _const(b)
            if ch and consts is not None:
                if flip and isinstance(op, (ast.Gt, ast.GtE, ast.Lt, ast.LtE)):
                    op = {ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.Lt: ast.Gt, ast.LtE: ast.GtE}[type(op)]()
                if isinstance(op, (ast.In, ast.NotIn)) and flip:   # "x" in self.y: y a list/str containing x
                    return [(ch, [consts[0], [consts[0]]], want)]
                return [(ch, _cmp_values(op, consts, want), want)]
        if isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "len" and left.args:
            ch = chain_of(left.args[0])
            consts = _const(right)
            if ch and consts and isinstance(consts[0], int):
                return [(ch, ["__len__%d" % v for v in _cmp_values(op, consts, want)[:2]], want)]
        pair = _relation_values(op, want) if chain_of(left) and chain_of(right) else None
        for k, side in enumerate((left, right)):   # x > self.y: both names, values of their type
            ch = chain_of(side)
            if ch:
                out.append((ch, list(pair[k]) if pair else [], want))
        return out
    if isinstance(test, ast.Call):
        fn = test.func
        fname = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        ch = chain_of(test)
        if ch and ch[0] == "envs":
            return [(ch, ["1", "true"] if want else ["0", None], want)]
        if fname in ("any", "all") and len(test.args) == 1 and isinstance(test.args[0], ast.GeneratorExp) and \
                len(test.args[0].generators) == 1:
            # ``any(node < 0 for node in value)``: the element's test, on a one-element list of the iterable
            gen = test.args[0]
            return lift_loop(test_knobs(gen.elt, want), gen.generators[0].target, gen.generators[0].iter)
        if fname == "isinstance" and len(test.args) == 2 and chain_of(test.args[0]):
            # ``isinstance(v, dict)``: a value of that type (wanted) or of another (not wanted)
            kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
            names = {ast.unparse(k) for k in kinds}
            typed = {"dict": {}, "str": "synth", "int": 1, "float": 0.5, "list": [1], "bool": True}
            vals = [typed[n] for n in names if n in typed] if want else \
                [v for n, v in typed.items() if n not in names and not (n == "int" and "float" in names)][:2]
            return [(chain_of(test.args[0]), vals, want)]
        if fname in ("isinstance", "hasattr", "callable") and test.args:
            ch = chain_of(test.args[0])
            return [(ch, [], want)] if ch else []
        if ch:   # x.startswith("y")
            strs = [a.value for a in test.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            return [(ch, strs if want else ["__other__"], want)]
        for a in test.args:   # is_deepseek_nsa(hf_config), _is_hybrid(model_config): the argument's knobs
            c = chain_of(a)
            if c:
                out.append((c, [], want))
        if isinstance(fn, ast.Attribute):   # self.model_config.is_hybrid(): a predicate of the config object
            c = chain_of(fn)
            if c:
                out.append((c, [True, False] if want else [False, True], want))
        return out
    ch = chain_of(test)
    if ch:
        return [(ch, [True, 1, "1"] if want else [False, 0, None], want)]
    return out


def _relation_values(op, want: bool) -> tuple[list, list] | None:
    """Values for the two names of ``x <op> y`` (``cfg.max_ep_size > cfg.tp_size``) meeting it (want True) or not: a
    large and a small number across an order, one number twice or two different ones across ``==``/``!=``."""
    big, small = [16, 8], [1, 2]
    if isinstance(op, (ast.Gt, ast.GtE, ast.Lt, ast.LtE)):
        left_big = isinstance(op, (ast.Gt, ast.GtE)) == want
        return (big, small) if left_big else (small, big)
    if isinstance(op, (ast.Eq, ast.NotEq)):
        same = isinstance(op, ast.Eq) == want
        return ([2], [2]) if same else ([2], [1])
    return None


def lift_loop(knobs: list, target, iterable) -> list:
    """Knobs on a loop's element (``for cpuset in value``, ``any(n < 0 for n in value)``) as knobs on the iterable,
    each value a one-element list (a placeholder stays as it is)."""
    if isinstance(target, ast.Tuple) and len(target.elts) == 2 and all(isinstance(e, ast.Name) for e in target.elts) \
            and isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute) and \
            iterable.func.attr == "items" and not iterable.args and chain_of(iterable.func.value):
        # ``for pattern, target in v.items()`` (vLLM QuantizationConfigArgs._validate_targets,
        # quantization.py:226-251@0.34.0): a one-entry dict, the key's values as keys (an empty dict the entry) or
        # the entry's values under a made-up key
        it = chain_of(iterable.func.value)
        key, val = target.elts[0].id, target.elts[1].id
        out = []
        for ch, values, want in knobs:
            if ch and ch[0] in (key, val) and len(ch) == 1:
                vals = [v if isinstance(v, str) and v.startswith("__") else
                        ({v: {}} if ch[0] == key else {"synth": v}) for v in values
                        if ch[0] != key or isinstance(v, str)]
                out.append((it, vals, want))
            else:
                out.append((ch, values, want))
        return out
    it = chain_of(iterable)
    if not isinstance(target, ast.Name) or not it:
        return knobs
    out = []
    for ch, values, want in knobs:
        if ch and ch[0] == target.id:
            vals = [v if isinstance(v, str) and v.startswith("__") else [v] for v in values]
            out.append((it + tuple(ch[1:]), vals, want))
        else:
            out.append((ch, values, want))
    return out


def learn_properties(trees) -> dict[str, ast.AST]:
    """``@property`` methods whose body is one ``return <expr>`` (``use_ubatching``: ``return self.enable_dbo or
    self.ubatch_size > 1``), by name; a name two classes define differently is left out."""
    out: dict = {}
    bad: set[str] = set()
    for tree in trees:
        for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
            for node in cls.body:
                if not (isinstance(node, ast.FunctionDef) and any(
                        ast.unparse(d) in ("property", "cached_property", "functools.cached_property")
                        for d in node.decorator_list)):
                    continue
                body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
                if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
                    # by (class, name) always; by name when no two classes define it differently
                    out[(cls.name, node.name)] = body[0].value
                    if node.name in out and ast.dump(out[node.name]) != ast.dump(body[0].value):
                        bad.add(node.name)
                    out.setdefault(node.name, body[0].value)
    return {k: v for k, v in out.items() if k not in bad}


def substitute_property(knob, props: dict[str, ast.AST]) -> list | None:
    """A truth test of a property (``self.parallel_config.use_ubatching``) as the knobs of its expression, ``self``
    read as the object the chain names (``self.parallel_config.enable_dbo``); None when it is not one."""
    ch, values, want = knob
    owner = OPTION_CLASSES.get(ch[-2]) or "".join(w.title() for w in ch[-2].split("_")) if ch and len(ch) > 1 else ""
    # ``aux_output_config.enabled``: AuxOutputConfig's property (another class's ``enabled`` is another)
    expr = (props.get((owner, ch[-1])) or props.get((owner.replace("Config", "") + "Config", ch[-1])) or
            props.get(ch[-1])) if ch and len(ch) > 1 else None
    if expr is None or values[:1] not in ([True], [False]):
        return None
    out = []
    for c, v, w in test_knobs(expr, want):
        out.append(((ch[:-1] + tuple(c[1:])) if c and c[0] == "self" else c, v, w))
    return out


def compared_constants(trees) -> dict[str, list]:
    """Per attribute name (a chain's last name): the string constants the release's conditions compare it with
    (``self.speculative_algorithm == "EAGLE"``, ``x in ("DSPARK", "NEXTN")``), in source order."""
    out: dict[str, list] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and \
                    isinstance(node.ops[0], (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                for a, b in ((node.left, node.comparators[0]), (node.comparators[0], node.left)):
                    ch, consts = chain_of(a), _const(b)
                    enum = ch and consts and isinstance(b, ast.Attribute) and b.attr.isupper() and \
                        b.attr not in CONSTANTS
                    # an enum member (``MambaBackendEnum.FLASHINFER``): the option's value is its lower-case name;
                    # keyed by the chain's last name and by its last two (``mamba_config.backend``)
                    new = [b.attr.lower()] if enum else [c for c in consts or [] if isinstance(c, str) and c]
                    for key in {ch[-1], ".".join(ch[-2:])} if ch and consts else ():
                        vals = out.setdefault(key, [])
                        vals += [c for c in new if c not in vals]
    return {k: v for k, v in out.items() if v}


def path_knobs(chain: list[ast.AST]) -> list[tuple[tuple, list, bool]]:
    """Knobs of the ``if``/``while`` tests on ``chain`` (reachability._enclosing: module -> statement) and, when the
    statement is an ``assert``, of its test (refused when false)."""
    out = []
    loops = []
    for parent, child in zip(chain, chain[1:]):
        if isinstance(parent, (ast.If, ast.While)):
            out += test_knobs(parent.test, any(child is x for x in parent.body))
        elif isinstance(parent, ast.IfExp):
            out += test_knobs(parent.test, child is parent.body)
        elif isinstance(parent, ast.For) and any(child is x for x in parent.body):
            loops.append(parent)
    last = chain[-1] if chain else None
    if isinstance(last, ast.Assert):
        out += test_knobs(last.test, False)
    for loop in reversed(loops):   # a test on the loop's element: a knob on what it iterates
        out = lift_loop(out, loop.target, loop.iter)
    return out


_CASTS = {"int", "float", "str", "bool", "list", "tuple", "set", "abs"}


def uncast(node):
    """``int(cfg.x)`` -> ``cfg.x``: a conversion of one argument reads the same option."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CASTS and \
            len(node.args) == 1 and not node.keywords:
        node = node.args[0]
    return node


def local_values(fn) -> dict[str, ast.AST]:
    """A function's local names assigned exactly once, with their expression (``prefill_backend =
    cfg.prefill_attention_backend or cfg.attention_backend``, ``model_arch = hf_config.architectures[0]``); a
    conversion of the local itself (``verify_width = int(verify_width)``) is no other assignment."""
    seen: dict[str, list] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    u = uncast(n.value)
                    if u is not n.value and isinstance(u, ast.Name) and u.id == t.id:
                        continue
                    seen.setdefault(t.id, []).append(n.value)
                elif isinstance(t, ast.Tuple):
                    for e in t.elts:
                        if isinstance(e, ast.Name):
                            seen.setdefault(e.id, []).append(None)
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            seen.setdefault(n.target.id, []).append(n.value)
        elif isinstance(n, (ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
            t = getattr(n, "target", None)
            if isinstance(t, ast.Name):
                seen.setdefault(t.id, []).append(None)
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and v[0] is not None}


def attribute_values(fn, line: int) -> dict[tuple, ast.AST]:
    """The attribute chains a function assigns before ``line``, with the expression of the last such assignment
    (``self.cache_config.use_kda_recoverssm = self.num_speculative_tokens > 0 and is_kda_model``, after an early
    ``= False; return``): a condition reading the chain after the assignment reads that expression."""
    seen: dict[tuple, list] = {}
    for n in ast.walk(fn):
        if getattr(n, "lineno", line) >= line:
            continue
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AnnAssign,
                                                                                          ast.AugAssign)) else []
        for t in targets:
            ch = chain_of(t) if isinstance(t, ast.Attribute) else None
            if ch:
                seen.setdefault(ch, []).append((n.lineno, None if isinstance(n, ast.AugAssign) else n.value))
    return {k: max(v, key=lambda x: x[0])[1] for k, v in seen.items() if max(v, key=lambda x: x[0])[1] is not None}


def substitute_locals(knobs: list, chain: list[ast.AST]) -> list:
    """Knobs whose chain starts at a local of the enclosing function, read through its one assignment: a chain
    expression (``a or b``: its first operand) takes the local's place; a truth test of a local bound to a condition
    (``scaling_active = cfg.elastic_ep_backend is not None and ...``) becomes that condition's knobs."""
    fn = next((n for n in reversed(chain) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fn is None:
        return knobs
    local = local_values(fn)
    attrs = attribute_values(fn, getattr(chain[-1], "lineno", 1 << 30))
    out = []
    for ch, values, want in knobs:
        expr = local.get(ch[0]) if ch else None
        if ch in attrs and values[:1] in ([True], [False]) and \
                isinstance(attrs[ch], (ast.Compare, ast.BoolOp, ast.UnaryOp)):
            # a truth test of an attribute the function bound to a condition: that condition's knobs
            out += substitute_locals(test_knobs(attrs[ch], want), chain) if len(ch) > 1 else test_knobs(attrs[ch], want)
            continue
        depth = 0
        while isinstance(expr, ast.Name) and expr.id in local and depth < 3:
            expr, depth = local[expr.id], depth + 1
        if expr is None:
            out.append((ch, values, want))
            continue
        head = expr.values[0] if isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.Or) else expr
        if isinstance(head, ast.IfExp):
            # ``1 if cfg.topk is None else int(cfg.topk)``: the branch reading an option
            head = head.body if chain_of(uncast(head.body)) else head.orelse
        sub = chain_of(uncast(head))
        if sub:
            out.append((sub + tuple(ch[1:]), values, want))
        elif len(ch) == 1 and isinstance(expr, (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Call)) and \
                values[:1] in ([True], [False]):
            out += test_knobs(expr, want)
        else:
            out.append((ch, values, want))
    return out


def statements_before(chain: list[ast.AST]):
    """The statements that run before the one at the end of ``chain``, in each enclosing block (the same block as
    each link of the chain: body, orelse or finalbody), outermost block first. The one walk of the knobs
    (``early_exit_knobs``, ``precondition_knobs``, ``guard_knobs``) and of ``reachability._skipped``."""
    for parent, child in zip(chain, chain[1:]):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if not isinstance(block, list) or not any(child is x for x in block):
                continue
            for st in block:
                if st is child:
                    break
                yield st


def early_exit_knobs(chain: list[ast.AST]) -> list[tuple[tuple, list, bool]]:
    """Knobs of the early exits before the statement at the end of ``chain``: an ``if <test>: return`` (or
    ``continue``/``break``) earlier in an enclosing block leaves the function before the raise unless its test is
    false (``if not cfg.enable_watermark: return`` guards every check after it)."""
    out = []
    for st in statements_before(chain):
        if isinstance(st, ast.If) and not st.orelse and st.body and \
                isinstance(st.body[-1], (ast.Return, ast.Continue, ast.Break)):
            out += test_knobs(st.test, False)
    return out


def precondition_knobs(chain: list[ast.AST]) -> list[tuple[tuple, list, bool]]:
    """Knobs of the checks a line must pass before the statement at the end of ``chain``: each ``assert`` earlier in
    an enclosing block (its test wanted true) and each ``if <test>: raise`` there (its test wanted false):
    ``assert cfg.max_ep_size > 0`` before a site under ``cfg.max_ep_size > cfg.tp_size`` keeps its value positive."""
    out = []
    for st in statements_before(chain):
        if isinstance(st, ast.Assert):
            out += test_knobs(st.test, True)
        elif isinstance(st, ast.If) and not st.orelse and st.body and isinstance(st.body[-1], ast.Raise):
            out += test_knobs(st.test, False)
        elif isinstance(st, ast.If):
            # ``if cfg.max_ep_size is not None: assert cfg.max_ep_size > 0``: the checks of a block the
            # line may enter
            out += [k for x in st.body if isinstance(x, ast.Assert) for k in test_knobs(x.test, True)]
    return out


def _names_in(test) -> set[str]:
    return {c[-1] for n in ast.walk(test) for c in [chain_of(n)] if c}


def _mode_check(test) -> bool:
    """``x != "word"``, ``x == "word"``, ``x is not None``, ``x is None``, ``x not in ("a", "b")`` on an attribute
    chain, or its bare truth (``cfg.x``, ``not cfg.x``)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(test, ast.Attribute) and chain_of(test):
        return True   # ``if not cfg.enable_lora: raise``: the option turned on (off for ``if cfg.x: raise``)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and chain_of(test.left)):
        return False
    consts = _const(test.comparators[0])
    return bool(consts) and all(isinstance(c, str) or c is None for c in consts) and \
        not isinstance(test.comparators[0], ast.Attribute)


def guard_knobs(chain: list[ast.AST], names: set[str]) -> list[tuple[tuple, list, bool]]:
    """For each ``if A and B: raise`` before the statement at the end of ``chain`` whose test reads a name the site
    sets (``names``): an operand reading none of them wanted false (``if cfg.enable_kv_cache_sharding and
    cfg.disaggregation_mode != "prefill": raise`` before a site wanting the sharding on: ``disaggregation_mode``
    prefill), so the line passes the check with the site's own settings."""
    out = []
    for st in statements_before(chain):
        if not (isinstance(st, ast.If) and not st.orelse and st.body and isinstance(st.body[-1], ast.Raise)):
            continue
        test = st.test
        if _mode_check(test):
            # ``if cfg.disaggregation_mode != "prefill": raise`` before the site: the mode it wants (a name
            # compared with a word or None: the value that passes is known, no number is made up)
            out += test_knobs(test, False)
            continue
        if not _names_in(test) & names:
            continue
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            free = [v for v in test.values if not _names_in(v) & names]
            if free:
                out += test_knobs(free[-1], False)
    return out


def callee_exit_knobs(chain: list[ast.AST], tree: ast.AST) -> list[tuple[tuple, list, bool]]:
    """For each call statement before the statement at the end of ``chain`` (``validate_x(server_args, cfg)``) of a
    function of the same module: the first early exit of its body that compares a name with a word
    (``if prefill_backend == "fa3": return``), wanted taken, read through the callee's locals: the line leaves the
    callee before any of its checks (SGLang ``validate_kv_shard_attention_backend`` before the KV-sharding checks
    of ``handle_kv_cache_sharding``, kv_shard_hook.py:67-68,232@0.5.23)."""
    funcs = {n.name: n for n in getattr(tree, "body", []) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    out = []
    for st in statements_before(chain):
        call = st.value if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) else None
        fn = funcs.get(call.func.id) if call is not None and isinstance(call.func, ast.Name) else None
        if fn is None:
            continue
        for x in fn.body:
            if isinstance(x, ast.If) and not x.orelse and len(x.body) == 1 and isinstance(x.body[0], ast.Return) \
                    and isinstance(x.test, ast.Compare) and len(x.test.ops) == 1 and \
                    isinstance(x.test.ops[0], (ast.Eq, ast.In)) and _mode_check(x.test):
                out += substitute_locals(test_knobs(x.test, True), [fn, x])
                break
    return out


def param_substitute(knobs: list, chain: list[ast.AST], trees) -> list:
    """Knobs on a parameter of the site's function (``rates`` of ``_resolve_synthetic_acceptance_rates(n, rates,
    length)``) read through the argument its callers pass (``self.synthetic_acceptance_rates``): the first call of the
    function's name in ``trees`` whose argument for the parameter is an attribute chain."""
    fn = next((n for n in reversed(chain) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fn is None:
        return knobs
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args if a.arg not in ("self", "cls")]
    need = {c[0] for c, _v, _w in knobs if c and c[0] in params + [a.arg for a in fn.args.kwonlyargs]}
    if not need:
        return knobs
    mapping: dict[str, tuple] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if (f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None) != fn.name:
                continue
            pairs = list(zip(params, node.args)) + [(k.arg, k.value) for k in node.keywords if k.arg]
            for name, arg in pairs:
                ch = chain_of(arg)
                if name in need and name not in mapping and ch and ch[0] not in params:
                    mapping[name] = ch
    return [((mapping[c[0]] + tuple(c[1:])) if c and c[0] in mapping else c, v, w) for c, v, w in knobs]


def avoid_knobs(chain: list[ast.AST]) -> list[tuple[tuple, list, bool]]:
    """Knobs that keep a line away from the raise at the end of ``chain`` (a site that refused a line before it got
    to the one it was made for): the innermost ``if`` test around it wanted the other way, or the assert's test
    wanted true."""
    last = chain[-1] if chain else None
    if isinstance(last, ast.Assert):
        return test_knobs(last.test, True)
    for parent, child in reversed(list(zip(chain, chain[1:]))):
        if isinstance(parent, ast.If):
            return test_knobs(parent.test, not any(child is x for x in parent.body))
    return []


def validator_rename(chain: list[ast.AST], knobs: list) -> list:
    """Inside a pydantic field validator (``@field_validator("mode", ...)``, ``@validator("x")``) the value parameter
    is the field: its knobs become ``self.<field>``'s (the first field named)."""
    fn = next((n for n in reversed(chain) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fn is None:
        return knobs
    field = None
    for d in fn.decorator_list:
        if isinstance(d, ast.Call) and ast.unparse(d.func).split(".")[-1] in ("field_validator", "validator") and \
                d.args and isinstance(d.args[0], ast.Constant) and isinstance(d.args[0].value, str):
            field = d.args[0].value
            break
    params = [a.arg for a in fn.args.args if a.arg not in ("self", "cls")]
    if field is None or not params:
        return knobs
    return [((("self", field) + tuple(c[1:])) if c and c[0] == params[0] else c, v, w) for c, v, w in knobs]


def call_knobs(tree: ast.AST, name: str, enclosing) -> list[list[tuple[tuple, list, bool]]]:
    """For every call of ``name`` (a function, method or class) in ``tree``: the knobs of the branches around it
    (a predicate of an enum the call's class is, read as the option named after the enum: ``enum_predicate_knobs``)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            n = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else None
            if n == name:
                chain = enclosing(tree, node.lineno)
                out.append(enum_predicate_knobs(path_knobs(chain), chain))
    return out


def _enum_members(cls: ast.ClassDef) -> set[str]:
    """The members of an enum class (``UNO = auto()``, ``EAGLE = 3``): upper-case names assigned in its body, the
    class deriving from an ``*Enum``; empty for any other class."""
    if not any(ast.unparse(b).split(".")[-1].endswith("Enum") for b in cls.bases):
        return set()
    return {t.id for st in cls.body if isinstance(st, ast.Assign) for t in st.targets
            if isinstance(t, ast.Name) and t.id.isupper()}


def enum_predicates(cls: ast.ClassDef) -> dict[str, list[str]]:
    """An enum's predicate methods of one ``return`` comparing ``self`` with its members, by name -> the members
    (``def is_uno(self): return self == SpeculativeAlgorithm.UNO`` -> ``{"is_uno": ["UNO"]}``; ``self in (A.X,
    A.Y)`` -> both; ``self == A.X or self == A.Y`` -> both)."""
    members = _enum_members(cls)
    out: dict[str, list[str]] = {}
    for node in cls.body:
        if not isinstance(node, ast.FunctionDef) or len(node.args.args) != 1:
            continue
        body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
        if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
            continue
        expr = body[0].value
        tests = expr.values if isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.Or) else [expr]
        got: list[str] = []
        for t in tests:
            if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.left, ast.Name) and
                    t.left.id == "self" and isinstance(t.ops[0], (ast.Eq, ast.Is, ast.In))):
                got = []
                break
            right = t.comparators[0]
            elts = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right]
            names = [e.attr for e in elts if isinstance(e, ast.Attribute) and e.attr in members]
            if len(names) != len(elts):
                got = []
                break
            got += names
        if got:
            out[node.name] = got
    return out


def enum_predicate_knobs(knobs: list, chain: list[ast.AST]) -> list:
    """``self.is_uno()`` in a method of an enum (SGLang's ``SpeculativeAlgorithm.handle_server_args`` dispatching to
    ``_handle_uno``): the option named after the enum (``speculative_algorithm``) set to a member the predicate
    tests (``UNO``: the release's ``from_string`` takes the member's name). A predicate wanted false (an earlier
    ``if``/``elif`` of the dispatch) is no knob of its own: its members are left out of the wanted ones
    (``is_eagle()`` past ``elif self.is_frozen_kv_mtp()``: EAGLE, EAGLE3, not FROZEN_KV_MTP)."""
    cls = next((n for n in reversed(chain) if isinstance(n, ast.ClassDef)), None)
    preds = enum_predicates(cls) if cls is not None else {}
    if not preds:
        return knobs
    mine = [k for k in knobs if k[0] and len(k[0]) == 2 and k[0][0] == "self" and k[0][1] in preds]
    other = {m for ch, _v, want in mine if not want for m in preds[ch[1]]}
    out = []
    for ch, values, want in knobs:
        if ch and len(ch) == 2 and ch[0] == "self" and ch[1] in preds:
            if want:
                out.append(((_snake(cls.name),), [m for m in preds[ch[1]] if m not in other] or
                            list(preds[ch[1]]), True))
            continue
        out.append((ch, values, want))
    return out


ARCH_RE = re.compile(r"^[A-Z][A-Za-z0-9_]*(ForCausalLM|ForConditionalGeneration|Model|LMHeadModel|ForSequenceClassification|"
                     r"ForEmbedding|ForRewardModel|MTP|Eagle3?|NextN|Draft\w*)$")


def registry_knobs(tree: ast.AST, line: int) -> list[tuple[tuple, list, bool]]:
    """A function registered for model architectures (SGLang's ``@_register_for("DeepseekV4ForCausalLM")``
    overrides, any decorator whose string arguments are architecture names): entered only for a config.json whose
    ``architectures`` names one of them."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= (node.end_lineno or 0):
            names = [a.value for d in node.decorator_list if isinstance(d, ast.Call) for a in d.args
                     if isinstance(a, ast.Constant) and isinstance(a.value, str) and ARCH_RE.match(a.value)]
            if names:
                return [(("hf_config", "architectures"), names, True)]
    return []


# ----------------------------------------------------------------------------- chain -> command line


def resolve(chain: tuple[str, ...], dests: set[str], json_opts: dict[str, str], site_cls: str | None,
            engine: str) -> tuple[str, object] | None:
    """("env", NAME) | ("hf", field) | ("flag", dest) | ("json", (dest, key path)) | None."""
    for c in chain:
        if ENV_RE.match(c):
            return "env", c
    names = [c for c in chain if c not in ("self", "cls")]
    if not names:
        return None
    for i, c in enumerate(names):
        if c in HF_NAMES and i + 1 < len(names):
            return "hf", names[i + 1]
    last = names[-1]
    if last in ("architectures", "architecture"):
        return "hf", "architectures"
    if last == "hf_config" or last.startswith(("is_", "supports_")) and \
            any(c in ("model_config", "hf_config") for c in names):
        # a predicate of the model (model_config.is_hybrid, is_moe): the model's own, not a config.json field of
        # that name; the base line's model (each as likely) stands for it
        return "hf", "hf_config"
    for i, c in enumerate(names[:-1]):
        if c in json_opts:
            return "json", (c, tuple(names[i + 1:]))
    if last in dests:
        return "flag", last
    if last in FIELD_OWNERS and len(names) == 1:
        # a field of one JSON option's config class read through another object (``self.num_speculative_tokens``
        # of VllmConfig: SpeculativeConfig's field): that option's key
        return "json", (FIELD_OWNERS[last], (last,))
    # a field of a config object with no JSON option, set by a flag named after both (``self.mamba_config.backend``
    # -> --mamba-backend, ``mamba_config.enable_stochastic_rounding`` -> --enable-mamba-cache-stochastic-rounding):
    # the shortest option holding the words of the field and of the config's name
    owner = names[-2] if len(names) >= 2 else class_dest(site_cls) if chain[0] == "self" and site_cls and \
        class_dest(site_cls) not in json_opts else None
    if owner and owner.endswith("_config") and owner[:-7]:
        words = (set(last.split("_")) | set(owner[:-7].split("_"))) - {""}
        cands = sorted((d for d in dests if words <= set(d.split("_"))), key=lambda d: (len(d), d))
        if cands:
            return "flag", cands[0]
    if chain[0] == "self" and len(names) == 1 and site_cls:
        opt = json_opts.get(class_dest(site_cls))
        if opt:
            return "json", (class_dest(site_cls), (last,))
    # a local named after an option it was read from (``prefill_backend`` <- --prefill-attention-backend,
    # ``a2a_backend`` <- --moe-a2a-backend): the shortest option whose name holds all of the local's words
    words = set(last.split("_")) - {""}
    if len(words) >= 2 and not last.endswith("_config"):   # ``self.model_config``: an object, not an option
        # an option opening with the local's first word first (``prefill_backend``: --prefill-attention-backend,
        # not --dsa-prefill-backend)
        first = last.split("_")[0]
        cands = sorted((d for d in dests if words <= set(d.split("_"))),
                       key=lambda d: (not d.startswith(first + "_"), len(d), d))
        if cands:
            return "flag", cands[0]
    return None


# field name -> the JSON option whose config class alone has a field of that name (filled by ``learn_field_owners``)
FIELD_OWNERS: dict[str, str] = {}


def learn_field_owners(fields: dict[str, dict], json_opts) -> dict[str, str]:
    """Per field name of the JSON options' config classes (``SpeculativeConfig`` -> ``--speculative-config``), the
    option, when exactly one of those classes has a field of that name."""
    owners: dict[str, set] = {}
    for cls, fs in fields.items():
        dest = class_dest(cls)
        if dest in json_opts:
            for f in fs:
                owners.setdefault(f, set()).add(dest)
    FIELD_OWNERS.clear()
    FIELD_OWNERS.update({f: next(iter(d)) for f, d in owners.items() if len(d) == 1})
    return dict(FIELD_OWNERS)


# JSON option dest -> its config class's name where the two names differ (``--quantization-config`` parses into
# ``QuantizationConfigArgs``), from the parser dump (``learn_option_classes``)
OPTION_CLASSES: dict[str, str] = {}


def learn_option_classes(json_opts: dict) -> dict[str, str]:
    import json as _json

    OPTION_CLASSES.clear()
    for dest, o in json_opts.items():
        m = re.search(r'"dataclass": "[\w.]*\.(\w+)"', _json.dumps(o.get("type")))
        if m and _snake(m.group(1)) != dest:
            OPTION_CLASSES[dest] = m.group(1)
    return dict(OPTION_CLASSES)


def class_dest(cls: str) -> str:
    """The JSON option a config class is parsed from: the dump's (``OPTION_CLASSES``), else its snake-case name."""
    return next((d for d, c in OPTION_CLASSES.items() if c == cls), None) or _snake(cls)


def dest_class(fields: dict, dest: str) -> str | None:
    """The config class (a key of ``fields``) of JSON option ``dest``."""
    if OPTION_CLASSES.get(dest) in fields:
        return OPTION_CLASSES[dest]
    return next((c for c in fields if _snake(c) == dest), None)


def _snake(name: str) -> str:
    """SpeculativeConfig -> speculative_config, EPLBConfig -> eplb_config."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


# ----------------------------------------------------------------------------- config classes' fields


def class_fields(trees) -> dict[str, dict[str, ast.AST]]:
    """Class name -> its annotated fields (dataclass / pydantic style ``name: annotation [= default]``)."""
    out: dict[str, dict[str, ast.AST]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                f = {st.target.id: st.annotation for st in node.body
                     if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
                     and not ast.unparse(st.annotation).startswith("ClassVar")}
                if f:
                    out.setdefault(node.name, {}).update(f)
    return out


def class_defaults(trees) -> dict[str, dict[str, ast.AST]]:
    """Class name -> field -> its default expression (``Field(default=..., gt=0)`` carries pydantic's bounds)."""
    out: dict[str, dict[str, ast.AST]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for st in node.body:
                    if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                        out.setdefault(node.name, {})[st.target.id] = st.value
    return out


def field_bounds(defaults: dict, dest: str, path: tuple[str, ...], fields: dict) -> dict[str, float]:
    """pydantic bounds (gt/ge/lt/le) of the last field of ``path`` in the JSON option's class, from its
    ``Field(...)`` default."""
    cls = dest_class(fields, dest)
    for p in path[:-1]:
        ann = fields.get(cls, {}).get(p) if cls else None
        names = [n.id for n in ast.walk(ann) if isinstance(n, ast.Name) and n.id in fields] if ann is not None else []
        cls = names[0] if names else None
    value = defaults.get(cls, {}).get(path[-1]) if cls else None
    out = {}
    if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] == "Field":
        for kw in value.keywords:
            if kw.arg in ("gt", "ge", "lt", "le") and isinstance(kw.value, ast.Constant) and \
                    isinstance(kw.value.value, (int, float)):
                out[kw.arg] = kw.value.value
    return out


def within_bounds(values: list, bounds: dict) -> list:
    """The numeric values a field's bounds admit (pydantic refuses the rest before any check of the release)."""
    def ok(v):
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return True
        return all((k != "gt" or v > b) and (k != "ge" or v >= b) and (k != "lt" or v < b) and (k != "le" or v <= b)
                   for k, b in bounds.items())
    return [v for v in values if ok(v)]


def field_annotation(fields: dict, dest: str, path: tuple[str, ...]):
    """The annotation of ``path`` inside the config class of JSON option ``dest`` (nested config classes followed
    through their annotations), or None when a name on the path is not a field."""
    cls = dest_class(fields, dest)
    ann = None
    for i, p in enumerate(path):
        if cls is None or p not in fields.get(cls, {}):
            return None
        ann = fields[cls][p]
        names = [n.id for n in ast.walk(ann) if isinstance(n, ast.Name) and n.id in fields]
        cls = names[0] if names else None
    return ann


def type_aliases(trees) -> dict[str, ast.AST]:
    """Module-level ``Name = Literal[...]`` / ``Name: TypeAlias = ...`` aliases (``SpeculativeMethod``)."""
    out = {}
    for tree in trees:
        for st in getattr(tree, "body", []):
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) and \
                    isinstance(st.value, (ast.Subscript, ast.BinOp)):
                out[st.targets[0].id] = st.value
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None and \
                    "TypeAlias" in ast.unparse(st.annotation):
                out[st.target.id] = st.value
    return out


def is_list_annotation(ann) -> bool:
    """``list[int]``, ``list[int] | None``, ``Optional[List[str]]``: a field whose value is a list."""
    if ann is None:
        return False
    if isinstance(ann, ast.BinOp):
        return is_list_annotation(ann.left) or is_list_annotation(ann.right)
    if isinstance(ann, ast.Subscript):
        head = ast.unparse(ann.value).split(".")[-1]
        if head == "Optional":
            return is_list_annotation(ann.slice)
        if head == "Union":
            elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            return any(is_list_annotation(e) for e in elts)
        return head in ("list", "List", "Sequence")
    return False


def annotation_values(ann, aliases: dict | None = None, _depth: int = 0) -> list:
    """Values a field's annotation takes: a Literal's values (through module-level aliases), True/False for bool,
    edge ints/floats, None when optional."""
    text = ast.unparse(ann)
    vals: list = []
    for n in ast.walk(ann):
        if aliases and _depth < 4 and isinstance(n, ast.Name) and n.id in aliases:
            vals += [v for v in annotation_values(aliases[n.id], aliases, _depth + 1) if v not in vals]
        if isinstance(n, ast.Name) and n.id in ENUMS:
            vals += [v for v in ENUMS[n.id] if v not in vals]
        if isinstance(n, ast.Subscript) and ast.unparse(n.value).endswith("Literal"):
            sl = n.slice
            elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
            vals += [e.value for e in elts if isinstance(e, ast.Constant)]
    if re.search(r"\bbool\b", text):
        vals += [True, False]
    if re.search(r"\bint\b|PositiveInt|NonNegativeInt", text):
        vals += [0, 1, 2, -1, 8]
    if re.search(r"\bfloat\b", text):
        vals += [0.0, 0.5, 1.0, -1.0]
    if "None" in text or "Optional" in text:
        vals.append(None)
    return vals


def fits_values(value, typed: list) -> bool:
    """Whether ``value`` is of a kind the annotation's values are (an int for ints, one of a Literal's strings)."""
    if value in typed and type(value) in {type(t) for t in typed}:
        return True
    kinds = {type(t) for t in typed if t is not None}
    if isinstance(value, str):
        return False   # a str field with Literal values takes one of them; a plain str field has no typed values
    if isinstance(value, int) and not isinstance(value, bool) and float in kinds:
        return True    # ``logit_sigma == 0`` on a float field: 0 is a float value too
    return type(value) in kinds
