"""The Docker runner against a real dockerd and the locally built replay engine image."""
from __future__ import annotations

import io
import json
import re
import threading
import urllib.request
from pathlib import Path

import pytest

from gpustack_k3.coldstart import PHASES, ColdStartTracker
from gpustack_k3.core.launch_types import Arg, LaunchSpec
from gpustack_k3.runtime.docker import (
    INSTANCE_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    DockerLaunch,
    DockerRuntimeError,
)
from gpustack_k3.runtime.progress import ProgressView

pytestmark = pytest.mark.docker

LOGS = Path(__file__).resolve().parent / "images" / "replay-engine" / "logs"
VLLM_LOG = LOGS / "vllm-0.33-kimi-k3-8xb300.log"
OOM_TAIL = LOGS / "vllm-0.33-kimi-k3-cuda-graph-oom.tail.log"
IN_IMAGE = "/opt/replay/logs/"
SPEED = "250"  # the ~10.4 min recorded start-up replays in ~2.5 s


def replay_params(image: str, name: str, port: int, **env: str) -> dict:
    return {
        "image": image,
        "name": name,
        "command": ["vllm", "serve", "/models/Kimi-K3", "--host", "127.0.0.1", "--port", str(port),
                    "--served-model-name", "kimi-k3", "--tensor-parallel-size", "8"],
        "environment": {"REPLAY_SPEED": SPEED, **env},
        "network_mode": "host",
    }


def launch_spec(image: str, name: str, port: int, budget_s: int = 60) -> LaunchSpec:
    arguments = [Arg("model.path", ["/models/Kimi-K3"], platform=True),
                 Arg("serving.host", ["--host", "127.0.0.1"], platform=True),
                 Arg("serving.port", ["--port", str(port)], platform=True),
                 Arg("model.servedModelName", ["--served-model-name", "kimi-k3"], platform=True),
                 Arg("parallel.tp", ["--tensor-parallel-size", "8"])]
    return LaunchSpec(
        name=name, engine="vllm", engine_version="0.33.0", image=image, command=["vllm", "serve"],
        arguments=arguments, env={"REPLAY_SPEED": SPEED}, secret_env=[], host="127.0.0.1", port=port,
        health_path="/health", model_path="/models/Kimi-K3", served_model_name="kimi-k3", gpu_type="B300",
        gpu_count=8, gpu_resource="nvidia.com/gpu", shm_size_gib=1, volumes=[], startup_budget_s=budget_s)


def test_daemon_never_has_the_default_bridge(docker_client):
    names = {n.name for n in docker_client.networks.list()}
    assert "bridge" not in names, f"dockerd was started with a bridge network: {names}"
    assert {"host", "none"} <= names


def test_replay_engine_reaches_ready_and_serves(runner, replay_image, container_name, free_port, docker_client):
    chunks: list[bytes] = []
    events: list[str] = []
    out = io.StringIO()
    spec = launch_spec(replay_image, container_name, free_port)
    launch = DockerLaunch.from_launch_spec(spec)  # params from the Docker target (render.docker)
    tracker = ColdStartTracker(engine="vllm")
    result = runner.run(launch, tracker=tracker, platform_events=False, on_log=chunks.append,
                        on_event=events.append, progress=ProgressView(out, tty=False), detach=True)
    try:
        assert result.ready, result.reason
        assert events == ["container_created", "container_started"]
        # the tracker followed the recorded timeline live, phase by phase, to Ready
        recorded = VLLM_LOG.read_text()
        report = tracker.report()
        assert (report.status, result.phase) == ("ready", "server_ready")
        assert report.last.engine_init_seconds == float(re.search(r"warmup model\) took ([\d.]+) s", recorded)[1])
        assert report.phase("cuda_graphs").seconds == float(re.search(r"finished in (\d+) secs", recorded)[1])
        shown = [ln.split("] ", 1)[1].split("  |")[0] for ln in out.getvalue().splitlines() if ln.startswith("[")]
        shown_known = [p for p in shown if p in PHASES]
        assert shown_known == sorted(shown_known, key=PHASES.index), shown
        assert {"weights_load", "cuda_graphs"} <= set(shown_known), shown
        # every byte of the recorded log reached the callback, in order, before Ready
        assert b"".join(chunks).startswith(VLLM_LOG.read_bytes())
        assert any(n.startswith("GPU request dropped: the launch asks for 8 GPU(s)") for n in result.notes)
        assert f"Ready: {container_name} answered http://127.0.0.1:{free_port}/health" in out.getvalue()

        attrs = docker_client.containers.get(container_name).attrs
        host_config = attrs["HostConfig"]
        assert host_config["NetworkMode"] == "host" and host_config["IpcMode"] == "host"
        assert not host_config.get("DeviceRequests")  # the target asked for 8 GPUs; this host has none
        assert host_config["ShmSize"] == spec.shm_size_gib * 1024**3
        ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in host_config["Ulimits"]}
        assert ulimits["stack"] == (64 * 1024**2, 64 * 1024**2)  # NVIDIA's recommended stack size
        memlock_cap = runner.ulimit_caps.get("memlock")
        if memlock_cap is not None:  # the target asks for unlimited; this dockerd can grant memlock_cap
            assert ulimits["memlock"] == (memlock_cap, memlock_cap)
            assert any(n.startswith("ulimit memlock clamped from soft=-1, hard=-1") for n in result.notes)
        else:
            assert ulimits["memlock"] == (-1, -1)
        assert [*attrs["Config"]["Entrypoint"], *attrs["Config"]["Cmd"]] == spec.argv
        assert attrs["Config"]["Labels"][MANAGED_BY_LABEL] == MANAGED_BY
        assert attrs["Config"]["Labels"][INSTANCE_LABEL] == container_name

        body = json.dumps({"model": "kimi-k3", "prompt": "one two three", "max_tokens": 2}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{free_port}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            completion = json.load(resp)
        assert completion["model"] == "kimi-k3"
        assert completion["choices"][0]["text"].split() == ["three", "two"]

        st = runner.status(container_name, tracker_factory=lambda: ColdStartTracker(engine="vllm"))
        assert (st.state, st.healthy, st.port, st.phase) == ("running", True, free_port, "server_ready")
        assert [c.name for c in runner.list_containers() if c.name == container_name] == [container_name]
        logged = b"".join(runner.logs(container_name))
        assert logged.startswith(VLLM_LOG.read_bytes())
    finally:
        stopped = runner.stop(container_name)
    assert stopped.state == "exited" and stopped.exit_code == 0  # SIGTERM handled: clean exit
    assert runner.find(container_name) is None
    with pytest.raises(DockerRuntimeError, match="no gpustack-k3 container named"):
        runner.stop(container_name)


def test_crash_during_cuda_graph_capture_reports_exit_code_and_last_lines(runner, replay_image, container_name,
                                                                        free_port):
    chunks: list[bytes] = []
    out = io.StringIO()
    launch = DockerLaunch.from_params(
        replay_params(replay_image, container_name, free_port, REPLAY_CRASH_AT="Capturing CUDA graphs",
                      REPLAY_CRASH_TAIL=IN_IMAGE + OOM_TAIL.name, REPLAY_EXIT_CODE="3"),
        startup_budget_s=60)
    result = runner.run(launch, tracker=ColdStartTracker(engine="vllm"), platform_events=False,
                        on_log=chunks.append, progress=ProgressView(out, tty=False))
    assert result.state == "exited"
    assert result.exit_code == 3
    assert result.phase == "cuda_graphs"
    tail_lines = OOM_TAIL.read_text().splitlines()
    assert result.last_lines[-len(tail_lines):] == tail_lines
    assert result.reason.startswith("container exited with code 3 during start-up in phase cuda_graphs; engine: ")
    assert "CUDA out of memory" in result.reason
    assert out.getvalue().splitlines()[-1] == f"Failed: {result.reason}"
    seen = b"".join(chunks).decode()
    first_capture = next(line for line in VLLM_LOG.read_text().splitlines() if "Capturing CUDA graphs" in line)
    assert seen.endswith(first_capture + "\n" + OOM_TAIL.read_text())
    assert "Graph capturing finished" not in seen
    assert runner.find(container_name) is None  # removed after its logs were read


def test_run_launch_is_the_cli_path(docker_client, runner, replay_image, container_name, free_port):
    from gpustack_k3.runtime import run_launch

    out = io.StringIO()
    spec = launch_spec(replay_image, container_name, free_port)
    try:
        code, result, report = run_launch(spec, detach=True, clamp_ulimits=True, stream=out, client=docker_client)
        assert (code, result.state, report.status) == (0, "ready", "ready")
        assert report.phases[0].name == "container_start"  # the runner's platform event
        assert f"Ready: {container_name} answered" in out.getvalue()
    finally:
        runner.stop(container_name, timeout_s=2)
    spec = launch_spec(replay_image, container_name, free_port, budget_s=1)
    code, result, report = run_launch(spec, clamp_ulimits=True, stream=io.StringIO(), client=docker_client)
    assert (code, result.state) == (1, "timeout")
    assert runner.find(container_name) is None


def test_live_engine_clock_with_platform_event(runner, replay_image, container_name, free_port):
    """A retimed replay behaves like a live engine: log clock = wall clock, so the runner's
    container_start span and the engine's phases form one timeline."""
    tracker = ColdStartTracker(engine="vllm")
    launch = DockerLaunch.from_params(replay_params(replay_image, container_name, free_port, REPLAY_RETIME="1"),
                                      startup_budget_s=60)
    result = runner.run(launch, tracker=tracker, detach=True)
    try:
        assert result.ready, result.reason
        report = tracker.report()
        assert report.status == "ready"
        names = [p.name for p in report.phases]
        assert names[0] == "container_start" and names[-1] == "server_ready"
        assert names == sorted(names, key=PHASES.index)
        start = report.phases[0].start
        assert all(p.start >= start for p in report.phases if p.start is not None)
        assert 0 < report.last.total_seconds <= result.elapsed_s + 2  # whole seconds in vLLM's clock
    finally:
        runner.stop(container_name, timeout_s=2)


def test_log_stream_broken_mid_start_is_resumed_without_duplicates(runner, replay_image, container_name, free_port):
    """The follow supervisor under the Docker runner: the log connection drops while weights load; the
    stream is reopened from the last docker timestamp and every byte reaches the callback once."""
    chunks: list[bytes] = []
    dropped = []

    def on_log(chunk: bytes) -> None:
        chunks.append(chunk)
        if not dropped and b"Starting to load model" in chunk:
            dropped.append(True)
            runner.follower.source.interrupt()     # as if dockerd dropped the connection

    tracker = ColdStartTracker(engine="vllm")
    launch = DockerLaunch.from_params(replay_params(replay_image, container_name, free_port), startup_budget_s=60)
    result = runner.run(launch, tracker=tracker, platform_events=False, on_log=on_log, detach=True)
    try:
        assert result.ready, result.reason
        assert dropped and result.log_reconnects >= 1
        assert b"".join(chunks).startswith(VLLM_LOG.read_bytes())   # nothing lost, nothing twice
        assert tracker.report().status == "ready"
    finally:
        runner.stop(container_name, timeout_s=2)


def test_ctrl_c_stops_and_removes_the_container(runner, replay_image, container_name, free_port):
    class InterruptWhileLoadingWeights(ProgressView):
        def update(self, elapsed_s, phase=None, line=None):
            super().update(elapsed_s, phase, line)
            if line and "Loading fastsafetensors checkpoint shards" in line:
                raise KeyboardInterrupt

    out = io.StringIO()
    launch = DockerLaunch.from_params(replay_params(replay_image, container_name, free_port, REPLAY_SPEED="20"),
                                      startup_budget_s=60)
    with pytest.raises(KeyboardInterrupt):
        runner.run(launch, progress=InterruptWhileLoadingWeights(out, tty=False))
    assert runner.find(container_name) is None
    assert f"interrupted: container {container_name} stopped and removed" in out.getvalue()


def test_attached_run_follows_after_ready_and_removes_on_exit(runner, replay_image, container_name, free_port,
                                                             docker_client):
    after_ready: list[bytes] = []
    ready = threading.Event()

    class KillAfterReady(ProgressView):
        def finish(self, message):
            super().finish(message)
            if message.startswith("Ready"):
                ready.set()
                # a request after Ready shows up in the followed log, then the engine dies
                urllib.request.urlopen(f"http://127.0.0.1:{free_port}/v1/models", timeout=5).read()
                threading.Timer(0.5, lambda: docker_client.containers.get(container_name).kill()).start()

    def on_log(chunk: bytes) -> None:
        if ready.is_set():
            after_ready.append(chunk)

    launch = DockerLaunch.from_params(replay_params(replay_image, container_name, free_port), startup_budget_s=60)
    result = runner.run(launch, on_log=on_log, progress=KillAfterReady(io.StringIO(), tty=False))
    assert result.ready
    assert result.exit_code == 137  # SIGKILL, reported once the attached container ended
    assert b'"GET /v1/models HTTP/1.1" 200' in b"".join(after_ready)
    assert runner.find(container_name) is None


def test_start_up_budget_exceeded_stops_the_container(runner, replay_image, container_name, free_port):
    launch = DockerLaunch.from_params(replay_params(replay_image, container_name, free_port, REPLAY_SPEED="1"),
                                      startup_budget_s=1.5)
    result = runner.run(launch)
    assert result.state == "timeout"
    assert "within the start-up budget of 2 s" in result.reason
    assert result.last_lines  # the engine had started printing
    assert runner.find(container_name) is None


def test_second_start_with_the_same_name_is_refused(runner, replay_image, container_name, free_port):
    launch = DockerLaunch.from_params(replay_params(replay_image, container_name, free_port), startup_budget_s=60)
    first = runner.run(launch, detach=True, wait_ready=False)
    try:
        assert first.state == "started"
        with pytest.raises(DockerRuntimeError, match=f"container '{container_name}' is already running"):
            runner.run(launch, detach=True)
    finally:
        runner.stop(container_name, timeout_s=2)
    assert runner.find(container_name) is None


def test_command_missing_in_image_is_a_clear_error(runner, replay_image, container_name, free_port):
    params = replay_params(replay_image, container_name, free_port)
    params["command"] = ["sglang-not-in-this-image", "--port", str(free_port)]
    with pytest.raises(DockerRuntimeError, match="params.command: dockerd could not start the container: .*"
                                                 "sglang-not-in-this-image"):
        runner.run(DockerLaunch.from_params(params))
    assert runner.find(container_name) is None


def test_ulimits_the_daemon_cannot_grant_are_a_clear_error(docker_client, replay_image, container_name,
                                                           free_port):
    from gpustack_k3.runtime.docker import DockerRunner, local_ulimit_caps

    unclamped = DockerRunner(docker_client, poll_s=0.1)
    launch = DockerLaunch.from_launch_spec(launch_spec(replay_image, container_name, free_port))
    if "memlock" in local_ulimit_caps():  # as on this VM: runc may not raise memlock to unlimited
        with pytest.raises(DockerRuntimeError, match=r"params.ulimits: dockerd could not apply .*memlock.*"
                                                     r"DockerRunner\(ulimit_caps=local_ulimit_caps\(\)\)"):
            unclamped.run(launch)
    else:
        result = unclamped.run(launch, detach=True)
        assert result.ready, result.reason
        unclamped.stop(container_name, timeout_s=2)
    assert unclamped.find(container_name) is None


def test_missing_image_is_a_clear_error(runner, container_name, free_port):
    launch = DockerLaunch.from_params(replay_params("gpustack-k3/not-built:0", container_name, free_port))
    with pytest.raises(DockerRuntimeError, match=r"params.image: 'gpustack-k3/not-built:0' is not in the local"):
        runner.run(launch)
    assert runner.find(container_name) is None
