"""GPUStack target: the vendored 2.3.0 OpenAPI schemas and GPUStack's rules. The rendered files (with and
without a pinned worker) are golden files of manifests/examples (tests/render/test_golden.py)."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.launch import Refused, build_launch
from gpustack_k3.render import gpustack as R
from gpustack_k3.render.templates import RenderError

HERE = Path(__file__).parent
SCHEMA = HERE / "schema" / "gpustack-2.3.0-openapi-extract.json"
SEEDS = ("vllm-seed", "sglang-seed")


def doc_of(preset: str, **spec_over) -> DeploymentDocument:
    d = copy.deepcopy(load_catalog().presets[preset].document)
    d["spec"].update(spec_over)
    return DeploymentDocument.model_validate(d)


def render(preset: str, worker: str | None = None, **spec_over):
    doc = doc_of(preset, **spec_over)
    launch, _, _ = build_launch(doc)
    files = R.render_gpustack(launch, worker=worker, source=R.model_source_for(doc))
    return launch, files, json.loads(files["backend.json"]), json.loads(files["model.json"]), \
        yaml.safe_load(files["import.yaml"])


# ------------------------------------------------------------------ vendored OpenAPI schemas (2.3.0)

def _strict(node):
    """Forbid unknown properties everywhere (the server silently drops them, gpustack.md §1.1)."""
    if isinstance(node, dict):
        node = {k: _strict(v) for k, v in node.items()}
        if node.get("type") == "object" and "properties" in node:
            node.setdefault("additionalProperties", False)
        return node
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


@pytest.fixture(scope="module")
def validator_for():
    import jsonschema

    extract = json.loads(SCHEMA.read_text())
    assert extract["info"]["version"] == "v2.3.0"
    comps = _strict(extract["components"])

    def make(name: str):
        schema = {"$ref": f"#/components/schemas/{name}", "components": comps}
        return jsonschema.Draft202012Validator(schema)
    return make


@pytest.mark.parametrize("preset", SEEDS)
@pytest.mark.parametrize("worker", [None, "b300-node-1"])
def test_documents_match_openapi_schemas(validator_for, preset, worker):
    _, _, backend, model, _ = render(preset, worker)
    errors = [e.message for e in validator_for("InferenceBackendCreate").iter_errors(backend)]
    assert errors == []
    for ver, vc in backend["version_configs"].items():
        assert list(validator_for("VersionConfig").iter_errors(vc)) == []
    body = {**model, "cluster_id": 1}
    assert [e.message for e in validator_for("ModelCreate").iter_errors(body)] == []
    assert list(validator_for("GPUSelector").iter_errors(model["gpu_selector"])) == []


def test_schema_check_catches_unknown_and_bad_values(validator_for):
    _, _, backend, model, _ = render("vllm-seed")
    assert list(validator_for("InferenceBackendCreate").iter_errors({**backend, "dcp_size": 8}))
    assert list(validator_for("InferenceBackendCreate").iter_errors({**backend, "parameter_format": "colon"}))
    assert list(validator_for("ModelCreate").iter_errors({**model, "source": "s3"}))


# ------------------------------------------------------------------ GPUStack's rules

@pytest.mark.parametrize("preset", SEEDS)
def test_backend_shape(preset):
    launch, _, b, m, entry = render(preset)
    assert b["backend_name"] == f"kimi-k3-{launch.engine}-custom"
    assert b["health_check_path"] == "/health"
    assert b["default_entrypoint"].split() == launch.command
    assert b["parameter_format"] == R.PARAMETER_FORMAT[launch.engine]
    run = b["default_run_command"]
    names = set(R.PLACEHOLDER.findall(run))
    assert {"model_path", "port", "worker_ip", "model_name", "gpu_count"} <= names
    assert all(R.PLACEHOLDER.fullmatch("{{" + inner + "}}") for inner in R.ANY_BRACES.findall(run))
    assert not run.split()[0] in launch.command           # arguments only
    assert b["version_configs"] == {launch.engine_version: {"image_name": launch.image, "custom_framework": "cuda"}}
    assert b["default_backend_param"] == m["backend_parameters"]
    for k in launch.env:                                    # mirrored for UI users and carried by the model
        assert k in b["default_env"] and k in m["env"]
    assert entry == {"name": m["name"], "cluster_name": "default", **{k: v for k, v in m.items() if k != "name"}}


@pytest.mark.parametrize("preset", SEEDS)
def test_gpu_selection(preset):
    launch, _, _, m, _ = render(preset, worker="node-a")
    assert m["gpu_selector"] == {"gpu_ids": [f"node-a:cuda:{i}" for i in range(8)], "gpus_per_replica": 8}
    assert "GPUSTACK_MODEL_VRAM_CLAIM" not in m["env"]
    _, _, _, m, _ = render(preset)
    claim = int(m["env"]["GPUSTACK_MODEL_VRAM_CLAIM"])
    card = load_catalog().hardware["b300"].visible_gib * R.GIB
    assert 7 * card < claim < 8 * card                      # fewer than 8 cards can never satisfy it
    assert m["gpu_selector"] == {"gpus_per_replica": 8}


@pytest.mark.parametrize("preset", SEEDS)
def test_argv_through_gpustack_placeholders_equals_launch_args(preset):
    """Substitute the placeholders as GPUStack would, flatten the parameters: the engine gets the seed's flags."""
    launch, _, b, m, _ = render(preset)
    variables = {"model_path": launch.model_path, "port": str(launch.port), "worker_ip": "10.1.2.3",
                 "model_name": launch.name, "gpu_count": str(launch.gpu_count), **m["env"]}
    import shlex

    run = R.PLACEHOLDER.sub(lambda mt: variables[mt.group(1)], b["default_run_command"])
    got = shlex.split(run) + R.flatten_elements(m["backend_parameters"])

    def keyed(tokens):
        return {c[0]: c[1:] for c in R.clusters(tokens) if R.is_parameter_key(c[0])}

    want = keyed(launch.args)
    have = keyed(got)
    assert have.pop("--host") == ["10.1.2.3"] and want.pop("--host", None) in (None, [launch.host])
    assert have.pop("--port") == [str(launch.port)]
    want.pop("--port", None)
    assert have.pop("--served-model-name") == [launch.name]
    mounts = {"/cache": R.CACHE_ROOT, "/models": R.VOLUME_ROOTS["model"]}
    want = {k: [R._remap(v, mounts) for v in vs] for k, vs in want.items()}
    if launch.engine == "sglang":
        assert have.pop("--model-path") == [launch.model_path]
        want.pop("--model-path")
    else:
        assert got[0] == launch.model_path and launch.args[0] == launch.model_path
    assert have == want


def test_paths_move_under_gpustack_cache():
    _, _, _, m, _ = render("sglang-seed")
    assert m["env"]["TRITON_CACHE_DIR"] == f"{R.CACHE_ROOT}/triton"
    assert f"--speculative-draft-model-path {R.CACHE_ROOT}/models/sglang-Kimi-K3-DSpark" in m["backend_parameters"]
    assert R._remap('{"model":"/models/d","n":1}', {"/models": "/x"}) == '{"model":"/x/d","n":1}'
    assert R._remap("/modelsX/a", {"/models": "/x"}) == "/modelsX/a"


def test_memory_fraction_rides_in_the_run_command():
    _, _, b, m, _ = render("vllm-seed")
    assert "--gpu-memory-utilization {{KIMI_K3_MEMORY_FRACTION}}" in b["default_run_command"]
    assert m["env"]["KIMI_K3_MEMORY_FRACTION"] == "0.95"
    assert not any(p.startswith("--gpu-memory-utilization") for p in m["backend_parameters"])


@pytest.mark.parametrize("bad, needle", [
    ({"backend_name": "kimi-k3-vllm"}, "must end with -custom"),
    ({"health_check_path": ""}, "health_check_path"),
    ({"parameter_format": "colon"}, "parameter_format"),
    ({"default_run_command": "{{ model_path }} --port {{port}}"}, "no spaces inside the braces"),
    ({"default_run_command": "{{model_path}} --x {{draft_model_path}}"}, "unknown placeholder"),
    ({"default_run_command": "vllm serve {{model_path}}"}, "starts with the entrypoint"),
])
def test_validate_flags_broken_backends(bad, needle):
    launch, _, b, m, entry = render("vllm-seed")
    problems = R.validate_gpustack({**b, **bad}, m, entry, launch)
    assert any(needle in p for p in problems), problems
    assert R.validate_gpustack(b, m, entry, launch) == []


@pytest.mark.parametrize("param", ["--port=9000", "--api-key", "--host 0.0.0.0", "--served-model-name x"])
def test_validate_refuses_gpustack_owned_flags(param):
    launch, _, b, m, entry = render("vllm-seed")
    bad = {**m, "backend_parameters": [*m["backend_parameters"], param]}
    entry = {**entry, "backend_parameters": bad["backend_parameters"]}
    assert any("owned by GPUStack" in p for p in R.validate_gpustack(b, bad, entry, launch))


@pytest.mark.parametrize("flag", ["--host", "--port", "--served-model-name", "--api-key"])
def test_core_refuses_owned_flags_in_extra_args(flag):
    with pytest.raises(Refused):
        build_launch(doc_of("vllm-seed", extraArgs=[flag, "x"]))


def test_import_diverging_from_model_is_flagged():
    launch, _, b, m, entry = render("sglang-seed")
    assert any("import.yaml" in p for p in R.validate_gpustack(b, m, {**entry, "replicas": 2}, launch))


def test_secret_env_is_refused_not_dropped():
    doc = doc_of("vllm-seed", secretEnv=[{"name": "HF_TOKEN", "secretName": "hf", "key": "token"}])
    launch, _, _ = build_launch(doc)
    with pytest.raises(RenderError, match="secret"):
        R.render_gpustack(launch)


def test_bad_worker_name():
    launch, _, _ = build_launch(doc_of("vllm-seed"))
    with pytest.raises(RenderError, match="invalid worker name") as exc:
        R.render_gpustack(launch, worker="a b")
    assert exc.value.where == "--worker"


@pytest.mark.parametrize("tokens", [
    ["--a", "1", "--b", "--c", '{"x": "y z"}', "--d", "-1", "--e", "v w"],
    ["--only"],
    ["--p", "/x/y", "--q", "a=b"],
])
@pytest.mark.parametrize("fmt", ["equal", "space"])
def test_parameter_elements_round_trip(tokens, fmt):
    els = R.parameter_elements(tokens, fmt)
    assert R.flatten_elements(els) == tokens
    for e in els:   # never a leading/trailing space (gpustack#4375)
        assert e == e.strip()


def test_source_from_spec_and_catalog():
    assert R.model_source_for(doc_of("vllm-seed")) == R.ModelSource("model_scope", "moonshotai/Kimi-K3")
    assert R.ModelSource("huggingface", "a/b").fields() == {"huggingface_repo_id": "a/b"}
    with pytest.raises(RenderError):
        R.ModelSource("s3", "x").fields()


def test_rendered_import_is_yaml_of_the_model():
    _, files, _, m, entry = render("vllm-seed", worker="w")
    assert entry["gpu_selector"]["gpu_ids"][0] == "w:cuda:0"
    assert re.search(r"^cluster_name: default$", files["import.yaml"], re.M)
