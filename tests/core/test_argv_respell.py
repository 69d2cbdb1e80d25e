"""Any two spellings of one configuration give identical findings, plan and imported document.

Hypothesis draws a valid command line (options the spec models and options it does not, with values), writes
it once canonically (``--flag value``, the parser's first option string), and once respelled the ways the
engine's parser accepts: another alias, underscores for dashes (vLLM), ``--flag=value``, an abbreviation
(argparse's unique prefix), dotted JSON keys and ``+`` list appends (vLLM), ``--no-``/``--disable-`` for
false, a ``--config`` YAML file holding some of the options, an earlier setting the later one overrides,
and any order. Both are read by check-args/import/plan's code path; the results must be equal.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustack_k3.catalog import load_catalog
from gpustack_k3.cli.common import document_from_data
from gpustack_k3.cli.core_cmds import argv_to_data
from gpustack_k3.core.argv import version_dump
from gpustack_k3.core.plan import PlanUnavailable, plan
from gpustack_k3.core.resolve import resolve
from gpustack_k3.core.rules import validate

CAT = load_catalog()

# (flag as the engine's help lists it, value strategy). Values are what a user would write; the engine's own
# type decides how they are read. Modelled fields and pass-through options alike.
VLLM_OPTIONS = {
    "--tensor-parallel-size": st.sampled_from([1, 2, 4, 8]),
    "--decode-context-parallel-size": st.sampled_from([1, 2, 4, 8]),
    "--pipeline-parallel-size": st.sampled_from([1, 2]),
    "--gpu-memory-utilization": st.sampled_from([0.85, 0.9, 0.92, 0.95]),
    "--max-model-len": st.sampled_from([8192, 65536, 262144, 1000000]),
    "--max-num-seqs": st.sampled_from([16, 32, 64, 256]),
    "--max-num-batched-tokens": st.sampled_from([4096, 16384, 32768]),
    "--long-prefill-token-threshold": st.sampled_from([0, 2048, 4096]),
    "--kv-cache-dtype": st.sampled_from(["auto", "fp8", "fp8_e4m3", "bfloat16"]),
    "--enable-prefix-caching": st.booleans(),
    "--enable-chunked-prefill": st.booleans(),
    "--enforce-eager": st.booleans(),
    "--trust-remote-code": st.just(True),
    "--tool-call-parser": st.sampled_from(["kimi_k3", "hermes"]),
    "--reasoning-parser": st.sampled_from(["kimi_k3", "deepseek_r1"]),
    "--load-format": st.sampled_from(["auto", "fastsafetensors", "safetensors"]),
    "--speculative-config": st.fixed_dictionaries(
        {"method": st.sampled_from(["dspark", "mtp"]), "num_speculative_tokens": st.integers(1, 7)},
        optional={"model": st.just("Inferact/Kimi-K3-DSpark"), "draft_sample_method": st.just("probabilistic")}),
    "--attention-config": st.fixed_dictionaries(
        {"mla_prefill_backend": st.sampled_from(["TRTLLM_RAGGED", "FLASHINFER"])},
        optional={"use_prefill_query_quantization": st.booleans()}),
    "--seed": st.integers(0, 1000),
    "--block-size": st.sampled_from([16, 32, 64]),
    "--async-scheduling": st.booleans(),
    "--compilation-config": st.fixed_dictionaries({"cudagraph_capture_sizes": st.lists(st.sampled_from([1, 2, 4, 8]),
                                                                                       min_size=1, max_size=3)}),
}
SGLANG_OPTIONS = {
    "--tp-size": st.sampled_from([1, 2, 4, 8]),
    "--dcp-size": st.sampled_from([1, 2, 4, 8]),
    "--mem-fraction-static": st.sampled_from([0.8, 0.85, 0.88]),
    "--context-length": st.sampled_from([65536, 262144, 1000000]),
    "--chunked-prefill-size": st.sampled_from([8192, 32768]),
    "--max-prefill-tokens": st.sampled_from([16384, 32768]),
    "--max-running-requests": st.sampled_from([32, 48]),
    "--kv-cache-dtype": st.sampled_from(["auto", "fp8_e4m3", "bf16"]),
    "--mamba-full-memory-ratio": st.sampled_from([0.86, 0.9]),
    "--enable-symm-mem": st.just(True),
    "--disable-custom-all-reduce": st.just(True),
    "--disable-radix-cache": st.just(True),
    "--trust-remote-code": st.just(True),
    "--reasoning-parser": st.sampled_from(["kimi_k3"]),
    "--speculative-algorithm": st.sampled_from(["DSPARK", "NEXTN"]),
    "--speculative-dspark-block-size": st.integers(1, 7),
    "--random-seed": st.integers(0, 1000),
    "--page-size": st.sampled_from([1, 64]),
}


@dataclass
class Setting:
    flag: str
    value: object


def _opts(engine: str, version: str):
    return version_dump(CAT.version(engine, version))


def _text(v) -> str:
    return json.dumps(v, separators=(",", ":")) if isinstance(v, (dict, list)) else str(v)


def canonical(settings_: list[Setting], engine: str, version: str) -> list[str]:
    dump = _opts(engine, version)
    out: list[str] = []
    for s in settings_:
        o = dump.flag(s.flag)
        if o.kind in ("boolean_optional", "store_true"):
            out.append(o.canonical if s.value else "--no-" + o.canonical[2:])
        else:
            out += [o.canonical, _text(s.value)]
    return out


def _unique_prefix(dump, flag: str) -> str | None:
    """The shortest prefix (longer than half the flag) that argparse resolves to this option only."""
    target = dump.flag(flag)
    for n in range(max(4, len(flag) // 2), len(flag)):
        p = flag[:n]
        hits = {id(dump.option(i)) for i in dump.prefixed(p)}
        if hits == {id(target)} and p not in dump.option_strings:
            return p
    return None


def respell(settings_: list[Setting], engine: str, version: str, rnd: random.Random, cfg: Path) -> list[str]:
    dump = _opts(engine, version)
    units: list[list[list[str]]] = []        # per setting: its token groups (a stale one first), kept in order
    in_file: dict[str, object] = {}
    for s in settings_:
        groups: list[list[str]] = []
        units.append(groups)
        o = dump.flag(s.flag)
        boolean = o.kind in ("boolean_optional", "store_true")
        # a config file holds some options (vLLM serve drops a false boolean from it: keep those on the line)
        if rnd.random() < 0.25 and (not boolean or s.value):
            key = s.flag[2:]
            if engine == "vllm" and rnd.random() < 0.5:
                key = key.replace("-", "_")
            in_file[key] = s.value
            continue
        if rnd.random() < 0.2 and not boolean:     # an earlier setting the later one overrides
            groups.append([s.flag, _text(s.value) + ("0" if isinstance(s.value, int) and not isinstance(s.value, bool)
                                                       else "")] if not isinstance(s.value, dict) else
                          [s.flag, "{}"])
        names = [f for f in o.flags if f not in o.negative]
        if boolean and not s.value:
            names = sorted(o.negative)
        name = rnd.choice(names)
        if rnd.random() < 0.3 and name.startswith("--"):
            name = _unique_prefix(dump, name) or name
        if engine == "vllm" and name.startswith("--") and rnd.random() < 0.4:
            name = name.replace("-", "_").replace("__", "--", 1)
        if boolean:
            groups.append([name])
        elif engine == "vllm" and isinstance(s.value, dict) and s.value and rnd.random() < 0.6:
            toks: list[str] = []
            for k, v in s.value.items():
                if isinstance(v, list) and v and rnd.random() < 0.5:
                    toks += [f"{name}.{k}+", ",".join(map(str, v))] if all(isinstance(x, str) for x in v) \
                        else [f"{name}.{k}", json.dumps(v)]
                elif rnd.random() < 0.5:
                    toks.append(f"{name}.{k}={_text(v).lower() if isinstance(v, bool) else _text(v)}")
                else:
                    toks += [f"{name}.{k}", json.dumps(v)]
            groups.append(toks)
        elif rnd.random() < 0.5:
            groups.append([f"{name}={_text(s.value)}"])
        else:
            groups.append([name, _text(s.value)])
    rnd.shuffle(units)     # settings in any order; within one, the stale setting stays before its override
    argv = [t for groups in units for g in groups for t in g]
    if in_file:
        cfg.write_text(yaml.safe_dump(in_file))
        at = rnd.randint(0, len(argv))
        while at and argv[at - 1].startswith("-") and "=" not in argv[at - 1] and at < len(argv):
            at += 1             # not between a flag and its value
        argv[at:at] = ["--config", str(cfg)]
    return argv


def outcome(engine: str, version: str, argv: list[str]) -> dict:
    data, refused = argv_to_data(engine, version, "kimi-k3", "b300", 8, (), "x", argv)
    doc = document_from_data(data, "argv")
    r = resolve(doc)
    try:
        p = plan(r).to_dict()
    except PlanUnavailable as exc:
        p = {"unavailable": str(exc)}
    return {"refused": [f.to_dict() for f in refused],
            "document": doc.model_dump(mode="json", exclude_defaults=True),
            "findings": [f.to_dict() for f in validate(doc)], "plan": p}


def drawn(options: dict):
    return st.lists(st.sampled_from(sorted(options)), min_size=1, max_size=8, unique=True).flatmap(
        lambda flags: st.tuples(*(options[f].map(lambda v, f=f: Setting(f, v)) for f in flags)))


@pytest.mark.parametrize("engine,version,options", [
    ("vllm", "kimi-k3", VLLM_OPTIONS), ("vllm", "0.33.0", VLLM_OPTIONS), ("sglang", "kimi-k3", SGLANG_OPTIONS)])
def test_respelled_command_lines_read_the_same(engine, version, options, tmp_path):
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(drawn(options), st.integers(0, 2**32 - 1))
    def check(settings_, seed):
        rnd = random.Random(seed)
        canon = canonical(list(settings_), engine, version)
        other = respell(list(settings_), engine, version, rnd, tmp_path / "k3.yaml")
        a, b = outcome(engine, version, canon), outcome(engine, version, other)
        assert a["refused"] == [], (canon, a["refused"])
        assert b == a, f"\ncanonical: {canon}\nrespelled: {other}"

    check()
