"""The coverage-driven corpus's generator, round cov5 (issue 31 item 1), without judging: public model families of
aiconfigurator-core for sites that test the architecture, what earlier reports learnt carried into a continuing run,
JSON options of no config class valued from their schema, and a function every call of which sits under a branch
false on the oracle's platform classed not reachable."""
from __future__ import annotations

import json
from pathlib import Path

from tests.engine_oracle.test_synth_cov import LINE, sy  # noqa: F401  (the made-up release tree's Synth)
from tools.engine_oracle import raise_sites, reachability, synth
from tools.engine_oracle.corpus import return_type, schema_value


def _kimi(tmp_path, sy):  # noqa: F811
    d = tmp_path / "kimi"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["KimiK3ForConditionalGeneration"]}))
    sy.aliases = {"/models/Kimi-K3": str(d)}
    return dict(LINE, model_config=str(d / "config.json"))


def test_a_site_wanting_named_architectures_gets_a_public_model_of_one(sy, tmp_path):  # noqa: F811
    line = _kimi(tmp_path, sy)
    sy.public = {"acme--Qwen3-1B": {"architectures": ["Qwen3ForCausalLM"], "num_attention_heads": 12}}
    sy.public_by_arch = {"Qwen3ForCausalLM": ["acme--Qwen3-1B"]}
    knob = (("hf_config", "architectures"), ["MuseSparkForConditionalGeneration", "Qwen3ForCausalLM"], True)
    got, what = sy.rebase_for_arch(line, [knob], None)
    d = Path(got["model_config"]).parent
    assert json.loads((d / "config.json").read_text()) == sy.public["acme--Qwen3-1B"]
    assert (d / "tokenizer.json").is_file() and d.parent == sy.variants   # kept in the report's model_variants
    # the model token replaced; 12 heads: TP 8 lowered to 4, the largest of 1/2/4/8 dividing them
    assert got["argv"] == [str(d), "--tensor-parallel-size", "4"] and got["model"] is None
    assert what.endswith(":Qwen3ForCausalLM")
    assert sy.rebase_for_arch(got, [knob], None) is None            # already one of them
    none_public = (("hf_config", "architectures"), ["MuseSparkForConditionalGeneration"], True)
    assert sy.rebase_for_arch(line, [none_public], None) is None    # no public config.json of it
    assert sy.rebase_for_arch(line, [(knob[0], knob[1], False)], None) is None   # wanted not to be


def test_round_zero_has_one_line_per_public_family_and_quantization(sy, tmp_path):  # noqa: F811
    line = _kimi(tmp_path, sy)
    sy.public = {"a--Qwen3-8B": {"architectures": ["Qwen3ForCausalLM"], "num_attention_heads": 32},
                 "a--Qwen3-8B-FP8": {"architectures": ["Qwen3ForCausalLM"], "num_attention_heads": 32,
                                     "quantization_config": {"quant_method": "fp8"}},
                 "b--Qwen3-32B": {"architectures": ["Qwen3ForCausalLM"], "num_attention_heads": 64}}
    seeds = [dict(line, seed="shape/mla-moe")]
    got = sy.public_lines(seeds)
    assert [x["mutations"] for x in got] == [["model:a--Qwen3-8B"], ["model:a--Qwen3-8B-FP8"]]
    assert all(x["argv"][1:] == ["-tp", "8"] for x in got)         # 32 heads: TP 8 kept
    assert sy.public_lines([dict(line, seed="preset/x")]) == []   # no shape line to put them on


def test_public_configs_skip_the_quantization_sidecars(tmp_path, monkeypatch):
    pkg = tmp_path / "aiconfigurator_core"
    (pkg / "model_configs").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "model_configs" / "x--M_config.json").write_text(json.dumps({"architectures": ["MForCausalLM"]}))
    (pkg / "model_configs" / "x--M_hf_quant_config.json").write_text(json.dumps({"quantization": {}}))
    (pkg / "model_configs" / "x--N_config.json").write_text(json.dumps({"text_config": {"architectures": ["N"]}}))
    monkeypatch.syspath_prepend(str(tmp_path))
    import sys

    monkeypatch.delitem(sys.modules, "aiconfigurator_core", raising=False)
    got = synth.public_configs()
    assert sorted(got) == ["x--M", "x--N"] and synth.config_arch(got["x--N"]) == "N"


def test_a_continuing_run_starts_from_what_earlier_reports_learnt(sy, tmp_path):  # noqa: F811
    rep = tmp_path / "earlier.json"
    rep.write_text(json.dumps({"release": "vllm-0.33.0", "model_variants": {}, "judged": [
        {"target": "vllm/config/profiler.py:13", "where": "vllm/config/profiler.py:15", "verdict": "refused",
         "message": "guidance refused", "argv": ["/models/Kimi-K3"], "model": "kimi-k3"},
        {"target": "vllm/config/profiler.py:13", "where": None, "verdict": "accepted", "message": "",
         "argv": ["/models/Kimi-K3"], "model": "kimi-k3"},
        {"target": None, "where": "vllm/config/profiler.py:15", "verdict": "refused", "message": "x"}]}))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"release": "vllm-0.34.0", "judged": [{"target": "vllm/config/profiler.py:13"}]}))
    assert sy.learn_history([rep, other]) == 2
    t, b = sy.site_at["vllm/config/profiler.py:13"], sy.site_at["vllm/config/profiler.py:15"]
    assert sy.blockers["vllm/config/profiler.py:13"] == [b]
    assert sy.tried[t] == 2 and sy.blocker_msgs["vllm/config/profiler.py:13"] == ["guidance refused"]
    assert sy.failed_models["vllm/config/profiler.py:13"] == {"kimi-k3"}


def test_json_options_of_no_config_class_take_a_value_of_their_schema(sy):  # noqa: F811
    t = {"fn": "optional_type", "return_type": {"fn": "parse_type", "return_type": "json"}}
    assert return_type(t) == "json" and return_type("int") == "int"
    schema = {"anyOf": [{"type": "object", "additionalProperties": {"type": "array", "items": {"type": "number"}}},
                        {"type": "null"}]}
    assert schema_value(schema) == {"synth": [1.0]}
    assert schema_value({"type": "object", "required": ["k"], "properties": {"k": {"enum": ["a", "b"]}}}) == {"k": "a"}
    o = {"dest": "custom_histogram_buckets", "flags": ["--custom-histogram-buckets"], "action": "store", "type": t,
         "config": {"schema": schema}}
    assert synth._is_json(o)
    sy.json_opts["custom_histogram_buckets"] = sy.dests["custom_histogram_buckets"] = o
    line, what = sy.apply(LINE, (("self", "custom_histogram_buckets"), [True], True), True, None)
    assert what == "flag:custom_histogram_buckets=minimal" and json.loads(line["argv"][-1]) == {"synth": [1.0]}


def test_a_free_option_typed_int_takes_a_number(sy):  # noqa: F811
    sy.dests["swa_prefix_tails"] = {"dest": "swa_prefix_tails", "flags": ["--swa-prefix-tails"], "action": "store",
                                    "type": {"fn": "optional_type", "return_type": "int"}}
    sy.free_dests = {"swa_prefix_tails"}
    line, _ = sy.apply(LINE, (("cfg", "swa_prefix_tails"), [True], True), True, None)
    assert line["argv"][-2:] == ["--swa-prefix-tails", "1"]


HOOKS = '''\
def _check_xpu_dcp(server_args):
    if server_args.page_size != 1:
        raise ValueError("xpu dcp page size")


def _check_mixed(server_args):
    if server_args.x:
        raise ValueError("mixed")


def _check_callback(server_args):
    if server_args.y:
        raise ValueError("callback")


def handle_attention(server_args):
    cfg = server_args
    if cfg.dcp_size > 1 and get_platform().is_xpu:
        _check_xpu_dcp(server_args)
        _check_mixed(server_args)
    if cfg.z:
        _check_mixed(server_args)
    run_post_process_pass(server_args, _check_callback)


def resolve_once(server_args):
    handle_attention(server_args)
'''


def test_a_function_called_only_under_a_false_platform_branch_is_not_reachable(tmp_path):
    g = tmp_path / "sglang" / "srt" / "arg_groups"
    g.mkdir(parents=True)
    (g / "attention_hook.py").write_text(HOOKS)
    sites = raise_sites.raise_sites([g / "attention_hook.py"])
    by = {r["raises"]: r for r in reachability.classify("sglang-0.5.23", sites, {}, tmp_path, {},
                                                       files=[g / "attention_hook.py"])}
    xpu = by["ValueError('xpu dcp page size')"]
    assert xpu["class"] == "not-reachable"
    assert xpu["why"].startswith("platform-branch: every call of `_check_xpu_dcp` "
                                 "(sglang/srt/arg_groups/attention_hook.py:19)")
    assert by["ValueError('mixed')"]["class"] == "reachable"      # also called where the platform does not decide
    assert by["ValueError('callback')"]["class"] == "reachable"   # handed by name
    # entered by the corpus: reachable whatever the call sites say (the executed lines are the judge)
    entered = reachability.classify("sglang-0.5.23", sites, {str(g / "attention_hook.py"): {2}}, tmp_path, {},
                                    files=[g / "attention_hook.py"])
    assert next(r for r in entered if "xpu dcp" in r["raises"])["class"] == "reachable"


ELASTIC = '''\
def handle_elastic_ep(cfg):
    assert cfg.pp_size == 1, "pp"
    if cfg.max_ep_size is not None:
        assert cfg.max_ep_size > 0, "positive"
    if cfg.other:
        raise ValueError("other")
    if cfg.elastic_ep_backend is not None and cfg.max_ep_size is not None:
        assert cfg.device == "cuda", "target"
'''


def test_the_checks_before_a_site_constrain_the_values_of_its_knobs():
    import ast

    from tools.engine_oracle import knobs as K
    from tools.engine_oracle.reachability import _enclosing

    tree = ast.parse(ELASTIC)
    chain = _enclosing(tree, 8)
    pre = K.precondition_knobs(chain)
    assert (("cfg", "pp_size"), [1, 2, 0, -1], True) in pre                    # an assert before it: wanted true
    assert (("cfg", "max_ep_size"), [1, 0, -1], True) in pre            # in the block of an if before it
    assert (("cfg", "other"), [False, 0, None], False) in pre           # an ``if: raise`` before it: wanted false
    assert not any(k[0] == ("cfg", "device") for k in pre)              # the site's own test is not a precondition


def test_a_name_the_path_only_wants_set_takes_a_value_the_checks_before_give(tmp_path, monkeypatch):
    root = tmp_path / "rel"
    (root / "vllm" / "config").mkdir(parents=True)
    (root / "vllm" / "config" / "parallel.py").write_text(ELASTIC)
    files = [root / "vllm" / "config" / "parallel.py"]
    monkeypatch.setattr(synth, "_root", lambda release: root)
    monkeypatch.setattr(synth, "validation_files", lambda release, r=None: files)
    monkeypatch.setattr(synth, "parser_options", lambda release: [])
    s = synth.Synth("vllm-0.33.0", 7, tmp_path / "data")
    i = next(i for i, x in enumerate(s.sites) if "target" in x["raises"])
    own, _ = s.site_knob_sets(i)
    by = {c[-1]: v for c, v, _w in own}
    assert by["max_ep_size"][0] == 1             # not "__set__" (a random value, 0 or -1 refused before the site)
    assert "pp_size" not in by                   # a check on a name the path does not set is left out


def test_config_file_lines_and_their_files_carried_to_a_continuing_run(sy, tmp_path):  # noqa: F811
    sy.all_dests = {"config", "tensor_parallel_size"}
    seeds = [dict(LINE, seed="shape/gqa-dense", argv=["/models/shape-gqa-dense", "--tensor-parallel-size", "8"])]
    got = {x["mutations"][0].split(":", 1)[1]: x["argv"] for x in sy.config_file_lines(seeds)}
    assert Path(got["yaml"][2]).read_text() == "tensor-parallel-size: 8\n"
    assert got["non-yaml"][2].endswith(".json") and got["no-file"][-1] == "--config"
    assert got["twice"].count("--config") == 2 and got["no-model"][0] == "--config"
    assert not Path(got["missing"][2]).exists()
    assert sy.serve_configs[got["yaml"][2]] == "tensor-parallel-size: 8\n"
    # a report holding the yaml line: the next run writes the file again under its own directory
    rep = tmp_path / "r.json"
    rep.write_text(json.dumps({"release": "vllm-0.33.0", "serve_configs": dict(sy.serve_configs), "corpus": [
        {"argv": got["yaml"], "env": {}, "gpu_type": "b300", "gpus": 8, "mutations": ["config-file:yaml"]},
        {"argv": got["missing"], "env": {}, "gpu_type": "b300", "gpus": 8, "mutations": ["config-file:missing"]}]}))
    later, files = tmp_path / "later" / "models", {}
    lines = synth.earlier_corpus([rep], "vllm-0.33.0", later, files)
    assert lines[0]["argv"][2] == str(later.parent / "serve-config" / "serve.yaml")
    assert Path(lines[0]["argv"][2]).read_text() == "tensor-parallel-size: 8\n" and lines[0]["argv"][2] in files
    assert lines[1]["argv"][2] == str(later.parent / "serve-config" / "absent.yaml")
    sy.engine = "sglang"
    assert sy.config_file_lines(seeds) == []


def test_a_value_outside_the_known_ones_on_an_option_the_parser_does_not_restrict(sy):  # noqa: F811
    sy.dests["kv_cache_dtype"] = {"dest": "kv_cache_dtype", "flags": ["--kv-cache-dtype"], "action": "store",
                                  "type": "str", "metavar": ["auto", "fp8"]}
    sy.free_dests = set()
    line, _ = sy.apply(LINE, (("self", "kv_cache_dtype"), ["__other__"], False), "__other__", None)
    assert line["argv"][-2:] == ["--kv-cache-dtype", "synth-other"]
    # parser choices refuse any other word before the check: one of them instead
    sy.dests["kv_cache_dtype"]["choices"] = ["auto", "fp8"]
    line, _ = sy.apply(LINE, (("self", "kv_cache_dtype"), ["__other__"], False), "__other__", None)
    assert line["argv"][-1] in ("auto", "fp8")


def test_cpu_lists_and_model_capabilities(sy):  # noqa: F811
    from tools.engine_oracle import knobs as K

    assert sy.free_value("numa_bind_cpus") == "0-3" and sy.free_value("numa_bind_nodes") == "0"
    assert sy.free_value("grpc_port") == "30011"
    # model_config.supports_replayssm: the model's capability, not an option or a config.json field
    assert K.resolve(("self", "model_config", "supports_replayssm"), set(), {}, None, "vllm") == ("hf", "hf_config")


SPEC = '''\
class SpeculativeConfig:
    @staticmethod
    def _resolve_rates(n, rates, length):
        if rates is not None and len(rates) != n:
            raise ValueError("length")

    def __post_init__(self):
        if self.method == "synthetic":
            self.rates = self._resolve_rates(self.num_speculative_tokens, self.acceptance_rates, None)
'''


def test_a_parameter_is_read_through_the_argument_its_caller_passes():
    import ast

    from tools.engine_oracle import knobs as K
    from tools.engine_oracle.reachability import _enclosing

    tree = ast.parse(SPEC)
    chain = _enclosing(tree, 5)
    knobs = K.path_knobs(chain)
    assert (("rates",), ["__set__"], True) in knobs
    got = K.param_substitute(knobs, chain, [tree])
    assert (("self", "acceptance_rates"), ["__set__"], True) in got
    assert not any(c == ("rates",) for c, _v, _w in got)


ADAPTIVE = '''\
class VllmConfig:
    def _validate_adaptive_verification(self):
        if not self.compilation_config.cudagraph_mode.has_full_cudagraphs():
            raise ValueError("needs full cudagraphs")
        if not self.sizes:
            raise ValueError("after a method of a value")


def create_engine_config(args):
    VllmConfig()._validate_adaptive_verification()
'''


def test_a_method_named_has_x_of_a_value_is_no_package_gate(tmp_path):
    f = tmp_path / "vllm" / "config" / "vllm.py"
    f.parent.mkdir(parents=True)
    f.write_text(ADAPTIVE)
    sites = raise_sites.raise_sites([f])
    by = {r["raises"]: r for r in reachability.classify("vllm-0.34.0", sites, {}, tmp_path, {},
                                                       missing={"full_cudagraphs"})}
    # vllm 0.34.0 config/vllm.py:3299 was classed package-missing ("full_cudagraphs is not installed") until a cov5
    # line reached it
    assert by["ValueError('after a method of a value')"]["class"] == "reachable"


def test_a_public_config_json_is_named_in_a_report_never_copied(tmp_path):
    public = {"a--M": {"architectures": ["MForCausalLM"], "hidden_size": 64, "text_config": {"x": 1, "y": 2}},
              "b--N": {"architectures": ["NForCausalLM"], "hidden_size": 32}}
    copy = {"architectures": ["MForCausalLM"], "hidden_size": 64, "text_config": {"x": 1, "y": 3},
            "quantization_config": {"quant_method": "fp8"}}
    entry = synth.compact_variant(copy, public)
    assert entry == {"__public__": "a--M", "__set__": {"quantization_config": {"quant_method": "fp8"}},
                     "__text_set__": {"y": 3}}
    assert synth.expand_variant(entry, public) == copy and public["a--M"]["text_config"]["y"] == 2
    own = {"architectures": ["Other"], "vocab_size": 5}          # no public file under it: kept as it is
    assert synth.compact_variant(own, public) == own and synth.expand_variant(own, public) == own
    assert synth.expand_variant(entry, {}) is None               # without the package: not restorable
    restored = synth._restore_variants({str(tmp_path / "old" / "abc" / "config.json"): entry}, tmp_path / "new")
    assert restored == {}                                        # the installed package has no a--M
