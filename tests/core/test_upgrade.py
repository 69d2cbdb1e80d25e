"""gpustack_k3/core/upgrade.py and `gpustack-k3 upgrade-check` (gpustack_k3/cli/upgrade_cmd.py) on vLLM
0.33.0 -> 0.34.0: lines that break, a line that only changes meaning, the rewrite where the change is mechanical,
the exit codes (1 refused, 2 unusable input), and the data file's citations against the 0.34.0 wheel (tier
engine_wheels)."""
from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from gpustack_k3.cli.upgrade_cmd import upgrade_check
from gpustack_k3.core import upgrade
from tests.support import tiers

BASE = ["vllm", "serve", "moonshotai/Kimi-K3", "--tensor-parallel-size", "8", "--kv-cache-memory-bytes", "100G"]
BARE = ["vllm", "serve", "moonshotai/Kimi-K3"]
SPEC_OLD = {"method": "dspark", "num_speculative_tokens": 3, "disable_padded_drafter_batch": True,
            "parallel_drafting": True}


def run(*args):
    return CliRunner().invoke(upgrade_check, list(args))


def ids(report, kind):
    return [x["id"] for x in report[kind]]


def test_a_line_that_sets_its_memory_has_nothing_to_report_and_one_that_does_not_is_told_of_the_kv_sizing():
    r = upgrade.check("vllm", "0.33.0", "0.34.0", BARE + ["--gpu-memory-utilization", "0.9"], {})
    assert (r["refused"], r["changed"], r["deprecated"], r["rewrite"]) == ([], [], [], None)
    assert upgrade.check("vllm", "0.33.0", "0.34.0", BASE, {})["changed"] == []   # --kv-cache-memory-bytes
    r = upgrade.check("vllm", "0.33.0", "0.34.0", BARE, {})
    assert ids(r, "changed") == ["extensible-kv-cache-default"] and r["refused"] == [] and r["rewrite"] is None
    assert "config/cache.py:495@0.34.0" in r["changed"][0]["cite"]


def test_v1_model_runner_env_is_refused_and_unset_in_the_rewrite():
    r = upgrade.check("vllm", "0.33.0", "0.34.0", BASE, {"VLLM_USE_V2_MODEL_RUNNER": "0", "HF_HOME": "/x"})
    assert ids(r, "refused") == ["model-runner-v1-removed"]
    assert "platforms/interface.py:1483@0.34.0" in r["refused"][0]["cite"]
    assert r["rewrite"] == {"argv": BASE, "unset_env": ["VLLM_USE_V2_MODEL_RUNNER"], "env": {"HF_HOME": "/x"},
                            "complete": True, "still_refused": []}
    r1 = upgrade.check("vllm", "0.33.0", "0.34.0", BASE, {"VLLM_USE_V2_MODEL_RUNNER": "1"})
    assert ids(r1, "refused") == [] and ids(r1, "deprecated") == ["model-runner-v2-env-redundant"]


@pytest.mark.parametrize("form", ["json", "equals", "short", "dotted", "underscores"])
def test_removed_speculative_keys_are_refused_and_dropped_in_every_spelling(form):
    if form == "json":
        argv = BASE + ["--speculative-config", json.dumps(SPEC_OLD)]
    elif form == "equals":
        argv = BASE + ["--speculative-config=" + json.dumps(SPEC_OLD)]
    elif form == "short":
        argv = BASE + ["-sc", json.dumps(SPEC_OLD)]
    elif form == "underscores":
        argv = BASE + ["--speculative_config", json.dumps(SPEC_OLD)]
    else:
        argv = BASE + ["--speculative-config.method", "dspark", "--speculative-config.num_speculative_tokens", "3",
                       "--speculative-config.disable_padded_drafter_batch", "true",
                       "--speculative-config.parallel_drafting", "true"]
    r = upgrade.check("vllm", "0.33.0", "0.34.0", argv, {})
    assert ids(r, "refused") == ["speculative-disable-padded-drafter-batch-removed"]
    assert ids(r, "deprecated") == ["speculative-parallel-drafting-deprecated"]
    rw = r["rewrite"]
    assert rw["complete"] and rw["argv"][:len(BASE)] == BASE
    again = upgrade.check("vllm", "0.33.0", "0.34.0", rw["argv"], rw["env"])
    assert again["refused"] == [] and again["deprecated"] == [] and again["rewrite"] is None
    if form == "dotted":
        assert rw["argv"] == BASE + ["--speculative-config.method", "dspark",
                                     "--speculative-config.num_speculative_tokens", "3"]
    else:
        spec = json.loads(rw["argv"][-1].partition("=")[2] if form == "equals" else rw["argv"][-1])
        assert spec == {"method": "dspark", "num_speculative_tokens": 3}


def test_refusals_without_a_mechanical_rewrite_stay_refused():
    spec = {"method": "eagle", "model": "d", "num_speculative_tokens": 2, "parallel_drafting": True,
            "use_heterogeneous_vocab": True}
    r = upgrade.check("vllm", "0.33.0", "0.34.0", BASE + ["--speculative-config", json.dumps(spec)], {})
    assert ids(r, "refused") == ["speculative-use-heterogeneous-vocab-removed",
                                 "speculative-parallel-drafting-other-methods"]
    assert r["rewrite"]["still_refused"] == ["speculative-parallel-drafting-other-methods"]
    assert not r["rewrite"]["complete"]
    assert "parallel_drafting" in r["rewrite"]["argv"][-1]      # not dropped: it may have had an effect in 0.33.0
    custom = upgrade.check("vllm", "0.33.0", "0.34.0",
                           BASE + ["--speculative-config", '{"method": "custom_class", "model": "m.P"}'], {})
    assert ids(custom, "refused") == ["speculative-custom-class-removed"] and custom["rewrite"] is None


def test_dspark_with_dcp_changes_the_draft_dcp_default_unless_set():
    spec = {"method": "dspark", "num_speculative_tokens": 3}
    line = BASE + ["--speculative-config", json.dumps(spec), "-dcp", "8"]
    r = upgrade.check("vllm", "0.33.0", "0.34.0", line, {})
    assert ids(r, "changed") == ["draft-dcp-default"] and r["refused"] == []
    set_ = BASE + ["--speculative-config", json.dumps({**spec, "draft_decode_context_parallel_size": 8}), "-dcp", "8"]
    assert upgrade.check("vllm", "0.33.0", "0.34.0", set_, {})["changed"] == []
    no_dcp = BASE + ["--speculative-config", json.dumps(spec), "--decode-context-parallel-size", "1"]
    assert upgrade.check("vllm", "0.33.0", "0.34.0", no_dcp, {})["changed"] == []


def test_nixl_lines_are_told_about_the_connector_version_and_cudagraph_sizes_are_deprecated():
    kv = {"kv_connector": "NixlConnector", "kv_role": "kv_producer"}
    line = BASE + ["--kv-transfer-config", json.dumps(kv), "-cc", '{"cudagraph_capture_sizes": [1, 2, 4]}']
    r = upgrade.check("vllm", "0.33.0", "0.34.0", line, {})
    assert ids(r, "changed") == ["nixl-connector-version"]
    assert ids(r, "deprecated") == ["cudagraph-capture-sizes-deprecated"] and r["rewrite"] is None


def test_cli_exit_codes_json_and_text():
    spec = json.dumps(SPEC_OLD)
    res = run("--engine", "vllm", "--from", "0.33.0", "--to", "0.34.0", "--env", "VLLM_USE_V2_MODEL_RUNNER=0",
              "-o", "json", "--", *BASE, "--speculative-config", spec)
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["rewrite"]["complete"] is True
    assert set(ids(doc, "refused")) == {"model-runner-v1-removed", "speculative-disable-padded-drafter-batch-removed"}
    text = run("--engine", "vllm", "--from", "0.33.0", "--to", "0.34.0", "--env", "VLLM_USE_V2_MODEL_RUNNER=0",
               "--", *BASE)
    assert text.exit_code == 1
    assert "refused: model-runner-v1-removed [rewritten]" in text.stdout
    assert "unset VLLM_USE_V2_MODEL_RUNNER" in text.stdout
    ok = run("--engine", "vllm", "--from", "0.33.0", "--to", "0.34.0", "-o", "json", "--", *BASE)
    assert ok.exit_code == 0 and json.loads(ok.stdout)["ok"] is True


@pytest.mark.parametrize("args,where", [
    (["--from", "0.29.0", "--to", "0.34.0"], "--from/--to"),
    (["--from", "0.33.0", "--to", "0.34.0", "--env", "NOEQUALS"], "--env"),
    # lines the FROM release's own parser refuses: nothing to upgrade (where: the token, as check-args names it)
    (["--from", "0.33.0", "--to", "0.34.0", "--", "vllm", "serve", "m", "--speculative-config", "{not json"],
     "argv[1]"),
    (["--from", "0.33.0", "--to", "0.34.0", "--", "vllm", "serve", "m", "--no-such-flag"], "argv[1]"),
])
def test_cli_unusable_input_exits_2_naming_the_field(args, where):
    res = run("--engine", "vllm", *args[:4], "-o", "json", *args[4:])
    assert res.exit_code == 2, res.output
    err = json.loads(res.stdout)["error"]
    assert err["where"] == where and err["fix"]
    if where.startswith("argv"):
        assert "vllm 0.33.0's own parser refuses the line" in err["message"] and "check-args" in err["fix"]
    assert "Traceback" not in res.output


def test_every_entry_cites_a_file_line_of_the_target_or_the_release_it_left():
    for engine, a, b in upgrade.available():
        up = upgrade.find_upgrade(engine, a, b)
        for c in up.changes:
            for cite in c.cite:
                assert re.fullmatch(rf"[\w/.]+\.py:\d+@({re.escape(b)}|{re.escape(a)})", cite), (c.id, cite)
            assert any(cite.endswith("@" + b) for cite in c.cite), c.id


@pytest.mark.engine_wheels
def test_the_citations_point_at_what_they_claim_in_the_wheels():
    """Each cited line holds the name the entry is about (a raise, a warning, a field, a constant)."""
    from tools.engine_parsers import dump as dump_tool

    roots = {}
    for v in ("0.33.0", "0.34.0"):
        tiers.engine_wheel("vllm", v)
        roots[v] = dump_tool.unpack(dump_tool.find_wheel("vllm", v))[0] / "vllm"
    up = upgrade.find_upgrade("vllm", "0.33.0", "0.34.0")
    expect = {   # cite -> a token its line must contain
        "platforms/interface.py:1483@0.34.0": "raise ValueError",
        "platforms/interface.py:1487@0.34.0": "logger.warning",
        "config/utils.py:72@0.34.0": 'extra="forbid"',
        "config/speculative.py:468@0.33.0": "disable_padded_drafter_batch",
        "config/speculative.py:496@0.33.0": "use_heterogeneous_vocab",
        "config/speculative.py:78@0.33.0": '"custom_class"',
        "config/speculative.py:484@0.34.0": "draft_decode_context_parallel_size",
        "config/speculative.py:1690@0.34.0": "raise ValueError",
        "v1/worker/gpu/spec_decode/dflash/config.py:33@0.34.0": "def default_draft_decode_context_parallel_size",
        "distributed/kv_transfer/kv_connector/v1/nixl/metadata.py:57@0.34.0": "NIXL_CONNECTOR_VERSION: int = 16",
        "config/vllm.py:2588@0.34.0": "logger.warning_once",
        "envs.py:655@0.34.0": "VLLM_MARLIN_INPUT_DTYPE",
        "config/cache.py:186@0.34.0": "DEFAULT_GPU_MEMORY_UTILIZATION: ClassVar[float] = 0.92",
        "config/cache.py:395@0.34.0": "enable_extensible_kv_cache",
        "config/vllm.py:3253@0.34.0": "enabled = unsupported is None",
    }
    cited = {c for ch in up.changes for c in ch.cite}
    assert set(expect) <= cited
    for cite, token in expect.items():
        m = re.fullmatch(r"(.+):(\d+)@(.+)", cite)
        line = (roots[m[3]] / m[1]).read_text().splitlines()[int(m[2]) - 1]
        assert token in line, (cite, line)


SGL = ["python3", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K3", "--tp-size", "8"]


def test_sglang_removed_flag_is_refused_and_dropped():
    line = SGL + ["--speculative-algorithm", "EAGLE", "--speculative-skip-dp-mlp-sync", "--enable-dp-attention"]
    r = upgrade.check("sglang", "0.5.22", "0.5.23", line, {})
    assert ids(r, "refused") == ["speculative-skip-dp-mlp-sync-removed"]
    assert "srt/server_args.py:696@0.5.23" in r["refused"][0]["cite"]
    assert r["rewrite"]["argv"] == SGL + ["--speculative-algorithm", "EAGLE", "--enable-dp-attention"]
    assert r["rewrite"]["complete"]
    assert upgrade.check("sglang", "0.5.22", "0.5.23", r["rewrite"]["argv"], {})["refused"] == []


@pytest.mark.parametrize("extra,env,expect", [
    (["--disaggregation-mode", "prefill"], {}, ["mooncake-failed-session-probe-default"]),   # mooncake: the default
    (["--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "mooncake"], {},
     ["mooncake-failed-session-probe-default"]),
    (["--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "nixl"], {}, []),
    (["--disaggregation-mode", "prefill"], {"SGLANG_ENABLE_FAILED_SESSION_PROBE": "0"}, []),
    ([], {}, []),
], ids=["default-backend", "mooncake", "nixl", "env-set", "no-pd"])
def test_sglang_mooncake_probe_default_only_where_it_applies(extra, env, expect):
    r = upgrade.check("sglang", "0.5.22", "0.5.23", SGL + extra, env)
    assert ids(r, "changed") == expect and r["refused"] == []


def test_every_option_an_entry_names_is_an_option_of_the_from_release():
    from gpustack_k3.core.argv.dumps import load_dump

    for engine, a, b in upgrade.available():
        dump = load_dump(f"engines/{engine}-{a}-options.json")
        dests = {dump.entry(i)["dest"] for i in range(len(dump))}
        for c in upgrade.find_upgrade(engine, a, b).changes:
            named = [cl.get("option") or cl.get("option_unset") for cl in c.when]
            named += [(c.rewrite or {}).get("drop_option"), ((c.rewrite or {}).get("drop_key") or {}).get("option")]
            assert {n for n in named if n} <= dests, (engine, a, c.id)


def test_a_config_file_is_read_as_the_engine_merges_it(tmp_path):
    cfg = tmp_path / "serve.yaml"
    cfg.write_text("speculative-config:\n  method: dspark\n  num_speculative_tokens: 3\n"
                   "  disable_padded_drafter_batch: true\n")
    res = run("--engine", "vllm", "--from", "0.33.0", "--to", "0.34.0", "-o", "json", "--",
              *BARE, "--gpu-memory-utilization", "0.9", "--config", str(cfg))
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert ids(doc, "refused") == ["speculative-disable-padded-drafter-batch-removed"]
    # the key is in the file, not on the line: nothing here rewrites it, and the re-judged line says so
    assert doc["rewrite"]["complete"] is False
    assert doc["rewrite"]["still_refused"] == ["speculative-disable-padded-drafter-batch-removed"]
    missing = run("--engine", "vllm", "--from", "0.33.0", "--to", "0.34.0", "-o", "json", "--",
                  *BARE, "--config", str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 2 and json.loads(missing.stdout)["error"]["where"].startswith("argv --config")


@pytest.mark.parametrize("preset,expect", [
    # Kimi-K3 P/D with DCP 8 and DSpark: the draft's DCP default and the NIXL handshake change; nothing refused
    ("kimi-k3-b300-1p1d", {"prefill": ["draft-dcp-default", "nixl-connector-version"],
                           "decode": ["draft-dcp-default", "nixl-connector-version"]}),
    ("dsv41-flash-gb300-8p1d", {"prefill": ["nixl-connector-version"],
                                "decode": ["nixl-connector-version", "extensible-kv-cache-default"]}),
])
def test_the_vllm_0_33_0_presets_rendered_lines(preset, expect):
    from gpustack_k3.cli.main import cli

    res = CliRunner().invoke(cli, ["dry-run", "--preset", preset, "-o", "json"])
    roles = {r["role"]: r["leader"] for r in json.loads(res.stdout)["roles"]}
    assert set(roles) == set(expect)
    for role, leader in roles.items():
        r = upgrade.check("vllm", "0.33.0", "0.34.0", leader["argv"], leader.get("env") or {})
        assert r["refused"] == [] and r["deprecated"] == [] and r["rewrite"] is None, (role, r)
        assert ids(r, "changed") == expect[role], role
