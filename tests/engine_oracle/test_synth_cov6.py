"""The coverage-driven corpus's generator, round cov6 (issue 31 item 1), without judging: where a config object's
field lands (the flag named after both, the JSON option of the one class holding the field, a JSON option whose
config class sits under ``optional_type``, a key of the inline JSON a string option holds), attributes and chained
comparisons read through to the names a line sets, and the values of two names compared with each other."""
from __future__ import annotations

import ast
import json

from tests.engine_oracle.test_synth_cov import LINE, sy  # noqa: F401  (the made-up release tree's Synth)
from tools.engine_oracle import knobs as K
from tools.engine_oracle.reachability import _enclosing
from tools.engine_oracle.synth import _is_json


def test_a_config_objects_field_lands_on_the_flag_named_after_both():
    dests = {"mamba_backend", "enable_mamba_cache_stochastic_rounding", "model_loader_extra_config"}
    # a field name one JSON option's class holds (a Synth of another test learnt it) is not read through a named
    # owner object: ``mamba_config.backend`` is MambaConfig's
    K.FIELD_OWNERS["backend"] = "profiler_config"
    assert K.resolve(("self", "mamba_config", "backend"), dests, {}, "VllmConfig", "vllm") == ("flag", "mamba_backend")
    assert K.resolve(("self", "mamba_config", "enable_stochastic_rounding"), dests, {}, None, "vllm") == \
        ("flag", "enable_mamba_cache_stochastic_rounding")
    # ``self.model_config is not None``: the object, not --model-loader-extra-config (which holds both words)
    assert K.resolve(("self", "model_config"), dests, {}, "VllmConfig", "vllm") is None
    K.FIELD_OWNERS.clear()


def test_a_field_of_one_json_options_class_lands_on_its_key():
    fields = {"SpeculativeConfig": {"num_speculative_tokens": None, "method": None},
              "CompilationConfig": {"mode": None}, "WatermarkConfig": {"mode": None}}
    jsons = {"speculative_config": {}, "compilation_config": {}, "watermark_config": {}}
    try:
        assert K.learn_field_owners(fields, jsons) == {"num_speculative_tokens": "speculative_config",
                                                       "method": "speculative_config"}
        assert K.resolve(("self", "num_speculative_tokens"), set(), jsons, "VllmConfig", "vllm") == \
            ("json", ("speculative_config", ("num_speculative_tokens",)))
        assert K.resolve(("self", "mode"), set(), jsons, "VllmConfig", "vllm") is None   # two classes hold it
    finally:
        K.FIELD_OWNERS.clear()


def test_an_optional_config_class_is_a_json_option_named_after_its_class():
    o = {"dest": "quantization_config", "flags": ["--quantization-config"],
         "type": {"fn": "optional_type", "return_type": {"fn": "_compute_kwargs", "cls": {
             "dataclass": "vllm.config.quantization.QuantizationConfigArgs", "fields": ["targets"]}}}}
    assert _is_json(o)
    assert not _is_json({"dest": "x", "flags": ["--x"], "type": {"fn": "optional_type", "return_type": "int"}})
    try:
        assert K.learn_option_classes({"quantization_config": o}) == {"quantization_config": "QuantizationConfigArgs"}
        assert K.class_dest("QuantizationConfigArgs") == "quantization_config"
        fields = {"QuantizationConfigArgs": {"targets": ast.parse("dict[str, str]", mode="eval").body}}
        assert K.dest_class(fields, "quantization_config") == "QuantizationConfigArgs"
        assert K.field_annotation(fields, "quantization_config", ("targets",)) is not None
        # a validator of the class: its field is the option's key
        assert K.resolve(("self", "targets"), set(), {"quantization_config": o}, "QuantizationConfigArgs",
                         "vllm") == ("json", ("quantization_config", ("targets",)))
    finally:
        K.OPTION_CLASSES.clear()


ATTR = """\
class C:
    def check(self):
        if not self.cache_config.use_replayssm:
            self.cache_config.use_kda = False
            return
        self.cache_config.use_kda = self.num_speculative_tokens > 0 and self.model_config.is_kda
        if self.cache_config.use_kda:
            raise ValueError("kda")
"""


def test_an_attribute_assigned_before_the_site_is_read_through_its_last_expression():
    chain = _enclosing(ast.parse(ATTR), 8)
    knobs = K.substitute_locals(K.path_knobs(chain), chain)
    # the assignment at line 6 (not the early ``= False`` of line 4): its conjunction's names, wanted true
    assert [k[0] for k in knobs] == [("self", "num_speculative_tokens"), ("self", "model_config", "is_kda")]
    assert knobs[0][1][0] == 1 and knobs[0][2] is True


def test_a_conjunction_wanted_false_turns_its_last_operand_only():
    test = ast.parse("self.a is not None and self.a > 4", mode="eval").body
    assert K.test_knobs(test, False) == [(("self", "a"), [4, 5, 3, 0, -1], False)]
    assert [k[0] for k in K.test_knobs(test, True)] == [("self", "a"), ("self", "a")]


def test_a_chained_comparison_with_a_module_bound():
    try:
        K.learn_constants([ast.parse("MAX_WINDOW = 64\nNAMES = ('a', 'b')\n")])
        assert K.CONSTANTS["MAX_WINDOW"] == [64]
        test = ast.parse("not 1 <= cfg.window <= MAX_WINDOW", mode="eval").body
        # wanted (the raise's test true): the range broken at its last link, above the bound
        assert K.test_knobs(test, True) == [(("cfg", "window"), [65, 64, 63, 0, -1], False)]
        # within the range: both links met
        assert [k[1][0] for k in K.test_knobs(test, False)] == [1, 64]
    finally:
        K.CONSTANTS.clear()


def test_two_names_compared_take_a_large_and_a_small_value():
    gt = ast.parse("cfg.max_ep_size > cfg.tp_size", mode="eval").body
    assert K.test_knobs(gt, True) == [(("cfg", "max_ep_size"), [16, 8], True), (("cfg", "tp_size"), [1, 2], True)]
    assert K.test_knobs(gt, False) == [(("cfg", "max_ep_size"), [1, 2], False), (("cfg", "tp_size"), [16, 8], False)]
    ne = ast.parse("cfg.a != cfg.b", mode="eval").body
    assert [k[1] for k in K.test_knobs(ne, True)] == [[2], [1]]


def test_an_accessors_object_and_a_torch_dtype():
    assert K.chain_of(ast.parse("model_config_of(server_args).dtype", mode="eval").body) == ("model_config", "dtype")
    assert K.chain_of(ast.parse("get_model_config(x).dtype", mode="eval").body) == ("model_config", "dtype")
    assert K.chain_of(ast.parse("compute(x).dtype", mode="eval").body) is None
    test = ast.parse("model_config_of(cfg).dtype != torch.bfloat16", mode="eval").body
    assert K.test_knobs(test, True) == [(("model_config", "dtype"), ["__other__"], True)]


def test_an_int_fits_a_float_field():
    assert K.fits_values(0, [0.0, 0.5, 1.0, -1.0, None])
    assert not K.fits_values(True, [0.0, 0.5])
    assert not K.fits_values("x", [0.0])


def test_enum_members_are_compared_constants_of_the_field():
    tree = ast.parse("if self.mamba_config.backend == MambaBackendEnum.FLASHINFER:\n    pass\n")
    got = K.compared_constants([tree])
    assert got["backend"] == ["flashinfer"] and got["mamba_config.backend"] == ["flashinfer"]


FIELDS = '''\
class ExecArgs:
    watermark_config: A[Optional[str], Arg(help="JSON.")] = None
    watermark_context_window: A[int, Arg(help="Resolved from --watermark-config.", no_cli=True)] = 4
    other_window: A[int, Arg(help="Resolved from --watermark-config.", no_cli=True)] = 4
'''


def test_a_field_resolved_from_a_string_option_is_a_key_of_its_inline_json(sy):  # noqa: F811
    sy.trees = {"fields.py": ast.parse(FIELDS)}
    sy.dests["watermark_config"] = {"dest": "watermark_config", "flags": ["--watermark-config"], "action": "store",
                                    "type": "str"}
    # the field named after the option's stem only
    assert sy.learn_resolved_from() == {"watermark_context_window": ("watermark_config", "context_window")}
    knob = (("cfg", "watermark_context_window"), [65], True)
    assert sy.resolve(knob[0], None) == ("strjson", ("watermark_config", "context_window"))
    line, what = sy.apply(LINE, knob, 65, None)
    assert json.loads(line["argv"][line["argv"].index("--watermark-config") + 1]) == {"context_window": 65}
    assert what == "strjson:watermark_config.context_window=65"
    line, _ = sy.apply(line, (("cfg", "watermark_context_window"), [None], False), None, None)
    assert json.loads(line["argv"][line["argv"].index("--watermark-config") + 1]) == {}


def test_a_list_option_takes_more_elements_sometimes(sy):  # noqa: F811
    o = {"dest": "buckets", "flags": ["--buckets"], "nargs": "+", "type": "str"}
    tails = [sy._list_tail(o, "tse") for _ in range(40)]
    assert [] in tails and any(1 <= len(t) <= 3 for t in tails)
    assert all(set(t) <= {"0", "1", "2", "x"} for t in tails)
    assert sy._list_tail({"dest": "b", "flags": ["--b"]}, "tse") == []


LOOP = """\
def _validate_cpus(cls, value):
    if not value:
        raise ValueError("empty")
    for cpuset in value:
        if not cpuset:
            raise ValueError("entry")
    if any(node < 0 for node in value):
        raise ValueError("negative")
"""


def test_a_loops_element_test_is_a_one_element_list_of_what_it_iterates():
    tree = ast.parse(LOOP)
    assert K.path_knobs(_enclosing(tree, 6)) == [(("value",), [[False], [0], [None]], False)]
    got = K.path_knobs(_enclosing(tree, 8))
    assert got[0][0] == ("value",) and got[0][1][0] == [-1] and got[0][2] is True


def test_a_list_value_of_a_list_option_is_one_token_per_element(sy):  # noqa: F811
    sy.dests["numa_bind_nodes"] = {"dest": "numa_bind_nodes", "flags": ["--numa-bind-nodes"], "action": "store",
                                   "nargs": "+", "type": "int"}
    line, what = sy.apply(LINE, (("self", "numa_bind_nodes"), [[-1]], True), [-1], None)
    assert line["argv"][-2:] == ["--numa-bind-nodes", "-1"] and what == "flag:numa_bind_nodes=-1"
    line, _ = sy.apply(LINE, (("self", "numa_bind_nodes"), [[False]], True), [False], None)
    assert line["argv"][-2:] == ["--numa-bind-nodes", ""]


def test_a_free_option_with_choices_takes_one_and_a_draft_path_is_a_model(sy, tmp_path):  # noqa: F811
    o = {"dest": "hicache_host_memory_mode", "flags": ["--hicache-host-memory-mode"], "action": "store",
         "choices": ["cache", "buffer_only"]}
    assert sy.free_value("hicache_host_memory_mode", o) in ("cache", "buffer_only")   # not 127.0.0.1
    d = tmp_path / "kimi"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["KimiK3ForConditionalGeneration"]}))
    sy.aliases = {"/models/Kimi-K3": str(d)}
    sy.dests["speculative_draft_model_path"] = {"dest": "speculative_draft_model_path", "action": "store",
                                                "flags": ["--speculative-draft-model-path"], "type": "str"}
    sy.free_dests.add("speculative_draft_model_path")
    line, _ = sy.apply(dict(LINE, model_config=str(d / "config.json")),
                       (("cfg", "speculative_draft_model_path"), ["__set__"], True), "__set__", None)
    assert line["argv"][-2:] == ["--speculative-draft-model-path", "/models/Kimi-K3"]


GUARD = """\
def handle(cfg):
    if not cfg.enable_sharding:
        return
    if cfg.disaggregation_mode != "prefill":
        raise ValueError("prefill only")
    if cfg.tp_size > 4:
        raise ValueError("tp")
    if cfg.enable_sharding and cfg.page_size == 1:
        raise ValueError("page")
    if cfg.enable_lmcache:
        raise ValueError("site")
"""


def test_the_mode_checks_before_a_site_and_the_other_operand_of_a_guard_on_its_names():
    chain = _enclosing(ast.parse(GUARD), 11)
    got = K.guard_knobs(chain, {"enable_sharding", "enable_lmcache"})
    # the mode the earlier check wants; the guard's operand on no name of the site wanted false; no number made up
    # for ``tp_size > 4`` (a check on none of the site's names)
    assert got == [(("cfg", "disaggregation_mode"), ["prefill"], False),
                   (("cfg", "page_size"), [2, 1, 0, -1], False)]


def test_an_enum_annotated_field_takes_its_member_names():
    try:
        K.learn_constants([ast.parse("class AttentionBackendEnum(enum.Enum):\n    FLASH_ATTN = 1\n    TRITON = 2\n")])
        ann = ast.parse("AttentionBackendEnum | None", mode="eval").body
        assert K.annotation_values(ann) == ["FLASH_ATTN", "TRITON", None]
    finally:
        K.ENUMS.clear()
        K.CONSTANTS.clear()


def test_a_list_options_tail_stays_within_its_choices(sy):  # noqa: F811
    o = {"dest": "lora_target_modules", "flags": ["--lora-target-modules"], "nargs": "*", "choices": ["q_proj", "k_proj"]}
    assert all(set(sy._list_tail(o, "q_proj")) <= {"q_proj", "k_proj"} for _ in range(30))


def test_a_required_option_before_a_site_is_turned_on_and_a_prefix_takes_a_choice(sy):  # noqa: F811
    src = "def f(cfg):\n    if not cfg.enable_lora:\n        raise ValueError('x')\n    if cfg.lora_backend != 'v2':\n" \
          "        raise ValueError('site')\n"
    assert K.guard_knobs(_enclosing(ast.parse(src), 5), {"lora_backend"}) == \
        [(("cfg", "enable_lora"), [True, 1, "1"], True)]
    sy.dests["moe_runner_backend"] = {"dest": "moe_runner_backend", "flags": ["--moe-runner-backend"],
                                      "action": "store", "choices": ["auto", "lora_triton", "lora_marlin"]}
    line, what = sy.apply(LINE, (("cfg", "moe_runner_backend"), ["lora"], True), "lora", None)
    assert line["argv"][-2] == "--moe-runner-backend" and line["argv"][-1].startswith("lora_")


PROPS = """\
class AuxOutputConfig:
    @property
    def enabled(self) -> bool:
        return self.enable_return_routed_experts


class KVEventsConfig:
    @property
    def enabled(self) -> bool:
        return self.publisher != "null"


class ParallelConfig:
    @property
    def use_ubatching(self) -> bool:
        return self.enable_dbo or self.ubatch_size > 1
"""


def test_a_property_is_read_through_its_classs_return_expression():
    props = K.learn_properties([ast.parse(PROPS)])
    assert "enabled" not in props and ("AuxOutputConfig", "enabled") in props   # two classes: by class only
    got = K.substitute_property((("self", "aux_output_config", "enabled"), [True, 1, "1"], True), props)
    assert got == [(("self", "aux_output_config", "enable_return_routed_experts"), [True, 1, "1"], True)]
    got = K.substitute_property((("self", "parallel_config", "use_ubatching"), [True, 1, "1"], True), props)
    assert [k[0] for k in got] == [("self", "parallel_config", "enable_dbo"), ("self", "parallel_config", "ubatch_size")]
    assert K.substitute_property((("self", "parallel_config", "use_ubatching"), [2], True), props) is None


def test_an_isinstance_test_takes_a_value_of_the_type_or_of_another():
    t = ast.parse("isinstance(v, dict)", mode="eval").body
    assert K.test_knobs(t, True) == [(("v",), [{}], True)]
    assert K.test_knobs(t, False) == [(("v",), ["synth", 1], False)]
    t = ast.parse("isinstance(x, (int, float))", mode="eval").body
    assert K.test_knobs(t, False)[0][1] == [{}, "synth"]


def test_a_draft_model_path_never_takes_a_number(sy, tmp_path):  # noqa: F811
    d = tmp_path / "kimi"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["KimiK3ForConditionalGeneration"]}))
    sy.aliases = {"/models/Kimi-K3": str(d)}
    sy.dests["speculative_draft_model_path"] = {"dest": "speculative_draft_model_path", "action": "store",
                                                "flags": ["--speculative-draft-model-path"], "type": "str"}
    sy.free_dests.add("speculative_draft_model_path")
    line, _ = sy.apply(dict(LINE, model_config=str(d / "config.json")),
                       (("cfg", "speculative_draft_model_path"), [99], True), 99, None)
    assert line["argv"][-1] == "/models/Kimi-K3"


def test_a_site_wanting_an_architecture_takes_an_accepted_line_on_a_model_of_it_first(sy, tmp_path):  # noqa: F811
    d = tmp_path / "kimi"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["KimiK3ForConditionalGeneration"]}))
    e = tmp_path / "dense"
    e.mkdir()
    (e / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    kimi = dict(LINE, model_config=str(d / "config.json"))
    dense = dict(LINE, argv=["/models/dense", "-tp", "8"], model_config=str(e / "config.json"))
    sy.records = [{"line": kimi, "verdict": "accepted"}, {"line": dense, "verdict": "accepted"}]
    sy.public = {"p--Kimi": {"architectures": ["KimiK3ForConditionalGeneration"], "num_attention_heads": 64}}
    sy.public_by_arch = {"KimiK3ForConditionalGeneration": ["p--Kimi"]}
    knob = (("hf_config", "architectures"), ["KimiK3ForConditionalGeneration"], True)
    got, what = sy.rebase_for_arch(dense, [knob], None)
    assert got["argv"] == kimi["argv"] and got["model_config"] == kimi["model_config"]   # not the public copy
    assert what.endswith(":KimiK3ForConditionalGeneration")
