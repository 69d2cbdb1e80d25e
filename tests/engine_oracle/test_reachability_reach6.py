"""tools/engine_oracle/reachability.py (h-reach6): the ``call-argument`` class (a site skipped under the arguments
every config-path call passes or leaves at their defaults) and the no-call-path callers of a release with a
package-missing gate (unit tier: synthetic release sources, no oracle)."""
from __future__ import annotations

from tools.engine_oracle import raise_sites, reachability

CONFIG = '''\
class VllmConfig:
    def __post_init__(self):
        self._check_supports(None)
        self.verify_mode(mode="a")
        self.takes_value(self.x)
        self.both(flag=False)

    def _check_supports(self, config=None, *, custom_sampler=False):
        if self.x:
            raise ValueError("reachable before")
        if custom_sampler:
            raise ValueError("custom sampler")
        if config is None:
            return True
        if not isinstance(config, int):
            raise TypeError("past the early return")
        return False

    def verify_mode(self, mode="b"):
        if mode == "b":
            raise ValueError("mode b")
        if mode != "b":
            raise ValueError("mode not b")

    def takes_value(self, value):
        if value:
            raise ValueError("a value from the line")

    def both(self, flag=True):
        if flag:
            raise ValueError("flag")

    def rebinds(self, flag=False):
        flag = self.y
        if flag:
            raise ValueError("rebound parameter")


def create_engine_config(cfg):
    cfg.both(flag=True)
    cfg.rebinds()
    VllmConfig()
'''
RUNNER = '''\
def step(cfg, params):
    cfg._check_supports(params)
    cfg._check_supports(custom_sampler=True)
'''


def _classify(tmp_path, release="vllm-0.33.0", missing=None):
    f = tmp_path / "vllm" / "config" / "vllm.py"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(CONFIG)
    (tmp_path / "vllm" / "v1").mkdir(parents=True, exist_ok=True)
    (tmp_path / "vllm" / "v1" / "runner.py").write_text(RUNNER)
    sites = raise_sites.raise_sites([f])
    cls = reachability.classify(release, sites, {}, tmp_path, {}, missing=missing or set())
    return {r["raises"].split("(", 1)[-1].strip("')\""): r for r in cls}


def test_sites_skipped_under_every_config_path_call(tmp_path):
    by = _classify(tmp_path)
    for msg in ("custom sampler", "past the early return"):
        assert by[msg]["class"] == "not-reachable", msg
        assert by[msg]["why"].startswith("call-argument: every call of `_check_supports` on the config path "
                                         "(vllm/config/vllm.py:3)"), by[msg]["why"]
        assert by[msg]["why"].endswith(": vllm/v1/runner.py"), by[msg]["why"]   # the runtime's calls are named
    # a check before the branch on the argument stays
    assert by["reachable before"]["class"] == "reachable"
    # mode="a" passed: the `== "b"` site is skipped, the `!= "b"` one is not
    assert by["mode b"]["why"].startswith("call-argument")
    assert by["mode not b"]["class"] == "reachable"
    # a non-constant argument, a call passing True, a parameter the body rebinds: undecided, reachable
    assert by["a value from the line"]["class"] == "reachable"
    assert by["flag"]["class"] == "reachable"
    assert by["rebound parameter"]["class"] == "reachable"


def test_bind_and_evaluate():
    import ast

    fn = ast.parse("def f(self, a, b=None, *, c=False):\n    pass\n").body[0]
    call = ast.parse("x.f(1, c=True)").body[0].value
    env = reachability._bind(fn, call, method=True)
    assert {k: v.value for k, v in env.items()} == {"a": 1, "b": None, "c": True}
    assert reachability._bind(fn, ast.parse("x.f(*args)").body[0].value, method=True) is None
    assert reachability._bind(fn, ast.parse("x.f(1, d=2)").body[0].value, method=True) is None
    assert reachability._bind(fn, ast.parse("x.f(1, 2, 3)").body[0].value, method=True) is None
    test = ast.parse("b is None and not c", mode="eval").body
    assert reachability._eval_const(test, env) is False
    assert reachability._eval_const(ast.parse("a == 1 or z", mode="eval").body, env) is True
    assert reachability._eval_const(ast.parse("z", mode="eval").body, env) is None


def test_callers_named_on_a_release_with_a_missing_package_gate(tmp_path):
    """The package-missing branch once rebound classify's ``pkg`` (the release's package) to the missing package,
    so every later no-call-path site of the release read "dead code"."""
    gated = tmp_path / "vllm" / "config" / "speculative.py"
    gated.parent.mkdir(parents=True)
    gated.write_text("class S:\n    def f(self):\n        if not has_arctic_inference():\n"
                     "            raise ImportError('x')\n        raise ValueError('gated')\n\n\n"
                     "def create_engine_config(a):\n    S().f()\n")
    f = tmp_path / "vllm" / "config" / "vllm.py"
    f.write_text(CONFIG + "\n\ndef only_runtime(cfg):\n    raise ValueError('runtime')\n")
    (tmp_path / "vllm" / "v1").mkdir(parents=True)
    (tmp_path / "vllm" / "v1" / "runner.py").write_text(RUNNER + "\n\ndef g(c):\n    only_runtime(c)\n")
    sites = raise_sites.raise_sites([gated, f])
    by = {r["raises"].split("(", 1)[-1].strip("')\""): r for r in reachability.classify(
        "vllm-0.33.0", sites, {}, tmp_path, {}, missing={"arctic_inference"})}
    assert by["gated"]["why"].startswith("package-missing: arctic_inference")
    assert by["runtime"]["why"] == "no-call-path: not on the entry points' call graph; used from vllm/v1/runner.py"


SPEC_HOOK = '''\
def handle_speculative(server_args):
    algo = SpeculativeAlgorithm.from_string(server_args.speculative_algorithm)
    algo.handle_server_args(server_args)


def _handle_uno(server_args):
    if server_args.x:
        raise ValueError("uno")
'''
SPEC_INFO = '''\
class SpeculativeAlgorithm:
    def handle_server_args(self, server_args):
        from sglang.srt.arg_groups.speculative_hook import _handle_uno
        if self.is_uno():
            _handle_uno(server_args)
'''


def test_sglang_speculative_handlers_dispatched_through_spec_info(tmp_path):
    """SGLang 0.5.23 calls its per-algorithm handlers from SpeculativeAlgorithm.handle_server_args in
    srt/speculative/spec_info.py (outside the validation files): that file is an extra caller, so _handle_uno is on
    the call graph (it read no-call-path, 22 sites)."""
    g = tmp_path / "sglang" / "srt" / "arg_groups"
    g.mkdir(parents=True)
    (g / "speculative_hook.py").write_text(SPEC_HOOK)
    (g / "pipeline.py").write_text("def resolve_once(args):\n    handle_speculative(args)\n")
    (tmp_path / "sglang" / "srt" / "speculative").mkdir()
    (tmp_path / "sglang" / "srt" / "speculative" / "spec_info.py").write_text(SPEC_INFO)
    sites = raise_sites.raise_sites([g / "speculative_hook.py"])
    files = [g / "speculative_hook.py", g / "pipeline.py"]
    by = {r["raises"]: r for r in reachability.classify("sglang-0.5.23", sites, {}, tmp_path, {}, files=files)}
    assert by["ValueError('uno')"]["class"] == "reachable", by["ValueError('uno')"]
    assert "srt/speculative/spec_info.py" in reachability.EXTRA_CALLERS["sglang"]


MULTILINE = '''\
class SchedulerConfig:
    def verify_max_model_len(self, max_model_len):
        if (
            self.max_num_batched_tokens < max_model_len
            and not self.enable_chunked_prefill
        ):
            raise ValueError("too small")
        return self


def create_engine_config(c):
    pass
'''


def test_function_entered_through_a_multiline_first_statement(tmp_path):
    """coverage.py on Python 3.11+ records `if (`'s first operand line (4), not the `if (` line (3): the function
    counts as entered (vLLM 0.34.0 SchedulerConfig.verify_max_model_len ran on every line, read "not entered")."""
    f = tmp_path / "vllm" / "config" / "scheduler.py"
    f.parent.mkdir(parents=True)
    f.write_text(MULTILINE)
    import ast

    fn = ast.parse(MULTILINE).body[0].body[0]
    assert raise_sites.entry_lines(fn) == {3, 4, 5}
    assert raise_sites.first_line(fn) == 3
    cls = reachability.classify("vllm-0.33.0", raise_sites.raise_sites([f]), {str(f): {4, 5, 8}}, tmp_path, {})
    assert [(r["class"], r["why"]) for r in cls] == [("reachable", "entered, raise not taken")]
