"""The coverage-driven corpus's generator (tools/engine_oracle/synth.py), without judging: on a made-up release tree
(one config class behind a JSON option, one function registered for a model architecture), the knobs a refusal's
message names, the registry-keyed targets taken first, a plain ``str`` field keeping the condition's constant, no
made-up architecture in a config.json, and round 0 continuing an earlier report's kept lines (issue 31 item 1)."""
from __future__ import annotations

import json

import pytest

from tools.engine_oracle import synth

CONFIG = '''\
from dataclasses import dataclass
from typing import Literal


@dataclass
class ProfilerConfig:
    profiler: Literal["torch", "proton"] | None = None
    proton_profiler_dir: str | None = None
    backend: str | None = None

    def __post_init__(self):
        if self.profiler == "proton" and not self.proton_profiler_dir:
            raise ValueError("proton_profiler_dir must be set when profiler is proton")
        if self.backend == "guidance":
            raise ValueError("guidance refused")
'''
OVERRIDE = '''\
def _register_for(*archs):
    def deco(fn):
        return fn
    return deco


def plain(server_args):
    if server_args.tp_size == 3:
        raise ValueError("tp 3")


@_register_for("MiniMaxM3SparseForCausalLM")
def _m3_overrides(server_args, hf_config):
    if server_args.tp_size > 4:
        raise ValueError("m3 tp")
    if server_args.dp_size > 2:
        raise ValueError("m3 dp")
'''


@pytest.fixture
def sy(tmp_path, monkeypatch):
    root = tmp_path / "rel"
    (root / "vllm" / "config").mkdir(parents=True)
    (root / "vllm" / "config" / "profiler.py").write_text(CONFIG)
    (root / "vllm" / "config" / "overrides.py").write_text(OVERRIDE)
    files = sorted((root / "vllm" / "config").glob("*.py"))
    opts = [{"dest": "tensor_parallel_size", "flags": ["--tensor-parallel-size", "-tp"], "action": "store",
             "type": "int"},
            {"dest": "profiler_config", "flags": ["--profiler-config"], "action": "store",
             "type": {"return_type": "json", "cls": "ProfilerConfig"}}]
    monkeypatch.setattr(synth, "_root", lambda release: root)
    monkeypatch.setattr(synth, "validation_files", lambda release, r=None: files)
    monkeypatch.setattr(synth, "parser_options", lambda release: opts)
    s = synth.Synth("vllm-0.33.0", 7, tmp_path / "data")
    s.json_opts = {o["dest"]: o for o in opts if isinstance(o["type"], dict)}
    s.dests = {o["dest"]: o for o in opts}
    return s


def _site(sy, text):
    return next(i for i, s in enumerate(sy.sites) if text in s["raises"])


LINE = {"argv": ["/models/Kimi-K3", "-tp", "8"], "env": {}, "gpu_type": "b300", "model": "kimi-k3"}


def test_a_refusal_message_names_the_field_to_set(sy):
    where = "vllm/config/profiler.py:13"
    assert sy.message_knobs(where, "ProfilerConfig") == []
    sy.blocker_msgs[where] = ["argument --profiler-config: 1 validation error for ProfilerConfig\n  Value error, "
                              "proton_profiler_dir must be set when profiler is proton"]
    knobs = sy.message_knobs(where, "ProfilerConfig")
    assert [k[0] for k in knobs] == [("self", "profiler_config", "proton_profiler_dir")]
    line, what = sy.apply(LINE, knobs[0], knobs[0][1][0], "ProfilerConfig")
    value = json.loads(line["argv"][line["argv"].index("--profiler-config") + 1])["proton_profiler_dir"]
    assert what.startswith("json:profiler_config.proton_profiler_dir=") and value.endswith("proton_profiler_dir")


def test_a_plain_str_field_keeps_the_conditions_constant(sy):
    line, _ = sy.apply(LINE, (("self", "backend"), ["guidance"], True), "guidance", "ProfilerConfig")
    assert json.loads(line["argv"][-1]) == {"backend": "guidance"}


def test_no_made_up_architecture_or_model_type(sy):
    assert sy.apply(LINE, (("hf_config", "architectures"), ["auto"], True), "auto", None) is None
    assert sy.apply(LINE, (("hf_config", "model_type"), [], True), "__type__", None) is None


def test_registry_keyed_functions_are_targeted_first_once_each(sy):
    classes = [{"class": "reachable"} for _ in sy.sites]
    todo = sy.targets(classes)
    m3 = [i for i, s in enumerate(sy.sites) if s["function"] == "_m3_overrides"]
    assert len(m3) == 2
    first = todo[0][0]
    assert first in m3 and sum(1 for i, _k in todo if i in m3) == 1   # one line enters the function
    assert _site(sy, "tp 3") in [i for i, _k in todo]
    assert (("hf_config", "architectures"), ["MiniMaxM3SparseForCausalLM"], True) in sy.site_knob_sets(first)[0]


def test_round_zero_continues_an_earlier_report(tmp_path):
    old_dir = "/tmp/oracle-synth-old/models/abc123"
    report = {"release": "vllm-0.33.0", "model_variants": {old_dir + "/config.json": {"architectures": ["X"]}},
              "corpus": [{"argv": [old_dir, "-tp", "2"], "env": {}, "model": "kimi-k3",
                          "model_config": old_dir + "/config.json", "gpu_type": "b300", "gpus": 8,
                          "mutations": ["hf:architectures"], "target": "vllm/config/model.py:1"},
                         {"argv": ["/models/Kimi-K3"], "env": {"VLLM_X": "1"}, "model": "kimi-k3",
                          "model_config": None, "gpu_type": "b300", "gpus": 8, "mutations": [], "target": None},
                         {"argv": ["/tmp/gone/x"], "env": {}, "model": "kimi-k3",
                          "model_config": "/tmp/gone/x/config.json", "gpu_type": "b300", "gpus": 8,
                          "mutations": [], "target": None}]}
    rp = tmp_path / "r.json"
    rp.write_text(json.dumps(report))
    lines = synth.earlier_corpus([rp], "vllm-0.33.0", tmp_path / "variants")
    assert len(lines) == 2                       # the line whose config.json copy the report lacks is left out
    new_dir = str(tmp_path / "variants" / "abc123")
    assert lines[0]["argv"] == [new_dir, "-tp", "2"] and lines[0]["model_config"] == new_dir + "/config.json"
    assert json.loads((tmp_path / "variants" / "abc123" / "config.json").read_text()) == {"architectures": ["X"]}
    assert lines[1]["env"] == {"VLLM_X": "1"}
    # another release of the same engine continues from the same kept lines (a newer release's corpus starts an
    # older one's); another engine's report is refused
    again = synth.earlier_corpus([rp], "vllm-0.11.0", tmp_path / "v2")
    assert [x["argv"][1:] for x in again] == [x["argv"][1:] for x in lines] and again[0]["argv"][1:] == ["-tp", "2"]
    with pytest.raises(ValueError, match="not of a sglang release"):
        synth.earlier_corpus([rp], "sglang-0.5.23", tmp_path / "v3")


DOCSTRING = '''\
class C:
    def check(self):
        """A docstring: no statement coverage.py records."""
        if self.x:
            raise ValueError("x set")
'''


def test_a_function_opening_with_a_docstring_counts_as_entered(tmp_path):
    from tools.engine_oracle import raise_sites, reachability

    f = tmp_path / "vllm" / "config" / "c.py"
    f.parent.mkdir(parents=True)
    f.write_text(DOCSTRING)
    sites = raise_sites.raise_sites([f])
    assert sites[0]["def_line"] == 4                     # the first statement, not the docstring's line 3
    cls = reachability.classify("vllm-0.33.0", sites, {str(f): {4}}, tmp_path, {})
    assert cls[0]["class"] == "reachable" and cls[0]["why"] == "entered, raise not taken"


def test_a_line_whose_world_outgrew_its_gpus_gets_them(sy):
    line = dict(LINE, argv=["/models/Kimi-K3", "--tensor-parallel-size", "4"], gpus=2)
    assert sy.fit_gpus(line)["gpus"] == 4
    assert sy.fit_gpus(dict(line, argv=["/models/Kimi-K3", "-tp=16"]))["gpus"] == 2    # more than a node: left
    assert sy.fit_gpus(dict(line, gpus=8))["gpus"] == 8


def test_the_base_line_is_one_of_the_plainest_that_entered(sy):
    s = sy.sites[_site(sy, "tp 3")]
    short = dict(LINE, argv=["/m", "-tp", "1"])
    longs = [dict(LINE, argv=["/m", "-tp", "1"] + ["--x"] * (n + 1)) for n in range(8)]
    sy.records = [{"line": ln, "verdict": "accepted", "executed": {s["file"]: {s["def_line"]}}, "sites": set()}
                  for ln in [short] + longs]
    picked = {len(sy.base_for(_site(sy, "tp 3"), "entered", [LINE])["argv"]) for _ in range(20)}
    assert picked <= {3, 4, 5} and 3 in picked


def test_constants_of_the_modules_the_validation_files_import(tmp_path):
    import ast

    from tools.engine_oracle import knobs as K

    (tmp_path / "vllm" / "layers").mkdir(parents=True)
    (tmp_path / "vllm" / "layers" / "quant.py").write_text('DEPRECATED = ["fbgemm_fp8", "fp_quant"]\n')
    src = ("from vllm.layers import quant as me_quant\n\n"
           "def check(self):\n    if self.quantization in me_quant.DEPRECATED:\n        raise ValueError('dep')\n")
    tree = ast.parse(src)
    K.learn_constants(K.imported_trees([tree], tmp_path) + [tree])
    test = tree.body[1].body[0].test
    assert K.test_knobs(test, True) == [(("self", "quantization"), ["fbgemm_fp8", "fp_quant"], True)]


def test_misses_refused_while_parsing_are_grouped_by_option_and_sentence():
    from tools.engine_oracle import table

    msg = ("argument --profiler-config: 1 validation error for ProfilerConfig\n  Value error, proton_profiler_dir "
           "must be set when profiler is 'proton' [type=value_error, input_value={}, input_type=dict]")
    miss = {"where": None, "message": msg, "argv": ["/m"], "env": {}, "mutations": [], "model_config": None}
    other = dict(miss, message=msg.replace("proton_profiler_dir", "torch_profiler_dir"))
    fr = {"argv": ["/m", "-tp", "16"], "env": {}, "product_rules": ["parallel-fits-node"], "product_message": "16 ranks"}
    doc = {"release": "vllm-0.33.0", "seed": 1, "code_commit": "abc",
           "product": {"misses": [miss, miss, other], "false_refusals": [fr]}}
    md = table.misses_markdown([doc])
    assert "# False refusals (the engine accepted, the product refused): 1" in md
    assert "## vllm-0.33.0: parallel-fits-node" in md
    assert "## ? (--profiler-config: proton_profiler_dir must be set when profiler is 'proton')  (2 lines" in md
    assert "## ? (--profiler-config: torch_profiler_dir must be set" in md


def test_list_fields_take_a_list():
    import ast

    from tools.engine_oracle import knobs as K

    assert K.is_list_annotation(ast.parse("list[int] | None", mode="eval").body)
    assert K.is_list_annotation(ast.parse("Optional[List[str]]", mode="eval").body)
    assert not K.is_list_annotation(ast.parse("int | None", mode="eval").body)


def test_one_value_per_place_and_another_model_after_a_refusal(sy):
    i = _site(sy, "guidance refused")
    s = sy.sites[i]
    where = sy._where(i)
    # two knobs on the same JSON key: the first (the site's own) stays
    sy.blocker_msgs[where] = []
    a = dict(LINE, argv=["/models/A"], model="a")
    b = dict(LINE, argv=["/models/B"], model="b")
    sy.records = [{"line": x, "verdict": "accepted", "executed": {s["file"]: {s["def_line"]}}, "sites": set()}
                  for x in (a, b)]
    sy.blockers[where] = []
    cands = sy.candidates(i, "entered", [LINE], 1)
    backend = [m for m in cands[0]["mutations"] if "backend" in m]
    assert backend == ['json:profiler_config.backend="guidance"']
    sy.failed_models[where] = {"a"}
    assert all(sy.base_for(i, "entered", [LINE])["model"] == "b" for _ in range(10))


def test_a_falsy_test_of_a_valued_option_leaves_it_out(sy):
    line, what = sy.apply(LINE, (("self", "tensor_parallel_size"), [False, 0, None], False), False, None)
    assert line["argv"] == ["/models/Kimi-K3"] and what == "flag:tensor_parallel_size=unset"


LOCAL_PLATFORM = '''\
def check(self):
    uses_rocm_dbo = (
        current_platform.is_rocm()
        and self.enable_dbo
    )
    if self.async_scheduling:
        if uses_rocm_dbo:
            raise ValueError("rocm only")
        if self.x:
            raise ValueError("any platform")
'''


def test_a_branch_on_a_local_bound_to_a_platform_test(tmp_path):
    from tools.engine_oracle import raise_sites, reachability

    f = tmp_path / "vllm" / "config" / "v.py"
    f.parent.mkdir(parents=True)
    f.write_text(LOCAL_PLATFORM)
    cls = {c["raises"]: c for c in reachability.classify("vllm-0.33.0", raise_sites.raise_sites([f]), {str(f): {2}},
                                                         tmp_path, {})}
    rocm = next(c for r, c in cls.items() if "rocm only" in r)
    assert rocm["class"] == "not-reachable" and rocm["why"].startswith("platform-branch: `uses_rocm_dbo`")
    assert next(c for r, c in cls.items() if "any platform" in r)["class"] == "reachable"


def test_a_free_string_option_takes_a_value_the_conditions_compare_it_with(sy):
    sy.dests["backend"] = {"dest": "backend", "flags": ["--backend"], "action": "store", "type": "str"}
    assert sy.compared["backend"] == ["guidance"]
    line, what = sy.apply(LINE, (("self", "backend"), ["__other__"], False), "__other__", None)
    assert line["argv"][-2:] == ["--backend", "guidance"] and what == "flag:backend=guidance"


EARLY = '''\
def check(cfg):
    if not cfg.enable_watermark:
        return
    if cfg.device != "cuda":
        raise ValueError("device")
    if cfg.disaggregation_mode != "null":
        raise ValueError("pd")
'''


def test_an_early_return_before_the_raise_is_a_knob():
    import ast

    from tools.engine_oracle import knobs as K
    from tools.engine_oracle.reachability import _enclosing

    tree = ast.parse(EARLY)
    chain = _enclosing(tree, 7)
    got = K.path_knobs(chain) + K.early_exit_knobs(chain)
    assert (("cfg", "enable_watermark"), [True, 1, "1"], True) in got
    assert got[0][0] == ("cfg", "disaggregation_mode")
    assert not any(k[0] == ("cfg", "device") for k in got)     # a preceding raise is not an exit to avoid


PLATFORM_PROPERTY = '''\
def check(cfg):
    platform = get_platform()
    if cfg.enable_prefill_cp and get_platform().is_hip:
        raise ValueError("hip only")
    if platform.is_npu and cfg.x:
        raise ValueError("npu only")
    if cfg.y and get_platform().is_sm100:
        raise ValueError("per gpu")
'''


def test_platform_properties_of_get_platform_are_platform_branches(tmp_path):
    from tools.engine_oracle import raise_sites, reachability

    f = tmp_path / "sglang" / "srt" / "arg_groups" / "h.py"
    f.parent.mkdir(parents=True)
    f.write_text(PLATFORM_PROPERTY)
    cls = {c["raises"]: c for c in reachability.classify("sglang-0.5.23", raise_sites.raise_sites([f]),
                                                          {str(f): {2}}, tmp_path, {})}
    by = {k.split("(")[-1].strip("')\""): v for k, v in cls.items()}
    assert by["hip only"]["why"].startswith("platform-branch") and by["npu only"]["why"].startswith("platform-branch")
    assert by["per gpu"]["class"] == "reachable"      # the SM varies with the line's GPU type


def test_each_model_that_entered_is_as_likely_a_base(sy):
    i = _site(sy, "tp 3")
    s = sy.sites[i]
    kimi = [dict(LINE, argv=["/m", "-tp", str(n)]) for n in range(20)]
    other = dict(LINE, argv=["/o"], model="other")
    sy.records = [{"line": x, "verdict": "accepted", "executed": {s["file"]: {s["def_line"]}}, "sites": set()}
                  for x in kimi + [other]]
    picked = [sy.base_for(i, "entered", [LINE])["model"] for _ in range(40)]
    assert 10 < picked.count("other") < 30
    assert sy.apply(LINE, (("hf_config",), [], True), "__type__", None) is None


LOCALS = '''\
def check(cfg, hf_config):
    prefill_backend = cfg.prefill_attention_backend or cfg.attention_backend
    model_arch = hf_config.architectures[0]
    scaling_active = cfg.elastic_ep_backend is not None and cfg.max_ep_size > 1
    if prefill_backend == "trtllm_mha" and model_arch == "GptOssForCausalLM":
        raise ValueError("trtllm")
    if scaling_active:
        raise ValueError("scaling")
'''


def test_knobs_read_through_the_functions_locals():
    import ast

    from tools.engine_oracle import knobs as K
    from tools.engine_oracle.reachability import _enclosing

    tree = ast.parse(LOCALS)
    chain = _enclosing(tree, 6)
    got = K.substitute_locals(K.path_knobs(chain), chain)
    assert (("cfg", "prefill_attention_backend"), ["trtllm_mha"], True) in got
    assert (("hf_config", "architectures"), ["GptOssForCausalLM"], True) in got
    chain = _enclosing(tree, 8)
    got = K.substitute_locals(K.path_knobs(chain), chain)
    assert [k[0] for k in got] == [("cfg", "elastic_ep_backend"), ("cfg", "max_ep_size")]


def test_options_the_random_corpus_skips_take_values_of_their_kind(sy):
    sy.dests["grpc_port"] = {"dest": "grpc_port", "flags": ["--grpc-port"], "action": "store", "type": "int"}
    sy.dests["ssl_keyfile"] = {"dest": "ssl_keyfile", "flags": ["--ssl-keyfile"], "action": "store", "type": "str"}
    sy.free_dests = {"grpc_port", "ssl_keyfile"}
    line, _ = sy.apply(LINE, (("cfg", "grpc_port"), [True, 1, "1"], True), True, None)
    assert line["argv"][-2:] == ["--grpc-port", "30011"]
    line, _ = sy.apply(LINE, (("cfg", "ssl_keyfile"), ["__set__"], True), "__set__", None)
    from pathlib import Path

    assert line["argv"][-2] == "--ssl-keyfile" and Path(line["argv"][-1]).is_file()
    line, what = sy.apply(dict(LINE, argv=LINE["argv"] + ["--grpc-port", "1"]),
                          (("cfg", "grpc_port"), [None], False), None, None)
    assert "--grpc-port" not in line["argv"] and what == "flag:grpc_port=unset"


def test_a_local_named_after_an_option_lands_on_it():
    from tools.engine_oracle import knobs as K

    dests = {"prefill_attention_backend", "moe_a2a_backend", "speculative_moe_a2a_backend", "tp_size"}
    assert K.resolve(("prefill_backend",), dests, {}, None, "sglang") == ("flag", "prefill_attention_backend")
    assert K.resolve(("a2a_backend",), dests, {}, None, "sglang") == ("flag", "moe_a2a_backend")
    assert K.resolve(("quant_resolved",), dests, {}, None, "sglang") is None


WATERMARK = '''\
from pydantic import Field


class WatermarkConfig:
    key: int = Field(ge=0, repr=False)
    mixing: float = Field(default=0.5, gt=0)
    algorithm: str = "kgw"
'''


def test_a_json_option_no_preset_sets_gets_its_required_fields(sy, tmp_path):
    import ast

    from tools.engine_oracle import knobs as K

    tree = ast.parse(WATERMARK)
    sy.fields.update(K.class_fields([tree]))
    sy.defaults.update(K.class_defaults([tree]))
    sy.json_opts["watermark_config"] = {"dest": "watermark_config", "flags": ["--watermark-config"],
                                        "action": "store", "type": {"return_type": "json"}}
    sy.dests["watermark_config"] = sy.json_opts["watermark_config"]
    assert sy.minimal_json("watermark_config") == {"key": 0}
    line, what = sy.apply(LINE, (("self", "watermark_config"), [True], True), True, None)
    assert what == "flag:watermark_config=minimal" and json.loads(line["argv"][-1]) == {"key": 0}
    line, _ = sy.apply(LINE, (("self", "watermark_config", "algorithm"), ["x"], True), "x", None)
    assert json.loads(line["argv"][-1]) == {"key": 0, "algorithm": "x"}


def test_a_predicate_of_the_model_is_no_config_json_field():
    from tools.engine_oracle import knobs as K

    assert K.resolve(("self", "model_config", "is_hybrid"), set(), {}, None, "vllm") == ("hf", "hf_config")
    assert K.resolve(("self", "model_config", "hf_config", "architectures"), set(), {}, None, "vllm") == \
        ("hf", "architectures")
    assert K.resolve(("hf_config", "num_experts"), set(), {}, None, "vllm") == ("hf", "num_experts")


NESTED = '''\
class HiSparseConfig:
    top_k: int = 8


class AttentionConfig:
    hisparse_config: HiSparseConfig | None = None
    label: str | None = None
'''


def test_a_field_tested_for_being_set_gets_a_value_not_null(sy):
    import ast

    from tools.engine_oracle import knobs as K

    tree = ast.parse(NESTED)
    sy.fields.update(K.class_fields([tree]))
    sy.defaults.update(K.class_defaults([tree]))
    sy.json_opts["attention_config"] = {"dest": "attention_config", "flags": ["--attention-config"],
                                        "action": "store", "type": {"return_type": "json"}}
    line, what = sy.apply(LINE, (("self", "attention_config", "hisparse_config"), ["__set__"], True), "__set__", None)
    assert json.loads(line["argv"][-1]) == {"hisparse_config": {}}
    line, _ = sy.apply(LINE, (("self", "attention_config", "label"), ["__set__"], True), "__set__", None)
    assert json.loads(line["argv"][-1]) == {"label": "synth"}
