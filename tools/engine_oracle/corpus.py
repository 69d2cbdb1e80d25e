"""Generated engine command lines for the oracle differential: the presets' lines (rendered by gpustack-k3's own
argv renderer) mutated across the options whose combinations the rules judge.

``seed_lines(release)`` (gpustack_k3/oracle/warmup.py): the catalog presets for the release's engine, with
``spec.engine.version`` set to the release, rendered by ``gpustack_k3.core.flags.render_args`` (single-engine presets)
and ``gpustack_k3.core.launch.build_topology_launch`` (the per-role leader lines of the topology presets).
``generate(release, n, seed)``: n lines, each a seed line with 1-4 mutations (deterministic for a seed).
``generate_pairs(n, seed)``: n vLLM P/D pairs from the topology presets, each side mutated.

A line: {"argv": [...], "env": {...}, "model": catalog model key, "gpu_type": ..., "gpus": ..., "seed": name,
"mutations": [...]}.
"""
from __future__ import annotations

import json
import random
import re

from gpustack_k3.oracle.judge import RELEASES
# the presets' rendered lines and the model-shape lines: the judge's warm-up set, one definition (the package's)
from gpustack_k3.oracle.warmup import seed_lines, shape_lines  # noqa: F401

# model positional/flag values as rendered by the presets (mapped to config.json directories by the oracle)
KIMI_DRAFT = "Inferact/Kimi-K3-DSpark"
ATTN_VLLM = ["FLASHINFER_MLA", "TRITON_MLA", "CUTLASS_MLA", "FLASHMLA", "FLASH_ATTN", "FLASHINFER", "TRTLLM_MLA",
             "NO_SUCH_BACKEND"]


def _catalog():
    from gpustack_k3.catalog import load_catalog

    return load_catalog()


# ----------------------------------------------------------------------------- argv editing

def _find(argv: list[str], flags: tuple[str, ...]) -> int | None:
    for i, t in enumerate(argv):
        if t in flags or any(t.startswith(f + "=") for f in flags):
            return i
    return None


def set_flag(argv: list[str], flags: tuple[str, ...], value: str | None) -> list[str]:
    """Replace (or append) ``flags[0] value``; value None: a boolean flag."""
    argv = drop_flag(argv, flags)
    return argv + ([flags[0]] if value is None else [flags[0], value])


def drop_flag(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    i = _find(argv, flags)
    if i is None:
        return list(argv)
    t = argv[i]
    n = 1 if "=" in t or i + 1 >= len(argv) or argv[i + 1].startswith("-") and not _num(argv[i + 1]) else 2
    return argv[:i] + argv[i + n:]


def _num(t: str) -> bool:
    try:
        float(t)
        return True
    except ValueError:
        return False


def _json_of(argv: list[str], flags: tuple[str, ...]) -> dict | None:
    i = _find(argv, flags)
    if i is None or i + 1 >= len(argv):
        return None
    try:
        v = json.loads(argv[i + 1])
        return v if isinstance(v, dict) else None
    except ValueError:
        return None


# ----------------------------------------------------------------------------- vLLM mutations

TP = ("--tensor-parallel-size", "-tp")
DCP = ("--decode-context-parallel-size", "-dcp")
PP = ("--pipeline-parallel-size", "-pp")
DP = ("--data-parallel-size", "-dp")
SPEC = ("--speculative-config", "-sc")
KVT = ("--kv-transfer-config",)


# kind -> (flags, values): the mutation sets that one option to one of the values
_VLLM_SET = {
    "tp": (TP, ["1", "2", "4", "8", "16", "3"]),
    "dcp": (DCP, ["1", "2", "4", "8", "16", "3"]),
    "pp": (PP, ["1", "2"]),
    "kvdtype": (("--kv-cache-dtype",), ["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "fp8_ds_mla", "int8"]),
    "dtype": (("--dtype",), ["auto", "bfloat16", "float16", "float32", "half"]),
    "attn": (("--attention-backend",), ATTN_VLLM),
    "batched": (("--max-num-batched-tokens",), ["256", "2048", "8192", "32768", "1000000"]),
    "seqs": (("--max-num-seqs",), ["1", "32", "256", "1024", "0"]),
    "mem": (("--gpu-memory-utilization",), ["0.5", "0.92", "0.95", "1.0", "1.2", "0"]),
    "block": (("--block-size",), ["16", "64", "128", "1536", "7"]),
}


def _vllm_dp(argv: list[str], env: dict, rnd: random.Random, kind: str) -> tuple[list[str], dict]:
    argv = set_flag(argv, DP, rnd.choice(["1", "2", "4", "8"]))
    if rnd.random() < 0.5:
        argv = set_flag(argv, ("--data-parallel-size-local",), rnd.choice(["1", "2", "4"]))
    return argv, env


def _vllm_dp_lb(argv: list[str], env: dict, rnd: random.Random, kind: str) -> tuple[list[str], dict]:
    mode = rnd.choice(["hybrid", "external", "rank", "start-rank", "headless", "api", "two"])
    argv = set_flag(argv, DP, rnd.choice(["2", "4", "8"]))
    if mode == "hybrid":
        argv = set_flag(argv, ("--data-parallel-hybrid-lb",), None)
    elif mode == "external":
        argv = set_flag(argv, ("--data-parallel-external-lb",), None)
    elif mode == "rank":
        argv = set_flag(argv, ("--data-parallel-rank",), rnd.choice(["0", "1", "3"]))
    elif mode == "start-rank":
        argv = set_flag(argv, ("--data-parallel-start-rank",), rnd.choice(["0", "2"]))
    elif mode == "headless":
        argv = set_flag(argv, ("--headless",), None)
        if rnd.random() < 0.4:
            argv = set_flag(argv, ("--api-server-count",), "2")
    elif mode == "api":
        argv = set_flag(argv, ("--api-server-count",), rnd.choice(["1", "2", "4"]))
    else:
        argv = set_flag(set_flag(argv, ("--data-parallel-hybrid-lb",), None), ("--data-parallel-external-lb",), None)
    return argv, env


def _vllm_nnodes(argv: list[str], env: dict, rnd: random.Random, kind: str) -> tuple[list[str], dict]:
    argv = set_flag(argv, ("--nnodes",), rnd.choice(["1", "2", "4"]))
    if rnd.random() < 0.5:
        argv = set_flag(argv, ("--node-rank",), rnd.choice(["0", "1"]))
    return argv, env


def _vllm_ep(argv: list[str], env: dict, rnd: random.Random, kind: str) -> tuple[list[str], dict]:
    argv = set_flag(argv, ("--enable-expert-parallel",), None)
    if kind == "eplb":
        argv = set_flag(argv, ("--enable-eplb",), None)
        if rnd.random() < 0.6:
            argv = set_flag(argv, ("--eplb-config",), json.dumps(
                {"window_size": rnd.choice([1000, 0]), "step_interval": rnd.choice([3000, 10]),
                 "num_redundant_experts": rnd.choice([0, 32, 7])}))
    return argv, env


def _vllm_spec(argv: list[str], env: dict, rnd: random.Random, kind: str) -> tuple[list[str], dict]:
    if kind == "drop-spec":
        return drop_flag(argv, SPEC), env
    sc = _json_of(argv, SPEC) or {}
    if kind == "spec" or not sc:
        method = rnd.choice(["dspark", "mtp", "ngram", "eagle3", "suffix"])
        sc = {"method": method, "num_speculative_tokens": rnd.choice([1, 3, 5, 7])}
        if method in ("dspark", "eagle3"):
            sc["model"] = KIMI_DRAFT
        elif method == "ngram":
            sc.update(prompt_lookup_max=rnd.choice([4, 5]), prompt_lookup_min=rnd.choice([1, 2]))
    if kind == "spec-size":
        sc["num_speculative_tokens"] = rnd.choice([0, 1, 2, 5, 7, 8, 12, 16])
    if kind == "spec-backend":
        sc["attention_backend"] = rnd.choice(ATTN_VLLM)
    return set_flag(argv, SPEC, json.dumps(sc)), env


def _vllm_kv(argv: list[str], env: dict, rnd: random.Random, kind: str) -> tuple[list[str], dict]:
    kv = {"kv_connector": rnd.choice(["NixlConnector", "NixlConnector", "LMCacheConnectorV1", "NoSuchConnector"])}
    role = rnd.choice(["kv_producer", "kv_consumer", "kv_both", None, "producer"])
    if role:
        kv["kv_role"] = role
    if rnd.random() < 0.3:
        kv["kv_load_failure_policy"] = rnd.choice(["fail", "recompute", "bogus"])
    return set_flag(argv, KVT, json.dumps(kv)), env


def _vllm_len(argv: list[str], env: dict, rnd: random.Random, kind: str) -> tuple[list[str], dict]:
    argv = set_flag(argv, ("--max-model-len",), rnd.choice(["4096", "131072", "262144", "1000000", "1000001",
                                                            "1048576", "2000000", "1m", "-1", "auto"]))
    if kind == "len-env":
        env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = rnd.choice(["1", "0"])
    return argv, env


def _vllm_long_prefill(argv: list[str], env: dict, rnd: random.Random, kind: str) -> tuple[list[str], dict]:
    argv = set_flag(argv, ("--long-prefill-token-threshold",), rnd.choice(["0", "4096", "65536"]))
    if rnd.random() < 0.3:
        argv = set_flag(argv, ("--max-num-partial-prefills",), rnd.choice(["1", "2"]))
    return argv, env


def _vllm_switch(argv: list[str], env: dict, rnd: random.Random, kind: str) -> tuple[list[str], dict]:
    """``prefix``: prefix caching on or off; ``eager``: ``--enforce-eager``; ``v2-env``: the V2 model runner's env
    var set, cleared or dropped; ``served``: a served model name, also two words."""
    if kind == "prefix":
        argv = set_flag(drop_flag(argv, ("--enable-prefix-caching",)),
                        (rnd.choice(["--enable-prefix-caching", "--no-enable-prefix-caching"]),), None)
    elif kind == "eager":
        argv = set_flag(argv, ("--enforce-eager",), None)
    elif kind == "v2-env":
        v = rnd.choice(["0", "1", None])
        if v is None:
            env.pop("VLLM_USE_V2_MODEL_RUNNER", None)
        else:
            env["VLLM_USE_V2_MODEL_RUNNER"] = v
    elif kind == "served":
        argv = set_flag(argv, ("--served-model-name",), rnd.choice(["k3", "a b"]))
        if argv[-1] == "a b":
            argv = argv[:-1] + ["a", "b"]
    return argv, env


_VLLM_MUTATE = {"dp": _vllm_dp, "dp-lb": _vllm_dp_lb, "nnodes": _vllm_nnodes, "ep": _vllm_ep, "eplb": _vllm_ep,
                "spec": _vllm_spec, "spec-size": _vllm_spec, "spec-backend": _vllm_spec, "drop-spec": _vllm_spec,
                "kv": _vllm_kv, "len": _vllm_len, "len-env": _vllm_len, "long-prefill": _vllm_long_prefill,
                "prefix": _vllm_switch, "eager": _vllm_switch, "v2-env": _vllm_switch, "served": _vllm_switch}


def _vllm_mutations(line: dict, rnd: random.Random) -> tuple[list[str], dict, str]:
    """One mutation of a vLLM line: a kind drawn, then its option set (``_VLLM_SET``) or its mutation
    (``_VLLM_MUTATE``); the draws of ``rnd`` in the same order for a seed, so a seed's corpus stays the same."""
    argv, env = list(line["argv"]), dict(line["env"])
    kind = rnd.choice(["tp", "dcp", "dcp", "pp", "dp", "dp-lb", "nnodes", "ep", "eplb", "spec", "spec", "spec-size",
                       "spec-backend", "kv", "kv", "kvdtype", "dtype", "attn", "len", "len-env", "batched", "seqs",
                       "long-prefill", "mem", "prefix", "block", "eager", "v2-env", "served", "drop-spec"])
    if kind in _VLLM_SET:
        flags, values = _VLLM_SET[kind]
        argv = set_flag(argv, flags, rnd.choice(values))
    else:
        argv, env = _VLLM_MUTATE[kind](argv, env, rnd, kind)
    return argv, env, kind


# ----------------------------------------------------------------------------- SGLang mutations

def _sglang_mutations(line: dict, rnd: random.Random) -> tuple[list[str], dict, str]:
    argv, env = list(line["argv"]), dict(line["env"])
    kind = rnd.choice(["tp", "dcp", "dp", "ep", "spec", "spec-size", "mem", "ctx", "kvdtype", "attn", "chunk",
                       "running", "disagg", "nnodes", "page", "dtype"])
    if kind == "tp":
        argv = set_flag(argv, ("--tp-size", "--tensor-parallel-size", "--tp"), rnd.choice(["1", "2", "4", "8", "3"]))
    elif kind == "dcp":
        argv = set_flag(argv, ("--dcp-size", "--decode-context-parallel-size"), rnd.choice(["1", "2", "4", "8", "3"]))
    elif kind == "dp":
        argv = set_flag(argv, ("--dp-size", "--data-parallel-size", "--dp"), rnd.choice(["1", "2", "4", "8"]))
        if rnd.random() < 0.5:
            argv = set_flag(argv, ("--enable-dp-attention",), None)
    elif kind == "ep":
        argv = set_flag(argv, ("--ep-size", "--expert-parallel-size", "--ep"), rnd.choice(["1", "2", "8"]))
    elif kind == "spec":
        argv = set_flag(argv, ("--speculative-algorithm",), rnd.choice(["DSPARK", "EAGLE", "EAGLE3", "NEXTN", "NGRAM",
                                                                        "BOGUS"]))
    elif kind == "spec-size":
        argv = set_flag(argv, ("--speculative-num-draft-tokens",), rnd.choice(["1", "4", "8", "16"]))
        if rnd.random() < 0.5:
            argv = set_flag(argv, ("--speculative-num-steps",), rnd.choice(["1", "3", "7"]))
    elif kind == "mem":
        argv = set_flag(argv, ("--mem-fraction-static",), rnd.choice(["0.5", "0.85", "0.88", "1.0", "1.5"]))
    elif kind == "ctx":
        argv = set_flag(argv, ("--context-length",), rnd.choice(["4096", "262144", "1000000", "2000000"]))
        if rnd.random() < 0.4:
            env["SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"] = "1"
    elif kind == "kvdtype":
        argv = set_flag(argv, ("--kv-cache-dtype",), rnd.choice(["auto", "fp8_e4m3", "fp8_e5m2", "bf16", "int8"]))
    elif kind == "attn":
        argv = set_flag(argv, ("--attention-backend",), rnd.choice(["flashinfer", "trtllm_mla", "fa3", "triton",
                                                                    "bogus"]))
    elif kind == "chunk":
        argv = set_flag(argv, ("--chunked-prefill-size",), rnd.choice(["-1", "4096", "16384"]))
    elif kind == "running":
        argv = set_flag(argv, ("--max-running-requests",), rnd.choice(["1", "39", "48", "256"]))
    elif kind == "disagg":
        argv = set_flag(argv, ("--disaggregation-mode",), rnd.choice(["null", "prefill", "decode", "bogus"]))
    elif kind == "nnodes":
        argv = set_flag(argv, ("--nnodes",), rnd.choice(["1", "2"]))
    elif kind == "page":
        argv = set_flag(argv, ("--page-size",), rnd.choice(["1", "16", "64"]))
    elif kind == "dtype":
        argv = set_flag(argv, ("--dtype",), rnd.choice(["auto", "bfloat16", "float16", "float32"]))
    return argv, env, kind


# ----------------------------------------------------------------------------- any option of the release's parser

# dests the "flag" mutation leaves alone: they name files, hosts, models or downloads (a value made up for them
# points nowhere, or makes the oracle reach for the network), not a setting the config checks weigh
_FLAG_SKIP = re.compile(r"(^|_)(path|paths|file|files|dir|url|urls|host|hosts|port|ports|revision|token|ssl|uds|socket|"
                        r"endpoint|endpoints|origins|headers|methods|middleware|prefix|name|names|otlp|key|keys)($|_)"
                        r"|^(model|model_tag|tokenizer|config|chat_template|hf_overrides|lora_modules|help|"
                        r"collect_detailed_traces|kv_events_config)$")
_INTS = ["0", "1", "2", "3", "4", "8", "16", "64", "-1", "65536"]
_FLOATS = ["0", "0.5", "0.9", "1.0", "1.5", "-1"]


def parser_options(release: str) -> list[dict]:
    """The release's parser options (the catalog's parser dump, catalog/data/engines/<release>-options.json:
    flags, action, type, choices), minus ``_FLAG_SKIP``."""
    from gpustack_k3.catalog.loader import DATA

    engine, version, _wheel = RELEASES[release]
    path = DATA / "engines" / f"{engine}-{version}-options.json"
    if not path.is_file():
        return []
    opts = json.loads(path.read_text())["parser"]["options"]
    return [o for o in opts if o.get("flags") and o["action"] != "help" and o.get("nargs") != "+"
            and not _FLAG_SKIP.search(o["dest"])]


def return_type(t):
    """The innermost ``return_type`` of a parser dump's option type (``optional_type(parse_type(json.loads))`` ->
    "json")."""
    while isinstance(t, dict):
        if "return_type" not in t:
            return t.get("fn")
        t = t["return_type"]
    return t


def schema_value(schema: dict | None, depth: int = 0):
    """A value of a JSON schema (the option dump's ``config.schema``, pydantic's): the first non-null branch of an
    ``anyOf``, an object with its required properties (or one key of its ``additionalProperties``), a one-element
    array, 1 / 1.0 / true / a word; None when the schema says nothing usable."""
    if not isinstance(schema, dict) or depth > 4:
        return None
    for key in ("anyOf", "oneOf"):
        if key in schema:
            for br in schema[key]:
                if isinstance(br, dict) and br.get("type") != "null":
                    v = schema_value(br, depth + 1)
                    if v is not None:
                        return v
            return None
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    t = schema.get("type")
    if t == "object":
        props = schema.get("properties") or {}
        out = {k: schema_value(props.get(k), depth + 1) for k in schema.get("required") or []}
        add = schema.get("additionalProperties")
        if not out and isinstance(add, dict):
            out = {"synth": schema_value(add, depth + 1)}
        return {k: v for k, v in out.items() if v is not None}
    if t == "array":
        item = schema_value(schema.get("items"), depth + 1)
        return [] if item is None else [item]
    return {"integer": 1, "number": 1.0, "boolean": True, "string": "synth"}.get(t)


def _flag_value(o: dict, rnd: random.Random) -> tuple[str, str | None]:
    """(option string, value or None for a bare flag) for one option: its choices (or the Literal values vLLM
    shows as metavar), a boolean's on/off spelling, or a value of its type (edge values included: 0, -1, large)."""
    flags = [f for f in o["flags"] if f.startswith("--")] or o["flags"]
    flag = flags[0]
    action = o["action"]
    if action in ("store_true", "store_false") or o.get("nargs") == 0:
        return flag, None
    if isinstance(action, dict) and action.get("custom", "").endswith("EnableDisableAction") or \
            action == "boolean_optional":
        neg = [f for f in (o.get("negative") or []) if f.startswith("--no-")]
        return (rnd.choice(neg) if neg and rnd.random() < 0.5 else flag), None
    choices = o.get("choices") or o.get("metavar")
    if isinstance(choices, list) and choices:
        return flag, str(rnd.choice([c for c in choices if c is not None] or ["auto"]))
    t = o.get("type")
    rt = t.get("return_type") if isinstance(t, dict) else t
    if rt == "int" or (isinstance(t, dict) and "int" in str(t.get("fn"))):
        return flag, rnd.choice(_INTS)
    if rt == "float":
        return flag, rnd.choice(_FLOATS)
    if rt == "json" or return_type(t) == "json" or (isinstance(t, dict) and "dict" in json.dumps(t)):
        # a JSON option of no config class (``--custom-histogram-buckets``: a dict of lists): a value of its schema
        # beside the empty and the bogus object
        v = schema_value((o.get("config") or {}).get("schema"))
        return flag, rnd.choice(["{}", '{"bogus": 1}'] + ([json.dumps(v)] if v not in (None, {}) else []))
    if rt == "bool":
        return flag, rnd.choice(["true", "false"])
    return flag, rnd.choice(["auto", "none", "1", "x"])


def _flag_mutation(release: str, line: dict, rnd: random.Random) -> tuple[list[str], dict, str]:
    """Set any one option of the release's parser (not only those the rules judge) to a value of its type: what
    reaches the config checks of features the presets never touch (issue 31 item 1: raise-site coverage)."""
    opts = parser_options(release)
    if not opts:
        return list(line["argv"]), dict(line["env"]), "flag"
    o = rnd.choice(opts)
    flag, value = _flag_value(o, rnd)
    argv = drop_flag(list(line["argv"]), tuple(o["flags"]))
    return argv + ([flag] if value is None else [flag, value]), dict(line["env"]), f"flag:{o['dest']}"


# ----------------------------------------------------------------------------- lines aimed at raise sites

def _snake(name: str) -> str:
    import re

    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _guard_hints(chain, line_no: int) -> list[tuple[str, object, bool]]:
    """(attribute name, a value the condition compares it with or None, wanted false) for every name tested by the
    branches (and the assert) leading to the raise site at ``line_no``: ``wanted false`` when the site needs the
    name's test to be false (the else branch, under ``not``, an assert's test)."""
    import ast

    out = []

    def names(test, neg):
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            names(test.operand, not neg)
            return
        if isinstance(test, ast.BoolOp):
            for v in test.values:
                names(v, neg)
            return
        if isinstance(test, ast.Compare) and len(test.comparators) == 1:
            left, op, right = test.left, test.ops[0], test.comparators[0]
            attr = left.attr if isinstance(left, ast.Attribute) else left.id if isinstance(left, ast.Name) else None
            if attr and isinstance(right, ast.Constant) and right.value is not None:
                v = right.value
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    v = v + 1 if isinstance(op, (ast.Gt, ast.GtE)) else v - 1 if isinstance(op, (ast.Lt, ast.LtE)) else v
                out.append((attr, v, neg))
                return
            if attr and isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
                consts = [e.value for e in right.elts if isinstance(e, ast.Constant)]
                if consts:
                    out.append((attr, consts[0], neg))
                    return
        for n in ast.walk(test):
            if isinstance(n, ast.Attribute):
                out.append((n.attr, None, neg))
            elif isinstance(n, ast.Name) and n.id not in ("self", "cls"):
                out.append((n.id, None, neg))

    for parent, child in zip(chain, chain[1:]):
        if isinstance(parent, ast.If):
            names(parent.test, not any(child is x for x in parent.body))
    last = chain[-1] if chain else None
    if isinstance(last, ast.Assert):
        names(last.test, True)
    return out


def directed_lines(release: str, seed: int = 0, per_site: int = 1) -> list[dict]:
    """Lines aimed at the release's raise sites (issue 31 item 1): for each site, the names its guarding conditions
    test (and the constants they compare them with) become settings of a seed line: a top-level option of the
    release's parser when the name is one of its dests, else a key of the JSON option named after the site's config
    class (``SpeculativeConfig`` -> ``--speculative-config``, ``CompilationConfig`` -> ``--compilation-config``),
    merged into what the seed line already gives. A value the condition does not give is one of the option's type
    (``_flag_value``) or, for a JSON key, from a short list of edge values. Deterministic for a seed."""
    import ast as _ast
    from pathlib import Path as _Path

    from tools.engine_oracle.raise_sites import _root, raise_sites, validation_files
    from tools.engine_oracle.reachability import _enclosing

    engine = RELEASES[release][0]
    rnd = random.Random(f"directed:{release}:{seed}")
    opts = {o["dest"]: o for o in parser_options(release)}
    everything = {}
    from gpustack_k3.catalog.loader import DATA

    _e, version, _w = RELEASES[release]
    dump = DATA / "engines" / f"{engine}-{version}-options.json"
    if dump.is_file():
        everything = {o["dest"]: o for o in json.loads(dump.read_text())["parser"]["options"] if o.get("flags")}
    seeds = [s for s in seed_lines(release) if "argv" in s]
    unknown = set(_unregistered(release))
    seeds = [s for s in seeds if s.get("model") not in unknown] or seeds
    if not seeds:
        return []
    root = _root(release)
    trees: dict[str, object] = {}
    out = []
    for site in raise_sites(validation_files(release, root)):
        tree = trees.get(site["file"]) or trees.setdefault(site["file"], _ast.parse(_Path(site["file"]).read_text(errors="replace")))
        hints = _guard_hints(_enclosing(tree, site["line"]), site["line"])
        cls = site["function"].split(".")[0]
        json_opt = everything.get(_snake(cls)) if cls[:1].isupper() else None
        for _ in range(per_site):
            base = rnd.choice(seeds)
            argv, env = list(base["argv"]), dict(base["env"])
            obj, kinds = {}, []
            for name, value, neg in hints:
                o = opts.get(name)
                if o is not None:
                    flag, v = _flag_value(o, rnd)
                    if v is None and neg:
                        neg_flags = [f for f in (o.get("negative") or []) if f.startswith("--no-")]
                        flag = neg_flags[0] if neg_flags else flag
                    elif v is not None and value is not None and not isinstance(value, bool):
                        v = str(value)
                    argv = drop_flag(argv, tuple(o["flags"]))
                    argv += [flag] if v is None else [flag, v]
                    kinds.append(f"site:{name}")
                elif json_opt is not None and name.islower() and not name.startswith("_") and name not in ("self", "cls"):
                    obj[name] = (not neg) if value is None and rnd.random() < 0.5 else \
                        value if value is not None else rnd.choice([0, 1, 2, -1, 8, "auto"])
            if obj and json_opt is not None:
                flags = tuple(json_opt["flags"])
                current = _json_of(argv, flags) or {}
                argv = set_flag(argv, flags, json.dumps({**current, **obj}))
                kinds.append(f"site-json:{json_opt['dest']}")
            if kinds:
                out.append(dict(base, argv=argv, env=env, mutations=kinds,
                                target=f"{_Path(site['file']).relative_to(root)}:{site['line']}"))
    return out


def _unregistered(release: str) -> list[str]:
    """The catalog models whose architecture the release's registry lacks, derived from the registry table
    (catalog/data/engines/vllm-model-registry.json, tools/engine_parsers/model_registry.py; it replaced the hand-kept
    trait ``unregistered_models``)."""
    from gpustack_k3.core.rules.vllm_checks_reg11 import unregistered_catalog_models

    engine, version, _wheel = RELEASES[release]
    return unregistered_catalog_models(version, _catalog()) if engine == "vllm" else []


def generate(release: str, n: int, seed: int = 0, explore: float = 0.0) -> list[dict]:
    """``explore``: the share of mutations that set any option of the release's parser (``_flag_mutation``) rather
    than one of the options the rules judge; 0 (the CI tier's sample) keeps the corpus as before."""
    engine = RELEASES[release][0]
    seeds = [s for s in seed_lines(release) if "argv" in s]
    if not seeds:
        return []
    rnd = random.Random(f"{release}:{seed}")
    mutate = _vllm_mutations if engine == "vllm" else _sglang_mutations
    # each seed also without the model's chat parsers (older releases lack kimi_k3's: their parser refuses
    # the line before any config check runs)
    plain = []
    for s in seeds:
        argv = s["argv"]
        for flags in (("--reasoning-parser",), ("--tool-call-parser",), ("--enable-auto-tool-choice",)):
            argv = drop_flag(argv, flags)
        if argv != s["argv"]:
            plain.append(dict(s, argv=argv, seed=s["seed"] + "/no-parsers"))
    seeds = seeds + plain
    # ... and without --served-model-name (a name is platform plumbing; a reader that fails on it would hide every
    # other verdict of the line)
    unnamed = [dict(s, argv=drop_flag(s["argv"], ("--served-model-name",)), seed=s["seed"] + "/unnamed")
               for s in seeds if _find(s["argv"], ("--served-model-name",)) is not None]
    seeds = seeds + unnamed
    out = [dict(s, mutations=[]) for s in seeds]
    # a model the release does not register (the registry table, _unregistered) stays as its unmutated seed lines:
    # mutating it would only repeat "unknown architecture", so the release's refused share comes from what the
    # lines vary on models it knows (the shapes, SmolLM2)
    unknown = set(_unregistered(release))
    mutable = [s for s in seeds if s.get("model") not in unknown] or seeds
    while len(out) < n:
        base = rnd.choice(mutable)
        line = dict(base)
        kinds = []
        for _ in range(rnd.choice([1, 1, 2, 2, 3, 4])):
            if explore and rnd.random() < explore:
                argv, env, kind = _flag_mutation(release, line, rnd)
            else:
                argv, env, kind = mutate(line, rnd)
            line = dict(line, argv=argv, env=env)
            kinds.append(kind)
        line["mutations"] = kinds
        out.append(line)
    return out[:n]


# ----------------------------------------------------------------------------- P/D pairs (vLLM)

PAIR_MUTATIONS = ["spec-size", "spec-size", "spec-backend", "spec-method", "drop-spec", "dcp", "tp", "kvdtype",
                  "block", "prefix", "role", "connector", "attn", "enforce-off", "dtype", "len"]


def _pair_mutate(side: dict, kind: str, rnd: random.Random) -> dict:
    argv, env = list(side["argv"]), dict(side["env"])
    sc = _json_of(argv, SPEC)
    if kind == "spec-size" and sc:
        sc["num_speculative_tokens"] = rnd.choice([1, 3, 5, 7, 8])
        argv = set_flag(argv, SPEC, json.dumps(sc))
    elif kind == "spec-backend" and sc:
        sc["attention_backend"] = rnd.choice(["FLASHINFER_MLA", "TRITON_MLA", "CUTLASS_MLA"])
        argv = set_flag(argv, SPEC, json.dumps(sc))
    elif kind == "spec-method":
        argv = set_flag(argv, SPEC, json.dumps(rnd.choice([
            {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
            {"method": "dspark", "model": KIMI_DRAFT, "num_speculative_tokens": 7},
            {"method": "mtp", "num_speculative_tokens": 1}])))
    elif kind == "drop-spec":
        argv = drop_flag(argv, SPEC)
    elif kind == "dcp":
        argv = set_flag(argv, DCP, rnd.choice(["1", "2", "4", "8"]))
    elif kind == "tp":
        argv = set_flag(argv, TP, rnd.choice(["4", "8"]))
    elif kind == "kvdtype":
        argv = set_flag(argv, ("--kv-cache-dtype",), rnd.choice(["auto", "fp8", "fp8_e4m3"]))
    elif kind == "block":
        argv = set_flag(argv, ("--block-size",), rnd.choice(["64", "128", "1536"]))
    elif kind == "prefix":
        argv = set_flag(drop_flag(argv, ("--enable-prefix-caching",)), ("--no-enable-prefix-caching",), None)
    elif kind in ("role", "connector", "enforce-off"):
        kv = _json_of(argv, KVT) or {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
        if kind == "role":
            kv["kv_role"] = rnd.choice(["kv_producer", "kv_consumer", "kv_both"])
        elif kind == "connector":
            kv["kv_connector"] = rnd.choice(["NixlConnector", "NixlPushConnector"])
        else:
            kv.setdefault("kv_connector_extra_config", {})["enforce_handshake_compat"] = False
        argv = set_flag(argv, KVT, json.dumps(kv))
    elif kind == "attn":
        argv = set_flag(argv, ("--attention-backend",), rnd.choice(["FLASHINFER_MLA", "TRITON_MLA", "CUTLASS_MLA"]))
    elif kind == "dtype":
        argv = set_flag(argv, ("--dtype",), rnd.choice(["auto", "bfloat16"]))
    elif kind == "len":
        argv = set_flag(argv, ("--max-model-len",), rnd.choice(["131072", "262144"]))
    return dict(side, argv=argv, env=env)


def pair_seeds(release: str = "vllm-0.33.0") -> list[tuple[dict, dict]]:
    lines = [s for s in seed_lines(release) if s.get("role") in ("prefill", "decode")]
    by_preset: dict[str, dict] = {}
    for s in lines:
        by_preset.setdefault(s["seed"].split("/")[0], {})[s["role"]] = s
    # without --served-model-name, as generate() does for a share of its lines (a name is platform plumbing)
    def unnamed(side):
        return dict(side, argv=drop_flag(side["argv"], ("--served-model-name",)))

    pairs = [(d["prefill"], d["decode"]) for d in by_preset.values() if "prefill" in d and "decode" in d]
    return pairs + [(unnamed(p), unnamed(d)) for p, d in pairs]


def generate_pairs(n: int, seed: int = 0, release: str = "vllm-0.33.0") -> list[dict]:
    seeds = pair_seeds(release)
    rnd = random.Random(f"pairs:{release}:{seed}")
    out = [{"prefill": p, "decode": d, "mutations": []} for p, d in seeds]
    while len(out) < n and seeds:
        p, d = rnd.choice(seeds)
        kinds = []
        for _ in range(rnd.choice([1, 1, 2, 3])):
            kind = rnd.choice(PAIR_MUTATIONS)
            side = rnd.choice(["prefill", "decode", "both"])
            if side in ("prefill", "both"):
                p = _pair_mutate(p, kind, rnd)
            if side in ("decode", "both"):
                d = _pair_mutate(d, kind, rnd)
            kinds.append(f"{side}:{kind}")
        out.append({"prefill": p, "decode": d, "mutations": kinds})
    return out[:n]
