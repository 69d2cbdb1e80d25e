"""`gpustack-k3 run` end to end on the real dockerd: a preset rendered by our Docker target, with the replay
engine image standing in for the vLLM image (same command line), detached → Ready → status → stop; and a
crash during CUDA-graph capture → exit 1 naming the phase."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from gpustack_k3.catalog import load_catalog

pytestmark = pytest.mark.docker

IN_IMAGE = "/opt/replay/logs/"


def spec_file(tmp_path, image, name, port, **env):
    doc = load_catalog().presets["vllm-fixed"].document
    doc = json.loads(json.dumps(doc))
    doc["metadata"]["name"] = name
    doc["spec"]["engine"]["image"] = image
    doc["spec"]["serving"] = {"host": "127.0.0.1", "port": port}
    doc["spec"]["env"].update({"REPLAY_SPEED": "250", **env})
    doc["spec"]["storage"] = {"model": {"kind": "emptyDir"}, "cache": {"kind": "emptyDir"}, "shmSizeGiB": 1}
    doc["spec"]["startup"] = {"budgetSeconds": 120}
    f = tmp_path / f"{name}.yaml"
    f.write_text(yaml.safe_dump(doc))
    return f


def cli(docker_host, *args, timeout=180):
    env = {**os.environ, "DOCKER_HOST": docker_host}
    p = subprocess.run([sys.executable, "-m", "gpustack_k3", *args], capture_output=True, text=True, env=env,
                       timeout=timeout)
    ours = "\n".join(line for line in p.stderr.splitlines() if not line.startswith("  | "))  # "  | " = engine lines
    assert "Traceback" not in ours, p.stderr
    return p


def test_run_detached_status_stop(docker_host, docker_client, replay_image, container_name, free_port, tmp_path):
    f = spec_file(tmp_path, replay_image, container_name, free_port)
    p = cli(docker_host, "run", str(f), "--runtime", "docker", "--detach", "--no-host-gpus", "--clamp-ulimits")
    try:
        assert p.returncode == 0, p.stderr
        assert "Ready" in p.stderr
        # the planner's figures for the preset next to the replayed engine's (2,687,776 tokens, 43.76 GiB)
        assert "plan check (planned vs engine):" in p.stderr
        assert any(line.strip().startswith("kv_cache_tokens") and "engine    2,687,776" in line
                   for line in p.stderr.splitlines()), p.stderr
        st = cli(docker_host, "run", "status", container_name, "-o", "json")
        assert st.returncode == 0, st.stderr
        d = json.loads(st.stdout)
        assert d["state"] == "running"
        logs = cli(docker_host, "run", "logs", container_name)
        assert "init engine (profile, create kv cache, warmup model) took" in logs.stdout
    finally:
        sp = cli(docker_host, "run", "stop", container_name)
    assert sp.returncode == 0, sp.stderr
    assert not docker_client.containers.list(all=True, filters={"name": container_name})


def test_run_crash_in_cuda_graphs_exits_1_with_phase(docker_host, docker_client, replay_image, container_name,
                                                     free_port, tmp_path):
    f = spec_file(tmp_path, replay_image, container_name, free_port, REPLAY_CRASH_AT="Capturing CUDA graphs",
                  REPLAY_CRASH_TAIL=IN_IMAGE + "vllm-0.33-kimi-k3-cuda-graph-oom.tail.log", REPLAY_EXIT_CODE="3")
    p = cli(docker_host, "run", str(f), "--runtime", "docker", "--detach", "--no-host-gpus", "--clamp-ulimits")
    assert p.returncode == 1, p.stderr
    assert "cuda_graphs" in p.stderr and "exited with code 3" in p.stderr
    # the root cause, with the wrappers after it (tail: WorkerProc hit an exception → torch.OutOfMemoryError)
    assert "FAILED in phase cuda_graphs: [Worker_TP3] torch.OutOfMemoryError: CUDA out of memory" in p.stderr
    assert "  after: EngineCore failed to start." in p.stderr
    assert not docker_client.containers.list(all=True, filters={"name": container_name})


def test_run_refuses_invalid_spec_without_touching_docker(docker_host, replay_image, container_name, free_port, tmp_path):
    f = spec_file(tmp_path, replay_image, container_name, free_port)
    doc = yaml.safe_load(f.read_text())
    doc["spec"]["parallel"]["dcp"] = 8
    f.write_text(yaml.safe_dump(doc))
    p = cli(docker_host, "run", str(f), "--runtime", "docker", "--no-host-gpus")
    assert p.returncode == 1 and "vllm-dcp-with-dspark" in p.stderr


def test_run_detached_sends_the_warm_up_after_ready(docker_host, docker_client, replay_image, container_name, free_port,
                                                    tmp_path):
    """spec.startup.warmup on the Docker runtime: after Ready, `run` sends the warm-up requests (the probe's code)
    to the container and reports them and the cold-start phase warm (issue 15 item 4)."""
    f = spec_file(tmp_path, replay_image, container_name, free_port)
    doc = yaml.safe_load(f.read_text())
    doc["spec"]["startup"]["warmup"] = {"requests": 2, "inputLen": 16, "outputLen": 4}
    f.write_text(yaml.safe_dump(doc))
    p = cli(docker_host, "run", str(f), "--runtime", "docker", "--detach", "--no-host-gpus", "--clamp-ulimits")
    try:
        assert p.returncode == 0, p.stderr
        assert p.stderr.index("Ready") < p.stderr.index("warm after"), p.stderr
        assert "2 warm-up requests" in p.stderr and "cold-start phase warm:" in p.stderr, p.stderr
        logs = cli(docker_host, "run", "logs", container_name).stdout
        # the probe's completion stage (2 requests) and the 2 streamed warm-up requests reached the engine
        assert logs.count('"POST /v1/chat/completions HTTP/1.1" 200') == 4, logs[-2000:]
    finally:
        cli(docker_host, "run", "stop", container_name)
