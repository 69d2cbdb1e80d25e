"""Generated command lines for the differential tests, and the comparison of two readings of one.

``Corpus(engine, version).generate(tmp, size, seed)`` draws command lines from the version's parser dump:
options the spec models (more often) and others, valid and invalid values for each option's type, every spelling
the engine's parser accepts and some it does not (aliases, underscores, --k=v, abbreviations unique or not,
dotted JSON keys and + appends, -O forms, --no-/--disable- booleans, --config YAML files, stray tokens, missing
values, unknown flags). Deterministic for a seed.

Inside a config dataclass's JSON (vLLM --compilation-config, --attention-config, ...) a field whose values its
type decides gets any JSON value (the dump carries each field's JSON types); a field the engine's own validator
code decides ("validated" in the dump) is read as accepting anything, so it gets only DATACLASS_OK's realistic
values, as do the keys of nested config objects (not modelled).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.argv import read_argv, version_dump

DATACLASS_OK = {
    "attention_config": [{"mla_prefill_backend": "TRTLLM_RAGGED"}, {"use_prefill_query_quantization": True},
                         {"backend": "FLASH_ATTN"}, {}],
    "compilation_config": [{"cudagraph_capture_sizes": [1, 2, 4]}, {"mode": 3}, {"level": 3},
                           {"backend": "inductor"}, {}],
}
DATACLASS_ANY = [1, 0, -1, 2.5, "abc", "3", True, None, [1], {}, "auto"]
WORDS = ["abc", "auto", "fp8", "none", "None", "", "/m", "Qwen/x", "0", "-1", "1.5", "8k", "2K", "1.5K", "3m"]
FAULTS = [["--no-such-flag"], ["--no-such-flag", "1"], ["stray"], ["--max-num"], ["--en"], ["-x"], ["--"],
          ["-O3"], ["-O", "2"], ["-O=1"], ["-Odecode"], ["-O"], ["--config=x.yaml"], ["--help"],
          ["--tensor-parallel-size"], ["--seed", "--port"], ["-tp", "-1"], ["--speculative-config.method"],
          ["--tp_size", "2"], ["--model", "/m2"], ["--served-model-name", "k3"]]
VLLM_SPECULATIVE = [["--speculative-config.method", "ngram", "--speculative-config.num_speculative_tokens", "3"],
                    ["-sc", '{"method": "dspark", "num_speculative_tokens": 7}'],
                    ["--speculative_config.method=mtp", "-sc.num_speculative_tokens", "2"],
                    ["--speculative-config.num_speculative_tokens+", "1,2"]]
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
    if desc.get("fn") in ("optional_type", "parse_type"):
        return _type_kind(desc.get("return_type"))
    return desc.get("fn", "str")


def _dataclass(desc) -> dict:
    while isinstance(desc, dict) and "cls" not in desc and "return_type" in desc:
        desc = desc["return_type"]
    return (desc or {}).get("cls", {}) if isinstance(desc, dict) else {}


def _dataclass_fields(desc) -> set[str]:
    return set(_dataclass(desc).get("fields") or ())


def _typed_fields(desc) -> list[str]:
    """Fields whose accepted JSON values are a type's (not decided by the engine's own validator code)."""
    types = _dataclass(desc).get("types") or {}
    return sorted(f for f, alts in types.items() if "validated" not in json.dumps(alts))


class Corpus:
    def __init__(self, engine: str, version: str) -> None:
        cat = load_catalog()
        self.engine, self.entry, self.version = engine, cat.engine(engine), cat.version(engine, version)
        self.dump = version_dump(self.version)
        self.modelled = [self.dump.flag(f.flag) for f in self.entry.flags if f.flag in self.dump.option_strings]
        self.others = [o for o in self.dump.options if o.kind != "help" and o not in self.modelled]
        self.serve = engine == "vllm" and (self.version.command or self.entry.command)[:2] == ["vllm", "serve"]

    # ---------------------------------------------------------------- values and names
    def _values(self, o, rnd: random.Random, valid: bool) -> list[str]:
        kind = _type_kind(o.type_desc)
        if o.choices is not None:
            pool = [str(c) for c in o.choices if c is not None]
            one = rnd.choice(pool) if valid or rnd.random() < 0.3 else rnd.choice(["bogus", pool[0].upper() + "x"])
        elif kind == "int":
            one = str(rnd.choice([0, 1, 2, 8, 64, 4096, -1])) if valid else rnd.choice(["x", "1.5", "0x10", "8k"])
        elif kind == "float":
            one = rnd.choice(["0.5", "0.92", "1e-3", "2"]) if valid else rnd.choice(["abc", "1,5"])
        elif kind in ("human_readable_int", "human_readable_int_or_auto"):
            one = rnd.choice(["1k", "2K", "25.6k", "3G", "4096", "1t", "2Mi"] + (["auto", "-1"] if kind.endswith("auto")
                                                                                else [])) \
                if valid else rnd.choice(["1.5K", "x", "1kk"])
        elif kind in ("json", "json_list_type"):
            one = rnd.choice(['{"a": 1}', "[1, 2]", "null", "None", "", '"s"']) if valid else rnd.choice(["{x", "[1,"])
        elif kind == "union_dict_and_str":
            one = rnd.choice(["abc", '{"a": "b"}']) if valid else "{bad json}"
        elif kind == "dataclass":
            fields = _dataclass_fields(o.type_desc)
            ok = [d for d in DATACLASS_OK.get(o.dest, [{}]) if set(d) <= fields]
            typed = _typed_fields(o.type_desc)
            if valid and typed and rnd.random() < 0.4:   # a typed field, any JSON value: its type decides
                one = json.dumps({rnd.choice(typed): rnd.choice(DATACLASS_ANY)})
            else:
                one = json.dumps(rnd.choice(ok or [{}])) if valid else rnd.choice(['{"no_such_key": 1}', "{x", "[1]"])
        elif kind == "parse_cuda_graph_config_arg":
            one = rnd.choice(['{"decode": {"max_bs": 8}}', "{}"]) if valid else rnd.choice(['{"x": {}}', "[1]"])
        elif kind == "lambda":
            one = rnd.choice(["0,1", "a,b", "AUTO", "Flash-Infer"])
        else:
            one = rnd.choice(WORDS[:8]) if valid else rnd.choice(["-x", "--y"])
        if o.nargs in ("+", "*") and valid:
            return [one] + [str(rnd.choice(o.choices)) if o.choices else one for _ in range(rnd.randint(0, 2))]
        return [one]

    def _name(self, o, rnd: random.Random) -> str:
        """One spelling of an option's name: an alias, underscores, or an abbreviation (unique or not)."""
        name = rnd.choice([f for f in o.flags if f not in o.negative])
        if name.startswith("--"):
            r = rnd.random()
            if r < 0.25:
                name = "--" + name[2:].replace("-", "_")
            elif r < 0.4:
                name = name[:max(4, rnd.randint(len(name) // 2, len(name) - 1))]
        return name

    def _group(self, o, rnd: random.Random, valid: bool) -> list[str]:
        if o.kind in ("boolean_optional", "store_true", "store_false", "store_const", "count"):
            name = rnd.choice(sorted(o.negative)) if o.negative and rnd.random() < 0.4 else self._name(o, rnd)
            return [f"{name}={rnd.choice(['1', 'x'])}"] if not valid else [name]
        name = self._name(o, rnd)
        if _type_kind(o.type_desc) in ("dataclass", "json") and valid and rnd.random() < 0.5:
            try:   # dotted keys (and + appends) instead of one JSON value
                obj = json.loads(self._values(o, rnd, True)[0] or "{}")
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
        vals = self._values(o, rnd, valid)
        if len(vals) == 1 and rnd.random() < 0.35:
            return [f"{name}={vals[0]}"]
        return [name, *vals]

    def _config(self, path: Path, rnd: random.Random) -> None:
        lines = []
        for o in (rnd.choice(self.modelled + self.others) for _ in range(rnd.randint(1, 3))):
            key = o.canonical[2:] if o.canonical.startswith("--") else o.dest
            if rnd.random() < 0.4:
                key = key.replace("-", "_")
            if o.kind in ("boolean_optional", "store_true"):
                lines.append(f"{key}: {rnd.choice(['true', 'false'])}")
            else:
                v = self._values(o, rnd, True)
                lines.append(f"{key}: {json.dumps(v if len(v) > 1 else v[0])}")
        path.write_text("\n".join(lines) + "\n")

    # ---------------------------------------------------------------- command lines
    def generate(self, tmp: Path, size: int, seed: int) -> list[list[str]]:
        rnd = random.Random(seed)
        out: list[list[str]] = []
        for i in range(size):
            argv: list[str] = []
            if self.engine == "vllm" and rnd.random() < 0.25:
                argv.append("/models/x")
            if self.engine == "sglang" and rnd.random() < 0.9:
                argv += rnd.choice([["--model-path", "/models/x"], ["--model", "/m"], ["--model-path=/m"]])
            for _ in range(rnd.randint(0, 6)):
                o = rnd.choice(self.modelled) if rnd.random() < 0.5 else rnd.choice(self.others)
                argv += self._group(o, rnd, valid=rnd.random() < 0.85)
            if self.engine == "vllm" and rnd.random() < 0.15:
                argv += rnd.choice(VLLM_SPECULATIVE)
            if rnd.random() < 0.2:
                at = rnd.randint(0, len(argv))
                argv[at:at] = rnd.choice(FAULTS)
            if rnd.random() < 0.08:
                cfg = tmp / f"{self.engine}-{self.version.key}-{i}.yaml"
                self._config(cfg, rnd)
                argv += ["--config", str(cfg)]
            out.append(argv)
        return out

    def spellings(self, argvs: list[list[str]]) -> dict[str, int]:
        return {k: sum(1 for argv in argvs if any(f(t) for t in argv)) for k, f in SPELLINGS.items()}

    # ---------------------------------------------------------------- comparing with the engine's answer
    def read(self, argv: list[str], *, model_optional: bool):
        return read_argv(self.entry, self.version, argv, read_file=lambda p: Path(p).read_text(),
                         model_optional=model_optional)

    def disagreements(self, argv: list[str], refused: bool, real: dict, *, model_optional: bool,
                      model_key: str) -> list[str]:
        """What our reading says differently from the engine's answer ``real`` ({"unrecognized", "parsed"?,
        "error"}); ``refused``: the engine's parser refused the command line."""
        ours = self.read(argv, model_optional=model_optional)
        if bool(ours.refusals) != refused:
            return [f"ours {'refuses' if ours.refusals else 'accepts'}: {[r.message for r in ours.refusals]}; "
                    f"engine {'refuses' if refused else 'accepts'}: {real.get('error')}"]
        if refused:
            text = real.get("unrecognized_text")
            if text is not None and " ".join(ours.unrecognized) != text:
                return [f"unrecognized: ours {' '.join(ours.unrecognized)!r}, engine {text!r}"]
            return []
        problems = []
        parsed = real["parsed"]
        for dest, g in ours.given.items():
            theirs, mine = parsed.get(dest), json.loads(json.dumps(g.value, default=str))
            if isinstance(theirs, dict) and "__dataclass__" in theirs:     # a config dataclass: the keys given
                wrong = {k: (v, theirs.get(k)) for k, v in (mine or {}).items() if not _same(v, theirs.get(k))}
                if wrong:
                    problems.append(f"{dest}: keys differ (ours, engine's): {wrong}")
            elif not _same(mine, theirs):
                problems.append(f"{dest}: ours {mine!r}, engine {theirs!r}")
        expected = parsed.get("model_tag") if self.serve and parsed.get("model_tag") is not None \
            else parsed.get(model_key)
        if ours.model is not None and ours.model != expected:
            problems.append(f"model: ours {ours.model!r}, engine {expected!r}")
        return problems


def _same(mine, theirs) -> bool:
    """Equal, or the enum member pydantic made of the string (vLLM validates config dataclasses)."""
    if isinstance(theirs, dict) and "__enum__" in theirs:
        return mine in (theirs["__enum__"], theirs["value"])
    return mine == theirs
