"""tools/release_diff.py: the diff of two releases' validation code, on small synthetic package trees (its
logic), and in the engine_wheels tier on the real vLLM 0.33.0 and 0.34.0 wheels (the NIXL version bump and
Model Runner V1's removal must be found; the committed example under docs/releases/ must be what the tool
prints)."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.support import tiers
from tools import release_diff as rd

REPO = Path(__file__).resolve().parents[2]

OLD = {
    "config/speculative.py": '''
        class SpeculativeConfig:
            method: str = "mtp"
            disable_padded_drafter_batch: bool = False
            num_speculative_tokens: int | None = None

            def __post_init__(self):
                if self.method == "x":
                    raise ValueError(f"method {self.method} is gone")
                if self.num_speculative_tokens == 0:
                    raise ValueError("num_speculative_tokens must be positive")
                msg = f"prompt_lookup_min={self.prompt_lookup_min} must be <= prompt_lookup_max"
                raise ValueError(msg)

            def _verify(self):
                raise NotImplementedError("draft_lm_head_quantization is not supported for method " + self.method)
    ''',
    "platforms/interface.py": '''
        class Platform:
            def validate_environ(self):
                pass
    ''',
    "distributed/kv_transfer/kv_connector/v1/nixl/metadata.py": '''
        NIXL_CONNECTOR_VERSION: int = 15
        OTHER = "same"
    ''',
    "envs.py": '''
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            VLLM_HOST_IP: str = ""
        environment_variables = {
            "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", ""),
            "VLLM_USE_V2_MODEL_RUNNER": lambda: bool(int(os.getenv("VLLM_USE_V2_MODEL_RUNNER", "0"))),
        }
    ''',
    "engine/arg_utils.py": '''
        class EngineArgs:
            model: str = "m"
            speculative_config: dict | None = None

            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--disable-log-stats", action="store_true")
    ''',
}

NEW = {
    "config/speculative.py": '''
        # a comment shifts every line: nothing here may be reported as changed for that alone
        class SpeculativeConfig:
            method: str = "mtp"
            num_speculative_tokens: int | None = 2
            draft_decode_context_parallel_size: int | None = None

            def __post_init__(self):
                if self.num_speculative_tokens == 0:
                    raise ValueError("num_speculative_tokens must be positive")
                self._check_lookup()

            def _check_lookup(self):
                msg = f"prompt_lookup_min={self.prompt_lookup_min} must be <= prompt_lookup_max"
                raise ValueError(msg)

            def _verify(self):
                raise NotImplementedError("draft_lm_head_quantization is not supported for the method " + self.method)

            def _verify_dcp(self, draft_dcp, target_dcp):
                raise ValueError(f"draft_dcp={draft_dcp} must be 1 or {target_dcp}.")
    ''',
    "platforms/interface.py": '''
        class Platform:
            def validate_environ(self):
                for env, value in os.environ.items():
                    if env == "VLLM_USE_V2_MODEL_RUNNER" and value != "1":
                        raise ValueError(f"VLLM_USE_V2_MODEL_RUNNER={value} is no longer supported")
                    if env == "VLLM_USE_V2_MODEL_RUNNER":
                        logger.warning("VLLM_USE_V2_MODEL_RUNNER=1 is deprecated and can be unset")
    ''',
    "distributed/kv_transfer/kv_connector/v1/nixl/metadata.py": '''
        NIXL_CONNECTOR_VERSION: int = 16
        OTHER = "same"
    ''',
    "envs.py": '''
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            VLLM_HOST_IP: str = "changed only for the type checker"
        environment_variables = {
            "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", ""),
            "VLLM_SKIP_P2P_CHECK": lambda: os.getenv("VLLM_SKIP_P2P_CHECK", "1") == "1",
        }
    ''',
    "engine/arg_utils.py": '''
        class EngineArgs:
            model: str = "m"
            speculative_config: dict | None = None
            max_num_inflight_kv_loads: int | None = None

            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--disable-log-stats", action="store_true")
    ''',
}


def make_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / "vllm" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def synthetic(tmp_path):
    old = rd.Release("vllm", "1.0", make_tree(tmp_path / "old", OLD), "old")
    new = rd.Release("vllm", "1.1", make_tree(tmp_path / "new", NEW), "new")
    return rd.release_diff(old, new)


def _msgs(items):
    return [s["message"] for s in items]


def test_template_keeps_fstring_fields_and_joins_concatenations():
    import ast

    assert rd.template(ast.parse('f"a={x.y!r} b" + "c"', mode="eval").body) == "a={x.y} bc"
    assert rd.template(ast.parse('"n={}".format(n)', mode="eval").body) == "n={}"
    assert rd.template(ast.parse("msg", mode="eval").body) == "{msg}"


def test_new_and_removed_raise_sites_with_file_line(synthetic):
    r = synthetic["raises"]
    new = {s["message"]: s for s in r["new"]}
    assert set(new) == {"VLLM_USE_V2_MODEL_RUNNER={value} is no longer supported",
                        "draft_dcp={draft_dcp} must be 1 or {target_dcp}."}
    v1 = new["VLLM_USE_V2_MODEL_RUNNER={value} is no longer supported"]
    assert v1["at"] == "platforms/interface.py:6@1.1" and v1["where"] == "Platform.validate_environ"
    assert v1["kind"] == "ValueError"
    assert _msgs(r["removed"]) == ["method {self.method} is gone"]
    assert r["removed"][0]["at"] == "config/speculative.py:9@1.0"


def test_a_site_that_only_moved_lines_is_not_reported_and_one_in_another_function_is_moved(synthetic):
    r = synthetic["raises"]
    everything = _msgs(r["new"]) + _msgs(r["removed"]) + [c["new"]["message"] for c in r["changed"] + r["moved"]]
    assert "num_speculative_tokens must be positive" not in everything
    # resolved through `msg = f"..."; raise ValueError(msg)`, split out of __post_init__
    [moved] = r["moved"]
    assert moved["new"]["message"].startswith("prompt_lookup_min={self.prompt_lookup_min}")
    assert (moved["old"]["where"], moved["new"]["where"]) == ("SpeculativeConfig.__post_init__",
                                                              "SpeculativeConfig._check_lookup")


def test_a_reworded_message_is_changed_not_new(synthetic):
    [c] = synthetic["raises"]["changed"]
    assert c["old"]["message"] == "draft_lm_head_quantization is not supported for method {self.method}"
    assert c["new"]["message"] == "draft_lm_head_quantization is not supported for the method {self.method}"
    assert c["new"]["kind"] == "NotImplementedError"


def test_constants_envs_fields_and_flags(synthetic):
    d = synthetic
    assert d["constants"]["changed"] == [{
        "name": "distributed/kv_transfer/kv_connector/v1/nixl/metadata.py::NIXL_CONNECTOR_VERSION",
        "value": {"old": 15, "new": 16},
        "at": "distributed/kv_transfer/kv_connector/v1/nixl/metadata.py:2@1.1",
        "was_at": "distributed/kv_transfer/kv_connector/v1/nixl/metadata.py:2@1.0"}]
    assert not d["constants"]["added"] and not d["constants"]["removed"]   # TYPE_CHECKING block ignored
    assert [e["name"] for e in d["env"]["added"]] == ["VLLM_SKIP_P2P_CHECK"]
    assert [e["name"] for e in d["env"]["removed"]] == ["VLLM_USE_V2_MODEL_RUNNER"]
    assert d["env"]["changed"] == []
    fields = d["fields"]
    assert [f["name"] for f in fields["removed"]] == ["config/speculative.py::SpeculativeConfig.disable_padded_drafter_batch"]
    assert {f["name"] for f in fields["added"]} == {
        "config/speculative.py::SpeculativeConfig.draft_decode_context_parallel_size",
        "engine/arg_utils.py::EngineArgs.max_num_inflight_kv_loads"}
    [ch] = fields["changed"]
    assert ch["name"] == "config/speculative.py::SpeculativeConfig.num_speculative_tokens"
    assert ch["default"] == {"old": "None", "new": "2"}
    assert d["flags"]["source"].startswith("static")     # no parser dump of the synthetic releases
    assert [f["name"] for f in d["flags"]["added"]] == ["--max-num-inflight-kv-loads"]
    assert d["flags"]["removed"] == []
    assert _msgs(d["deprecations"]["new"]) == ["VLLM_USE_V2_MODEL_RUNNER=1 is deprecated and can be unset"]


def test_flags_from_parser_dumps_compare_defaults(tmp_path):
    def dump(options):
        return {"parser": {"options": options}}
    o = tmp_path / "o.json"
    n = tmp_path / "n.json"
    o.write_text(json.dumps(dump([{"dest": "a", "flags": ["--a"], "default": 1},
                                  {"dest": "b", "flags": ["--b"], "default": None}])))
    n.write_text(json.dumps(dump([{"dest": "a", "flags": ["--a"], "default": 2},
                                  {"dest": "c", "flags": ["-c", "--c"], "default": None}])))
    old = rd.Release("vllm", "1.0", make_tree(tmp_path / "old", OLD), "old")
    new = rd.Release("vllm", "1.1", make_tree(tmp_path / "new", NEW), "new")
    f = rd.release_diff(old, new, o, n)["flags"]
    assert f["source"] == "parser dumps"
    assert [x["name"] for x in f["added"]] == ["--c"] and [x["name"] for x in f["removed"]] == ["--b"]
    assert f["changed"][0]["name"] == "--a" and f["changed"][0]["default"] == {"old": 1, "new": 2}


def test_cli_json_markdown_write_and_bad_input(tmp_path, capsys):
    make_tree(tmp_path / "old", OLD)
    make_tree(tmp_path / "new", NEW)
    args = ["vllm", "1.0", "1.1", "--old-tree", str(tmp_path / "old"), "--new-tree", str(tmp_path / "new")]
    assert rd.main(args + ["-o", "json", "--write", str(tmp_path / "out")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["constants"]["changed"][0]["value"] == {"old": 15, "new": 16}
    assert json.loads((tmp_path / "out" / "vllm-1.0-to-1.1.json").read_text()) == doc
    md = (tmp_path / "out" / "vllm-1.0-to-1.1.md").read_text()
    assert "`platforms/interface.py:6@1.1` Platform.validate_environ: ValueError: VLLM_USE_V2_MODEL_RUNNER" in md
    assert "NIXL_CONNECTOR_VERSION" in md and "`15` → `16`" in md
    # a tree without the package: exit 2, a message naming the tree, no traceback
    assert rd.main(["vllm", "1.0", "1.1", "--old-tree", str(tmp_path), "--new-tree", str(tmp_path / "new")]) == 2
    err = capsys.readouterr().err
    assert "no vllm/ under" in err and "Traceback" not in err


# ------------------------------------------------------------------------------------- the real wheels

@pytest.fixture(scope="module")
def real_diff():
    tiers.engine_wheel("vllm", "0.33.0")
    tiers.engine_wheel("vllm", "0.34.0")
    return rd.release_diff(rd.locate("vllm", "0.33.0"), rd.locate("vllm", "0.34.0"))


@pytest.mark.engine_wheels
def test_real_vllm_0_34_0_nixl_bump_and_v1_runner_removal(real_diff):
    nixl = [c for c in real_diff["constants"]["changed"] if c["name"].endswith("::NIXL_CONNECTOR_VERSION")]
    assert [c["value"] for c in nixl] == [{"old": 15, "new": 16}]
    assert nixl[0]["name"].startswith("distributed/kv_transfer/kv_connector/v1/nixl/metadata.py")
    v1 = [s for s in real_diff["raises"]["new"]
          if s["file"] == "platforms/interface.py" and s["where"].endswith("validate_environ")
          and s["message"].startswith("VLLM_USE_V2_MODEL_RUNNER={value} is no longer supported")]
    assert len(v1) == 1, real_diff["raises"]["new"]
    removed = {f["name"].split("::")[1] for f in real_diff["fields"]["removed"]}
    assert {"SpeculativeConfig.disable_padded_drafter_batch", "SpeculativeConfig.use_heterogeneous_vocab"} <= removed


@pytest.mark.engine_wheels
@pytest.mark.parametrize("engine,old,new,new_dump", [
    # both releases pinned: the catalog's parser dumps
    ("vllm", "0.33.0", "0.34.0", None),
    ("sglang", "0.5.22", "0.5.23", None)])
def test_the_committed_examples_are_what_the_tool_prints(engine, old, new, new_dump):
    tiers.engine_wheel(engine, old)
    tiers.engine_wheel(engine, new)
    doc = rd.release_diff(rd.locate(engine, old), rd.locate(engine, new), None, new_dump and REPO / new_dump)
    stem = REPO / "docs" / "releases" / f"{engine}-{old}-to-{new}"
    assert json.loads(Path(f"{stem}.json").read_text()) == doc, (
        f"regenerate: python3 -m tools.release_diff {engine} {old} {new}"
        + (f" --new-dump {new_dump}" if new_dump else "") + " --write docs/releases")
    assert Path(f"{stem}.md").read_text() == rd.markdown(doc)


@pytest.mark.engine_wheels
def test_real_sglang_0_5_23_validation_in_arg_groups_is_read():
    tiers.engine_wheel("sglang", "0.5.22")
    tiers.engine_wheel("sglang", "0.5.23")
    doc = rd.release_diff(rd.locate("sglang", "0.5.22"), rd.locate("sglang", "0.5.23"))
    assert doc["flags"]["source"] == "parser dumps"
    assert [f["name"] for f in doc["flags"]["removed"]] == ["--speculative-skip-dp-mlp-sync"]
    removed = {(s["file"], s["message"].split(":")[0]) for s in doc["raises"]["removed"]}
    assert ("srt/arg_groups/speculative_hook.py",
            "Currently DFLASH speculative decoding does not support dp attention on non-NPU devices.") in removed


def test_fetch_downloads_only_a_missing_wheel_and_reports_a_failed_download(tmp_path, monkeypatch):
    import subprocess

    from tools.engine_parsers import dump as dump_tool

    monkeypatch.setenv("GPUSTACK_K3_CACHE", str(tmp_path))
    calls = []

    def fake_run(argv, **kw):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 1, "", "ERROR: No matching distribution found for vllm==9.9.9")

    monkeypatch.setattr(subprocess, "run", fake_run)
    (dump_tool.wheels_dir()).mkdir(parents=True)
    (dump_tool.wheels_dir() / "vllm-1.0-cp38-abi3-manylinux_2_28_x86_64.whl").write_bytes(b"")
    rd.fetch("vllm", "1.0")
    assert calls == []
    with pytest.raises(rd.ReleaseDiffError, match="pip download vllm==9.9.9 failed: .*No matching distribution"):
        rd.fetch("vllm", "9.9.9")
    assert calls[0][-4:] == ["--no-deps", "vllm==9.9.9", "-d", str(dump_tool.wheels_dir())]


def test_a_failed_parser_dump_falls_back_to_the_static_flags_and_says_why(tmp_path, monkeypatch, capsys):
    from tools.engine_parsers import dump as dump_tool

    def boom(engine, version):
        raise dump_tool.DumpError("building the vllm 1.1 parser failed:\nTraceback ...\nAssertionError")

    monkeypatch.setattr(dump_tool, "dump", boom)
    make_tree(tmp_path / "old", OLD)
    make_tree(tmp_path / "new", NEW)
    assert rd.main(["vllm", "1.0", "1.1", "--old-tree", str(tmp_path / "old"), "--new-tree", str(tmp_path / "new"),
                    "--dump-parser", str(tmp_path / "dumps"), "-o", "json"]) == 0
    flags = json.loads(capsys.readouterr().out)["flags"]
    assert flags["source"].startswith("static (no parser dump of vllm 1.0, vllm 1.1)")
    assert flags["dump_failed"] == {"1.0": "AssertionError", "1.1": "AssertionError"}


def test_rules_option_follows_old_citations_and_lists_what_has_no_rule_yet(tmp_path, capsys):
    make_tree(tmp_path / "old", OLD)
    make_tree(tmp_path / "new", NEW)
    rules = tmp_path / "pkg"
    rules.mkdir()
    (rules / "r.py").write_text(
        "# gone: vllm/config/speculative.py:8-9@1.0\n"
        "# kept: speculative.py:11@1.0 (num_speculative_tokens must be positive)\n"
        "# new rule: platforms/interface.py:6@1.1\n"
        "# another release is not read: config/speculative.py:9@1.0.1\n"
        "# a field: config/speculative.py:4@1.0\n")
    assert rd.main(["vllm", "1.0", "1.1", "--old-tree", str(tmp_path / "old"), "--new-tree", str(tmp_path / "new"),
                    "--rules", str(rules), "-o", "json"]) == 0
    r = json.loads(capsys.readouterr().out)["rules"]
    got = {(c["cite"], c["status"], c["new_at"]) for c in r["old_citations"]}
    assert got == {("config/speculative.py:8-9@1.0", "removed", None),
                   ("config/speculative.py:4@1.0", "field removed", None),
                   ("config/speculative.py:11@1.0", "unchanged", "config/speculative.py:10@1.1")}
    assert [c["cited_in"] for c in r["old_citations"] if c["status"] == "removed"] == [["pkg/r.py:1"]]
    assert [x["message"] for x in r["no_rule_yet"]] == [
        "draft_dcp={draft_dcp} must be 1 or {target_dcp}.",
        "draft_lm_head_quantization is not supported for the method {self.method}"]
