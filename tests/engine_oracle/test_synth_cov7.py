"""The coverage-driven corpus's generator, round cov7 (issue 31 item 1), without judging: a dispatch on an enum's
predicates (SGLang 0.5.23 ``SpeculativeAlgorithm.handle_server_args``: ``elif self.is_uno(): _handle_uno(...)``,
spec_info.py:235-262@0.5.23) read as the option named after the enum set to a member the predicate tests; the one
walk of the statements before a site shared by the knobs and the reachability."""
from __future__ import annotations

import ast
import textwrap

from tools.engine_oracle import knobs as K
from tools.engine_oracle.reachability import _enclosing, _skipped

SPEC_INFO = textwrap.dedent('''
    from enum import IntEnum, auto

    class SpeculativeAlgorithm(IntEnum):
        DFLASH = auto()
        UNO = auto()
        EAGLE = auto()
        EAGLE3 = auto()
        FROZEN_KV_MTP = auto()
        STANDALONE = auto()
        NONE = auto()

        def is_eagle(self) -> bool:
            return self in (SpeculativeAlgorithm.EAGLE, SpeculativeAlgorithm.EAGLE3,
                            SpeculativeAlgorithm.FROZEN_KV_MTP)

        def is_uno(self):
            """UNO."""
            return self == SpeculativeAlgorithm.UNO

        def is_dflash(self):
            return self == SpeculativeAlgorithm.DFLASH

        def is_frozen_kv_mtp(self):
            return self == SpeculativeAlgorithm.FROZEN_KV_MTP

        def is_standalone(self):
            return self == SpeculativeAlgorithm.STANDALONE

        def needs_tree(self, server_args):
            return self == SpeculativeAlgorithm.EAGLE

        def handle_server_args(self, server_args):
            if self.is_dflash():
                _handle_dflash(server_args)
            elif self.is_uno():
                _handle_uno(server_args)
            elif self.is_frozen_kv_mtp():
                _handle_frozen_kv_mtp(server_args)
            elif self.is_eagle() or self.is_standalone():
                _handle_eagle_family(server_args)

    class Plain:
        def is_uno(self):
            return self == SpeculativeAlgorithm.UNO

        def run(self, server_args):
            if self.is_uno():
                _handle_uno(server_args)
''')


def test_an_enum_predicate_is_the_option_named_after_the_enum_set_to_its_members():
    tree = ast.parse(SPEC_INFO)
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "SpeculativeAlgorithm")
    preds = K.enum_predicates(cls)
    assert preds["is_uno"] == ["UNO"]
    assert preds["is_eagle"] == ["EAGLE", "EAGLE3", "FROZEN_KV_MTP"]
    assert "needs_tree" not in preds   # a method taking arguments is no predicate of the member alone
    # the dispatch's branch around the call: the option, set to the member
    knobs = K.call_knobs(tree, "_handle_uno", _enclosing)
    assert [(("speculative_algorithm",), ["UNO"], True)] in knobs
    # an earlier ``elif`` wanted false takes its members out: FROZEN_KV_MTP dispatches elsewhere
    eagle = [k for ks in K.call_knobs(tree, "_handle_eagle_family", _enclosing) for k in ks]
    assert (("speculative_algorithm",), ["EAGLE", "EAGLE3"], True) in eagle
    assert (("speculative_algorithm",), ["STANDALONE"], True) in eagle
    assert all(k[0] == ("speculative_algorithm",) for k in eagle)
    # where the option lands: the parser's dest of that name
    assert K.resolve(("speculative_algorithm",), {"speculative_algorithm"}, {}, None, "sglang") == \
        ("flag", "speculative_algorithm")


def test_a_predicate_of_a_class_that_is_no_enum_stays_as_it_was():
    tree = ast.parse(SPEC_INFO)
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "Plain")
    assert K.enum_predicates(cls) == {}
    plain = [ks for ks in K.call_knobs(tree, "_handle_uno", _enclosing) if ks and ks[0][0] == ("self", "is_uno")]
    assert plain == [[(("self", "is_uno"), [True, False], True)]]


SKIP = textwrap.dedent('''
    def check(cfg, custom=None, strict=False):
        if cfg.a:
            pass
        if strict:
            return
        while cfg.b:
            if custom is None:
                return True
            raise ValueError("x")
''')


def test_the_statements_before_a_site_are_one_walk_for_knobs_and_reachability():
    tree = ast.parse(SKIP)
    chain = _enclosing(tree, 10)
    assert isinstance(chain[-1], ast.Raise)
    before = [ast.unparse(st).splitlines()[0] for st in K.statements_before(chain)]
    # the function's statements before the loop, then the loop's before the raise: outermost block first
    assert before == ["if cfg.a:", "if strict:", "if custom is None:"]
    fn = chain[0]
    const = lambda v: ast.Constant(value=v)   # noqa: E731
    assert _skipped(fn, chain, {"strict": const(True), "custom": const(1)})        # the early return is taken
    assert _skipped(fn, chain, {"strict": const(False), "custom": const(None)})     # the loop's return is taken
    assert not _skipped(fn, chain, {"strict": const(False), "custom": const(1)})
    assert not _skipped(fn, chain, {})                                               # nothing decided


UNO = textwrap.dedent('''
    def _handle_uno(server_args):
        cfg = resolving_view(server_args)
        verify_width = cfg.speculative_num_draft_tokens
        if verify_width is None or int(verify_width) < 1:
            raise ValueError("positive")
        verify_width = int(verify_width)
        candidate_top_k = (
            1 if cfg.speculative_eagle_topk is None else int(cfg.speculative_eagle_topk)
        )
        if candidate_top_k < 1:
            raise ValueError("topk")
        if verify_width > 128:
            raise ValueError("Q")
''')


def test_a_local_read_through_its_conversion_and_a_conditional_expression():
    # speculative_hook.py:472-516@0.5.23: ``verify_width = int(verify_width)`` converts the local, it reads the same
    # option; ``1 if cfg.x is None else int(cfg.x)``: the branch reading the option
    tree = ast.parse(UNO)
    fn = tree.body[0]
    local = K.local_values(fn)
    assert ast.unparse(local["verify_width"]) == "cfg.speculative_num_draft_tokens"
    for line, name, option in ((12, "candidate_top_k", "speculative_eagle_topk"),
                               (14, "verify_width", "speculative_num_draft_tokens")):
        chain = _enclosing(tree, line)
        knobs = K.substitute_locals(K.path_knobs(chain), chain)
        assert any(c == ("cfg", option) for c, _v, _w in knobs), (name, knobs)
        assert not any(c == (name,) for c, _v, _w in knobs)
    assert ast.unparse(K.uncast(ast.parse("int(float(cfg.x))", mode="eval").body)) == "cfg.x"
    assert ast.unparse(K.uncast(ast.parse("int(cfg.x, 16)", mode="eval").body)) == "int(cfg.x, 16)"


TARGETS = textwrap.dedent('''
    class QuantizationConfigArgs:
        targets: dict | None = None

        @field_validator("targets", mode="before")
        @classmethod
        def _validate_targets(cls, v):
            if v is None:
                return v
            for pattern, target in v.items():
                if isinstance(target, str):
                    if target not in _ONLINE_SHORTHANDS:
                        raise ValueError("not a shorthand")
                if pattern.startswith("re:"):
                    raise ValueError("regex")
''')


def test_a_loop_over_a_dicts_items_builds_the_dict_the_condition_reads():
    # vLLM QuantizationConfigArgs._validate_targets (quantization.py:219-251@0.34.0): the loop's key and value are
    # one entry of the dict the option's key holds
    tree = ast.parse(TARGETS)
    val = _enclosing(tree, 13)
    knobs = K.path_knobs(val)
    assert any(c == ("v",) and {"synth": "synth"} in v for c, v, _w in knobs), knobs
    key = _enclosing(tree, 15)
    knobs = K.path_knobs(key)
    assert any(c == ("v",) and {"re:": {}} in v for c, v, _w in knobs), knobs
    assert not any(c in (("pattern",), ("target",)) for c, _v, _w in knobs)


SHARD = textwrap.dedent('''
    def validate_backend(server_args, cfg=None):
        cfg = cfg or resolving_view(server_args)
        prefill_backend = cfg.prefill_attention_backend or cfg.attention_backend
        if prefill_backend == "dsa":
            if cfg.page_size != 64:
                raise ValueError("dsa checks of its own")
            return
        if prefill_backend == "fa3":
            return
        if prefill_backend != "trtllm_mla":
            raise ValueError("fa3 or trtllm_mla")

    def handle(server_args):
        cfg = resolving_view(server_args)
        validate_backend(server_args, cfg)
        if cfg.disaggregation_transfer_backend not in ("mooncake", "nixl"):
            raise ValueError("transfer")
''')


def test_a_callee_before_the_site_is_left_by_its_first_early_exit_on_a_word():
    # SGLang handle_kv_cache_sharding (kv_shard_hook.py:232@0.5.23) calls validate_kv_shard_attention_backend,
    # which refuses every prefill backend but fa3 (its early return, kv_shard_hook.py:67-68@0.5.23) and trtllm_mla
    tree = ast.parse(SHARD)
    chain = _enclosing(tree, 18)
    assert isinstance(chain[-1], ast.Raise)
    knobs = K.callee_exit_knobs(chain, tree)
    # the dsa block has checks of its own before its return: the plain exit is the one taken
    assert knobs == [(("cfg", "prefill_attention_backend"), ["fa3"], True)]
    # no call before the site: nothing
    assert K.callee_exit_knobs(_enclosing(tree, 12), tree) == []
    # a local named after an option lands on the option opening with its first word
    dests = {"dsa_prefill_backend", "prefill_attention_backend"}
    assert K.resolve(("prefill_backend",), dests, {}, None, "sglang") == ("flag", "prefill_attention_backend")


def test_a_function_called_only_from_the_extra_callers_is_targeted_first_once():
    # _handle_uno: called only by SpeculativeAlgorithm.handle_server_args (spec_info.py, an EXTRA_CALLERS file whose
    # coverage the oracle does not record); one of its sites first, the others after it is entered
    import random
    from types import SimpleNamespace

    from tools.engine_oracle import synth

    sy = synth.Synth.__new__(synth.Synth)
    sy.rnd = random.Random(0)
    sy.index = SimpleNamespace(funcs={})
    sy.sites = [{"file": "h.py", "line": 4, "def_line": 3, "function": "_handle_uno"},
                {"file": "h.py", "line": 6, "def_line": 3, "function": "_handle_uno"},
                {"file": "h.py", "line": 20, "def_line": 19, "function": "other"}]
    sy.records = []
    sy.tried, sy.blockers, sy.root = {}, {}, "."
    sy._extra_trees = [ast.parse(SPEC_INFO)]
    got = sy.targets([{"class": "reachable"}] * 3)
    assert got[0][0] in (0, 1) and got[0][1] == "cold"
    assert [i for i, _k in got] in ([0, 2], [1, 2])
    # once entered, its sites are targets of their own
    sy.records = [{"sites": set(), "executed": {"h.py": {3}}}]
    assert sorted(sy.targets([{"class": "reachable"}] * 3)) == [(0, "entered"), (1, "entered"), (2, "cold")]
