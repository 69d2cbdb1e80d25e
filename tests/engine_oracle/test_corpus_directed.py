"""tools/engine_oracle/corpus.py: lines aimed at raise sites (the names and constants of their guarding conditions)
and the exploring mutation over any option of the release's parser (unit tier: synthetic sources and options)."""
from __future__ import annotations

import ast
import random

from tools.engine_oracle import corpus
from tools.engine_oracle.reachability import _enclosing

SRC = '''\
class SpeculativeConfig:
    def __post_init__(self):
        if self.method == "mtp" and self.num_speculative_tokens > 4:
            raise ValueError("too many")
        if not self.enforce_eager:
            pass
        else:
            raise ValueError("eager")
        assert self.draft_tp in (1, 8), "tp"
'''


def _hints(line):
    tree = ast.parse(SRC)
    return corpus._guard_hints(_enclosing(tree, line), line)


def test_guard_hints_take_names_and_constants():
    assert _hints(4) == [("method", "mtp", False), ("num_speculative_tokens", 5, False)]
    # the else branch of `not x`: x is wanted true there
    assert _hints(8) == [("enforce_eager", None, False)]
    # an assert refuses when its test is false
    assert _hints(9) == [("draft_tp", 1, True)]


def test_flag_values_follow_the_option():
    rnd = random.Random(0)
    store_true = {"dest": "enforce_eager", "flags": ["--enforce-eager"], "action": "store_true", "nargs": 0}
    assert corpus._flag_value(store_true, rnd) == ("--enforce-eager", None)
    choice = {"dest": "kv_cache_dtype", "flags": ["--kv-cache-dtype"], "action": "store", "choices": ["auto", "fp8"]}
    assert corpus._flag_value(choice, rnd)[1] in ("auto", "fp8")
    integer = {"dest": "max_num_seqs", "flags": ["--max-num-seqs"], "action": "store", "type": "int"}
    assert corpus._flag_value(integer, rnd)[1] in corpus._INTS


def test_skipped_dests_are_files_hosts_models():
    for dest in ("model", "tokenizer", "download_dir", "port", "ssl_keyfile", "served_model_name", "speculative_draft_model_path"):
        assert corpus._FLAG_SKIP.search(dest), dest
    for dest in ("max_model_len", "tensor_parallel_size", "speculative_config", "enable_expert_parallel"):
        assert not corpus._FLAG_SKIP.search(dest), dest


def test_explore_zero_keeps_the_corpus():
    a = corpus.generate("vllm-0.33.0", 40, 3)
    assert a == corpus.generate("vllm-0.33.0", 40, 3, explore=0.0)
    b = corpus.generate("vllm-0.33.0", 40, 3, explore=1.0)
    assert any(k.startswith("flag:") for line in b for k in line["mutations"])


# ----------------------------------------------------------------------------- tools/engine_oracle/knobs.py, synth.py

KSRC = '''\
class ParallelConfig:
    def __post_init__(self):
        if self.enable_elastic_ep and not self.enable_eplb:
            raise ValueError("eplb")
        if envs.VLLM_USE_V2 and self.speculative_config.method in ("mtp", "eagle"):
            raise ValueError("v2")
        if self.tensor_parallel_size >= 16:
            raise ValueError("tp")
        if getattr(self.hf_config, "num_experts", 0) < 4:
            raise ValueError("experts")
        if self.tp is None:
            raise ValueError("none")


def caller(cfg):
    if cfg.enable_expert_parallel:
        ParallelConfig()
'''


def _knobs(line):
    from tools.engine_oracle import knobs

    tree = ast.parse(KSRC)
    return knobs.path_knobs(_enclosing(tree, line))


def test_knobs_read_chains_constants_and_polarity():
    # a bare truth test wanted true, a `not` wanted false
    assert _knobs(4) == [(("self", "enable_elastic_ep"), [True, 1, "1"], True),
                         (("self", "enable_eplb"), [False, 0, None], False)]
    env, method = _knobs(6)
    assert env == (("envs", "VLLM_USE_V2"), [True, 1, "1"], True)
    assert method == (("self", "speculative_config", "method"), ["mtp", "eagle"], True)
    # >= 16 wanted true: 16 first; getattr(o, "n", d) < 4: 3 first; `is None`: None
    assert _knobs(8)[0][1][0] == 16
    assert _knobs(10) == [(("self", "hf_config", "num_experts"), [3, 4, 5, 0, -1], True)]
    assert _knobs(12) == [(("self", "tp"), [None], True)]


def test_call_knobs_are_the_callers_branches():
    from tools.engine_oracle import knobs

    tree = ast.parse(KSRC)
    assert knobs.call_knobs(tree, "ParallelConfig", _enclosing) == [
        [(("cfg", "enable_expert_parallel"), [True, 1, "1"], True)]]


def test_resolve_maps_chains_to_env_flag_json_and_config_json():
    from tools.engine_oracle.knobs import resolve

    dests = {"tensor_parallel_size", "enable_eplb", "speculative_config"}
    jsons = {"speculative_config": "--speculative-config", "compilation_config": "-cc"}
    assert resolve(("envs", "VLLM_USE_V2"), dests, jsons, None, "vllm") == ("env", "VLLM_USE_V2")
    assert resolve(("self", "parallel_config", "tensor_parallel_size"), dests, jsons, None, "vllm") == \
        ("flag", "tensor_parallel_size")
    assert resolve(("self", "speculative_config", "method"), dests, jsons, None, "vllm") == \
        ("json", ("speculative_config", ("method",)))
    # inside a config class, self.x is a key of that class's JSON option
    assert resolve(("self", "mode"), dests, jsons, "CompilationConfig", "vllm") == \
        ("json", ("compilation_config", ("mode",)))
    assert resolve(("self", "model_config", "hf_config", "num_experts"), dests, jsons, None, "vllm") == \
        ("hf", "num_experts")
    assert resolve(("self", "nothing_known"), dests, jsons, None, "vllm") is None


def _synth(tmp_path):
    from tools.engine_oracle import synth

    sy = synth.Synth.__new__(synth.Synth)
    sy.engine, sy.rnd, sy.variants = "vllm", random.Random(0), tmp_path / "v"
    sy.dests = {"enable_eplb": {"dest": "enable_eplb", "flags": ["--enable-eplb", "--no-enable-eplb"],
                                "negative": ["--no-enable-eplb"], "action": "boolean_optional", "nargs": 0},
                "tensor_parallel_size": {"dest": "tensor_parallel_size", "flags": ["--tensor-parallel-size", "-tp"],
                                         "action": "store", "type": "int"}}
    sy.json_opts = {"speculative_config": {"dest": "speculative_config", "flags": ["--speculative-config"]}}
    from tools.engine_oracle import knobs

    sy.fields = knobs.class_fields([ast.parse(
        "Method = Literal['mtp', 'ngram']\n"
        "class SpeculativeConfig:\n    method: Method | None = None\n    num_speculative_tokens: int = 1\n")])
    sy.aliases_t = knobs.type_aliases([ast.parse("Method = Literal['mtp', 'ngram']\n")])
    sy.seed_json, sy.seed_values = {}, {}
    sy.defaults = {}
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text('{"num_experts": 8, "model_type": "x"}')
    (model / "tokenizer.json").write_text("{}")
    sy.aliases = {"/models/m": str(model)}
    line = {"argv": ["/models/m", "-tp", "8"], "env": {}, "model": None, "model_config": str(model / "config.json"),
            "gpu_type": "b300", "gpus": 8}
    return sy, line


def test_apply_sets_flags_json_env_and_a_config_json_copy(tmp_path):
    import json

    sy, line = _synth(tmp_path)
    got, what = sy.apply(line, (("self", "tensor_parallel_size"), [16], True), 16, None)
    assert got["argv"] == ["/models/m", "--tensor-parallel-size", "16"] and what == "flag:tensor_parallel_size=16"
    got, _ = sy.apply(line, (("self", "enable_eplb"), [False], False), False, None)
    assert got["argv"][-1] == "--no-enable-eplb"
    got, _ = sy.apply(line, (("self", "speculative_config", "method"), ["mtp"], True), "mtp", None)
    assert json.loads(got["argv"][-1]) == {"method": "mtp"}
    # a key of the option's config class only; a value its annotation takes (the alias's Literal values)
    assert sy.apply(line, (("self", "speculative_config", "draft_model_config"), [], True), "__type__", None) is None
    got, _ = sy.apply(line, (("self", "speculative_config", "method"), ["bogus"], True), "bogus", None)
    assert json.loads(got["argv"][-1])["method"] in ("mtp", "ngram", None)
    got, _ = sy.apply(line, (("self", "speculative_config", "num_speculative_tokens"), [], True), "auto", None)
    assert isinstance(json.loads(got["argv"][-1])["num_speculative_tokens"], int)
    got, _ = sy.apply(line, (("envs", "VLLM_X"), ["1"], True), True, None)
    assert got["env"] == {"VLLM_X": "1"}
    # a config.json field: a copy of the model directory, named on the line and handed to the product
    got, what = sy.apply(line, (("hf_config", "num_experts"), [3], True), 3, None)
    assert what == "hf:num_experts=3" and got["argv"][0] != "/models/m"
    assert json.loads((tmp_path / "v" / got["argv"][0].rsplit("/", 1)[1] / "config.json").read_text())[
        "num_experts"] == 3
    assert got["model_config"].startswith(str(tmp_path / "v")) and (tmp_path / "m" / "config.json").read_text() == \
        '{"num_experts": 8, "model_type": "x"}'
    assert sy.apply(line, (("self", "unknown_thing"), [1], True), 1, None) is None


def test_merge_keeps_one_knob_per_chain():
    from tools.engine_oracle.synth import _merge

    assert _merge([(("a",), [1], True), (("a",), [2, 1], True), (("b",), [], False)]) == \
        [(("a",), [1, 2], True), (("b",), [], False)]


def test_apply_keeps_values_the_parser_takes(tmp_path):
    """A constant the condition compares with, but the option's parser refuses (not one of its choices, not of its
    type), would stop the line before any config check: one of the option's own values instead."""
    sy, line = _synth(tmp_path)
    sy.dests["load_format"] = {"dest": "load_format", "flags": ["--load-format"], "action": "store",
                               "choices": ["auto", "pt"]}
    got, _ = sy.apply(line, (("self", "load_format"), ["ipc_cache"], True), "ipc_cache", None)
    assert got["argv"][-2:] in (["--load-format", "auto"], ["--load-format", "pt"])
    got, _ = sy.apply(line, (("self", "tensor_parallel_size"), ["auto"], True), "auto", None)
    assert got["argv"][-1].lstrip("-").isdigit()


def test_avoid_knobs_turn_the_blocking_condition_around():
    from tools.engine_oracle import knobs

    tree = ast.parse(KSRC)
    # the site at line 4 refused a line first: the next candidate wants enable_elastic_ep false or eplb on; one
    # operand of the ``and`` turned is enough, the last (cov6: turning both undid knobs the target wants)
    assert knobs.avoid_knobs(_enclosing(tree, 4)) == [(("self", "enable_eplb"), [True, 1, "1"], True)]
    assert knobs.avoid_knobs(_enclosing(ast.parse(SRC), 9)) == [(("self", "draft_tp"), [1, 8], True)]


def test_a_field_validators_value_is_its_field():
    from tools.engine_oracle import knobs

    src = ('class CompilationConfig:\n    @field_validator("mode", mode="before")\n    @classmethod\n'
           '    def validate_mode_before(cls, value):\n        if value not in (0, 1, 2):\n'
           '            raise ValueError("mode")\n')
    chain = _enclosing(ast.parse(src), 6)
    assert knobs.validator_rename(chain, knobs.path_knobs(chain)) == [(("self", "mode"), ["__none_of__", -1, 99], True)]


def test_field_bounds_keep_values_pydantic_takes():
    from tools.engine_oracle import knobs

    tree = ast.parse("class SpeculativeConfig:\n    num_speculative_tokens: int = Field(default=None, gt=0)\n"
                     "    prompt_lookup_min: int | None = Field(default=None, ge=1, le=8)\n")
    fields, defaults = knobs.class_fields([tree]), knobs.class_defaults([tree])
    b = knobs.field_bounds(defaults, "speculative_config", ("num_speculative_tokens",), fields)
    assert b == {"gt": 0}
    assert knobs.within_bounds([0, 1, 2, -1, 8, None], b) == [1, 2, 8, None]
    b = knobs.field_bounds(defaults, "speculative_config", ("prompt_lookup_min",), fields)
    assert knobs.within_bounds([0, 1, 2, -1, 8, 9], b) == [1, 2, 8]


def test_a_module_constant_collection_gives_the_values():
    from tools.engine_oracle import knobs

    src = ('DEPRECATED = ["gptq_old", "awq_old"]\n\nclass ModelConfig:\n    def check(self):\n'
           '        if self.quantization in DEPRECATED:\n            raise ValueError("deprecated")\n')
    tree = ast.parse(src)
    try:
        knobs.learn_constants([tree])
        assert knobs.path_knobs(_enclosing(tree, 6)) == [(("self", "quantization"), ["gptq_old", "awq_old"], True)]
    finally:
        knobs.CONSTANTS.clear()


def test_targets_skip_reached_sites_and_put_entered_functions_first():
    from types import SimpleNamespace

    from tools.engine_oracle import synth

    sy = synth.Synth.__new__(synth.Synth)
    sy.rnd = random.Random(0)
    sy.index = SimpleNamespace(funcs={})
    sy.sites = [{"file": "f.py", "line": 4, "def_line": 3, "function": "C.check"},
                {"file": "f.py", "line": 6, "def_line": 3, "function": "C.check"},
                {"file": "f.py", "line": 20, "def_line": 19, "function": "other"}]
    # the first line reached site 0 (the classes, computed before that round, still call it reachable)
    sy.records = [{"sites": {0}, "executed": {"f.py": {3, 4}}}]
    classes = [{"class": "reachable"}] * 3
    sy.tried, sy.blockers, sy.root = {}, {}, "."
    assert sy.targets(classes) == [(1, "entered"), (2, "cold")]
    # a site tried before comes after the untried ones of its kind
    sy.sites.append({"file": "f.py", "line": 8, "def_line": 3, "function": "C.check"})
    sy.tried = {1: 1}
    assert sy.targets(classes + [{"class": "reachable"}])[:2] == [(3, "entered"), (1, "entered")]


def test_product_verdicts_restore_config_copies_and_count_runtime_only_apart(tmp_path, monkeypatch):
    from tools.engine_oracle import product, synth

    seen = []

    def check_args(engine, version, line):
        seen.append(line)
        assert line["model_config"] is None or open(line["model_config"]).read().startswith("{")
        return {"accepted-line": {"verdict": "refuse", "rules": ["memory-rule"]},
                "refused-line": {"verdict": "pass", "rules": []},
                "bad-line": {"verdict": "refuse", "rules": ["some-rule"]}}[line["argv"][-1]]

    monkeypatch.setattr(product, "check_args", check_args)
    monkeypatch.setattr(synth, "_runtime_only_rules", lambda: {"memory-rule"})
    gone = "/tmp/oracle-synth-gone/models/abc/config.json"
    judged = [
        {"verdict": "accepted", "argv": ["/tmp/oracle-synth-gone/models/abc", "accepted-line"], "env": {},
         "model_config": gone, "where": None, "message": ""},
        {"verdict": "refused", "argv": ["/m", "refused-line"], "env": {}, "model_config": None,
         "where": "vllm/config/x.py:4", "message": "no", "target": "vllm/config/x.py:4"},
        {"verdict": "accepted", "argv": ["/m", "bad-line"], "env": {}, "model_config": None, "where": None,
         "message": ""},
        {"verdict": "not_decidable", "argv": ["/m", "x"], "env": {}, "model_config": None}]
    doc = synth.product_verdicts("vllm-0.33.0", judged, {gone: {"num_experts": 3}})
    c = doc["counts"]
    assert (c["decidable"], c["miss"], c["false_refusal"], c["runtime_only"], c["model_config_gone"]) == (3, 1, 1, 1, 0)
    # the restored copy is named on the line in place of the gone directory
    assert seen[0]["argv"][0] != "/tmp/oracle-synth-gone/models/abc" and seen[0]["argv"][0].endswith("/abc")
    assert doc["misses_by_engine_site"] == {"vllm/config/x.py:4": 1}
    # without the copies the line is not re-checkable, and says so
    assert synth.product_verdicts("vllm-0.33.0", judged[:1])["counts"]["model_config_gone"] == 1
