"""tools/engine_oracle/reachability.py: each raise site classed reached / reachable / not reachable, the latter with a
computed reason (platform branch, import failure, abstract, no call path from the entry points, after launch) or a
reviewed entry of known/raise_sites.yaml (unit tier: synthetic release sources, no oracle)."""
from __future__ import annotations

import pytest
import yaml

from tools.engine_oracle import raise_sites, reachability

CONFIG = '''\
from vllm.platforms import current_platform


class ParallelConfig:
    def __post_init__(self):
        if self.tp % 2:
            raise ValueError("odd tp")
        self.verify()
        if current_platform.is_rocm():
            raise ValueError("rocm only")
        if not current_platform.is_cuda() and self.x:
            raise ValueError("cuda only")
        if current_platform.is_cuda_alike():
            pass
        else:
            raise ValueError("else of cuda")
        if self.flag:
            raise ValueError("reachable by a flag")

    def verify(self):
        try:
            import flashinfer  # noqa: F401
        except ImportError:
            raise ValueError("no flashinfer")
        if self.dp > 8:
            raise ValueError("dp too large")

    def runtime_only(self):
        raise ValueError("checked by the model runner")

    def abstract(self):
        """doc"""
        raise NotImplementedError

    def dead(self):
        raise ValueError("never referenced")

    def reviewed(self):
        raise ValueError("listed")


def create_engine_config(args):
    ParallelConfig()
    return reviewed_caller()


def reviewed_caller():
    return ParallelConfig().reviewed()


def run_server():
    raise ValueError("after launch")
'''
RUNNER = '''\
def step(cfg):
    cfg.runtime_only()
'''


@pytest.fixture
def release_root(tmp_path):
    (tmp_path / "vllm" / "config").mkdir(parents=True)
    (tmp_path / "vllm" / "v1").mkdir(parents=True)
    (tmp_path / "vllm" / "config" / "parallel.py").write_text(CONFIG)
    (tmp_path / "vllm" / "v1" / "runner.py").write_text(RUNNER)
    return tmp_path


def _classes(root, executed_lines, residue=None):
    f = root / "vllm" / "config" / "parallel.py"
    sites = raise_sites.raise_sites([f])
    cls = reachability.classify("vllm-0.33.0", sites, {str(f): set(executed_lines)}, root, residue or {})
    return {r["raises"].split("(", 1)[-1].strip("')\""): r for r in cls}


def test_classes_computed(release_root):
    # the corpus ran __post_init__'s first check (lines 5-7) and create_engine_config (47-49)
    by = _classes(release_root, [1, 4, 5, 6, 7, 8, 47, 48, 49])
    assert by["odd tp"]["class"] == "reached"
    assert by["reachable by a flag"]["class"] == "reachable"
    assert by["dp too large"]["class"] == "reachable"        # verify() is called from __post_init__
    for msg in ("rocm only", "cuda only", "else of cuda"):
        assert by[msg]["class"] == "not-reachable" and by[msg]["why"].startswith("platform-branch"), msg
    assert by["no flashinfer"]["why"].startswith("import-failure")
    assert by["NotImplementedError"]["why"].startswith("abstract")
    assert by["checked by the model runner"]["why"] == ("no-call-path: not on the entry points' call graph; used "
                                                        "from vllm/v1/runner.py")
    assert by["never referenced"]["why"] == "no-call-path: dead code, never referenced in the package"
    assert by["after launch"]["why"].startswith("after-launch")
    # reached through the call graph (create_engine_config -> reviewed_caller -> reviewed), not entered
    assert by["listed"]["class"] == "reachable"
    s = reachability.summarize("vllm-0.33.0", list(by.values()))
    assert (s["reached"], s["reachable"], s["raise_sites"]) == (1, 4, 12)


def test_cpu_release_flips_the_platform(release_root):
    by = _classes(release_root, [1, 4, 5, 6, 7, 8])
    f = release_root / "vllm" / "config" / "parallel.py"
    cpu = {r["raises"].split("(", 1)[-1].strip("')\""): r for r in reachability.classify(
        "vllm-0.32.0-cpu", raise_sites.raise_sites([f]), {str(f): {1, 4, 5, 6, 7, 8}}, release_root, {})}
    assert by["else of cuda"]["class"] == "not-reachable"
    assert cpu["else of cuda"]["class"] == "reachable" and cpu["cuda only"]["class"] == "reachable"


def test_reviewed_residue(release_root, tmp_path):
    path = tmp_path / "raise_sites.yaml"
    path.write_text(yaml.safe_dump({"sites": [{
        "where": "vllm/config/parallel.py:ParallelConfig.reviewed", "releases": ["vllm-0.3*"], "class": "not-reachable",
        "reason": "an internal invariant", "reviewed": "test"}]}))
    residue = reachability.load_residue("vllm-0.33.0", path)
    assert reachability.load_residue("vllm-0.11.0", path) == {}
    by = _classes(release_root, [1, 4, 5, 6, 7, 8], residue)
    assert by["listed"]["class"] == "not-reachable" and by["listed"]["why"] == "reviewed: an internal invariant"
    path.write_text(yaml.safe_dump({"sites": [{"where": "x.py:1", "releases": ["*"], "class": "not-reachable"}]}))
    with pytest.raises(ValueError, match="lacks"):
        reachability.load_residue("vllm-0.33.0", path)


def test_committed_residue_loads():
    for release in ("vllm-0.33.0", "vllm-0.11.0", "sglang-0.5.23"):
        for where, e in reachability.load_residue(release).items():
            assert e["reason"] and e["reviewed"], where


HOOK = '''\
def handle_kv(args):
    if args.kv == "bad":
        raise ValueError("hook")


@register_override("Arch")
def _arch_overrides(args):
    raise ValueError("override")


def unused(args):
    raise ValueError("dead")
'''
PIPELINE = '''\
def resolve_once(args):
    for hook in (handle_kv,):
        hook(args)
'''


def test_calls_from_files_without_raises_and_registered_functions(tmp_path):
    """SGLang's pipeline file raises nothing but calls every hook; a model override is called through the registry
    its decorator fills: both are on the path, a function nobody names is not."""
    g = tmp_path / "sglang" / "srt" / "arg_groups"
    g.mkdir(parents=True)
    (g / "hook.py").write_text(HOOK)
    (g / "pipeline.py").write_text(PIPELINE)
    sites = raise_sites.raise_sites([g / "hook.py"])
    by = {r["raises"]: r for r in reachability.classify("sglang-0.5.23", sites, {}, tmp_path, {},
                                                       files=[g / "hook.py", g / "pipeline.py"])}
    assert by["ValueError('hook')"]["class"] == "reachable"
    assert by["ValueError('override')"]["class"] == "reachable"
    assert by["ValueError('dead')"]["why"] == "no-call-path: dead code, never referenced in the package"
    # without the pipeline file in the graph the hook looks unreachable (the bug this guards)
    alone = {r["raises"]: r for r in reachability.classify("sglang-0.5.23", sites, {}, tmp_path, {})}
    assert alone["ValueError('hook')"]["class"] == "not-reachable"


GATED = '''\
class SpeculativeConfig:
    def _validate_suffix_decoding(self):
        if self.x:
            raise ValueError("before the gate")
        if not has_arctic_inference():
            raise ImportError("Arctic Inference is required")
        if self.depth < 1:
            raise ValueError("after the gate")

    def _validate_other(self):
        if not has_flashinfer():
            raise ImportError("flashinfer is required")
        if self.y:
            raise ValueError("installed package")


def create_engine_config(args):
    SpeculativeConfig()._validate_suffix_decoding()
    SpeculativeConfig()._validate_other()
'''


def test_sites_behind_a_missing_package_gate(tmp_path):
    """`if not has_<pkg>(): raise` refuses every line on an installation without <pkg>: the sites after it in the
    function need the package (computed: package-missing); the gate itself and what precedes it stay reachable."""
    f = tmp_path / "vllm" / "config" / "speculative.py"
    f.parent.mkdir(parents=True)
    f.write_text(GATED)
    sites = raise_sites.raise_sites([f])
    by = {r["raises"].split("(", 1)[-1].strip("')\""): r for r in reachability.classify(
        "vllm-0.33.0", sites, {}, tmp_path, {}, missing={"arctic_inference"})}
    assert by["after the gate"]["class"] == "not-reachable"
    assert by["after the gate"]["why"].startswith("package-missing: arctic_inference")
    assert by["before the gate"]["class"] == by["Arctic Inference is required"]["class"] == "reachable"
    assert by["installed package"]["class"] == "reachable"     # flashinfer is not missing


def test_reports_together_classify_the_union_of_their_lines(release_root, monkeypatch):
    f = release_root / "vllm" / "config" / "parallel.py"
    monkeypatch.setattr(raise_sites, "_root", lambda release: release_root)
    monkeypatch.setattr(raise_sites, "validation_files", lambda release, root=None: [f])
    # one corpus ran the first check of __post_init__ (odd tp), another the flag check (lines 17-18)
    a = {"release": "vllm-0.33.0", "executed_lines": {"vllm/config/parallel.py": [1, 4, 5, 6, 7, 8]}}
    b = {"release": "vllm-0.33.0", "executed_lines": {"vllm/config/parallel.py": [1, 4, 5, 17, 18]}}
    assert reachability.from_report(a)[1]["reached"] == 1
    assert reachability.from_report(a, b)[1]["reached"] == 2
    with pytest.raises(ValueError, match="different releases"):
        reachability.from_report(a, dict(b, release="vllm-0.11.0"))
