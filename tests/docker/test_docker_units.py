"""Pure parts of the Docker tier: run-param preparation, log tails, the progress view, the replay
engine's schedule. No dockerd needed (no ``docker`` marker)."""
from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import pytest

from gpustack_k3.runtime.docker import (
    HEALTH_PATH_LABEL,
    INSTANCE_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    PORT_LABEL,
    DockerLaunch,
    DockerRuntimeError,
    LineTail,
    port_from_argv,
    prepare_params,
)
from gpustack_k3.runtime.progress import ProgressView, clean_line, format_elapsed

REPLAY_DIR = Path(__file__).resolve().parent / "images" / "replay-engine"


def _replay_module():
    spec = importlib.util.spec_from_file_location("replay_engine", REPLAY_DIR / "replay_engine.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def launch(**kw) -> DockerLaunch:
    params = {"image": "img:1", "name": "k3", "command": ["vllm", "serve", "m", "--port", "8123"], **kw.pop("params", {})}
    return DockerLaunch.from_params(params, **kw)


# -- prepare_params ---------------------------------------------------------------------------

def test_labels_network_and_port_are_added():
    params, notes = prepare_params(launch(params={"labels": {"team": "x"}}), host_has_gpus=False)
    assert params["labels"] == {"team": "x", MANAGED_BY_LABEL: MANAGED_BY, INSTANCE_LABEL: "k3",
                                PORT_LABEL: "8123", HEALTH_PATH_LABEL: "/health"}
    assert params["network_mode"] == "host"
    assert notes == []


def test_gpu_requests_only_when_the_host_has_gpus():
    from docker.types import DeviceRequest

    with_gpus, notes = prepare_params(launch(gpu_count=8), host_has_gpus=True)
    (req,) = with_gpus["device_requests"]
    assert isinstance(req, DeviceRequest) and req["Count"] == 8 and req["Capabilities"] == [["gpu"]]
    assert notes == []
    given = [DeviceRequest(device_ids=["0", "1"], capabilities=[["gpu"]])]
    kept, _ = prepare_params(launch(gpu_count=2, params={"device_requests": given}), host_has_gpus=True)
    assert kept["device_requests"] == given

    without, notes = prepare_params(launch(gpu_count=8, params={"device_requests": given}), host_has_gpus=False)
    assert "device_requests" not in without
    assert notes and notes[0].startswith("GPU request dropped: the launch asks for 8 GPU(s)")
    cpu_only, notes = prepare_params(launch(gpu_count=0), host_has_gpus=True)
    assert "device_requests" not in cpu_only and notes == []


def test_default_bridge_is_refused_and_run_only_args_dropped():
    with pytest.raises(DockerRuntimeError, match="params.network_mode: 'bridge' is docker's default bridge"):
        prepare_params(launch(params={"network_mode": "bridge"}), host_has_gpus=False)
    params, _ = prepare_params(launch(params={"network_mode": "none", "detach": True, "remove": True}),
                               host_has_gpus=False)
    assert params["network_mode"] == "none" and "detach" not in params and "remove" not in params


@pytest.mark.parametrize("params, kw, message", [
    ({"image": "", "name": "a", "command": ["x"]}, {"port": 1}, "params.image: no image given"),
    ({"image": "i", "name": "a", "command": "vllm serve m"}, {"port": 1}, "params.command: must be a list"),
    ({"image": "i", "name": "a", "command": ["vllm", "serve"]}, {}, "port: not given and no --port"),
    ({"image": "i", "name": "a", "command": ["x"]}, {"port": 70000}, r"port: 70000 is not a TCP port"),
    ({"image": "i", "command": ["x"]}, {"port": 1}, "name: the container needs a name"),
    ({"image": "i", "name": "a", "command": ["x"]}, {"port": 1, "health_path": "health"}, "health_path: 'health'"),
])
def test_bad_launch_input_names_the_field(params, kw, message):
    with pytest.raises(DockerRuntimeError, match=message):
        DockerLaunch.from_params(params, **kw)


def test_ulimits_are_clamped_only_to_given_caps():
    asked = [{"name": "memlock", "soft": -1, "hard": -1}, {"name": "stack", "soft": 67108864, "hard": 67108864},
             {"Name": "nofile", "Soft": 1024, "Hard": 4096}]
    params, notes = prepare_params(launch(params={"ulimits": asked}), host_has_gpus=False,
                                   ulimit_caps={"memlock": 8388608, "nofile": 2048})
    assert params["ulimits"] == [{"name": "memlock", "soft": 8388608, "hard": 8388608},
                                 {"name": "stack", "soft": 67108864, "hard": 67108864},
                                 {"name": "nofile", "soft": 1024, "hard": 2048}]
    assert [n.split(" clamped")[0] for n in notes] == ["ulimit memlock", "ulimit nofile"]
    untouched, notes = prepare_params(launch(params={"ulimits": asked}), host_has_gpus=False)
    assert untouched["ulimits"] == asked and notes == []


def test_port_from_argv():
    assert port_from_argv(["vllm", "serve", "m", "--port", "9000"]) == 9000
    assert port_from_argv(["--port=31000"]) == 31000
    assert port_from_argv(["--port"]) is None and port_from_argv([]) is None


# -- LineTail -------------------------------------------------------------------------------------

def test_line_tail_joins_split_chunks_and_splits_carriage_returns():
    tail = LineTail(maxlen=3)
    assert tail.feed(b"first li") == []
    assert tail.feed(b"ne\nbar 10%\rbar 50%\r") == ["first line", "bar 10%", "bar 50%"]
    assert tail.feed(b"\xff broken utf8\nlast") == ["\ufffd broken utf8"]
    assert list(tail.lines) == ["bar 10%", "bar 50%", "\ufffd broken utf8"]
    assert tail.flush() == ["last"] and tail.flush() == []


# -- progress view --------------------------------------------------------------------------------

def test_plain_progress_prints_on_phase_change_and_heartbeat_only():
    out = io.StringIO()
    view = ProgressView(out, tty=False, heartbeat_s=3600)
    view.update(0.5, "process_start", "vLLM server version 0.33.0")
    view.update(1.0, "process_start", "another line")          # same phase, before the heartbeat: silent
    view.update(75.0, "weights_load", "Loading safetensors 8%")
    view.finish("Ready: k3 answered")
    assert out.getvalue().splitlines() == [
        "[00:00] process_start  | vLLM server version 0.33.0",
        "[01:15] weights_load  | Loading safetensors 8%",
        "Ready: k3 answered",
    ]
    beat = io.StringIO()
    view = ProgressView(beat, tty=False, heartbeat_s=0)
    view.update(1, "compile", "a")
    view.update(2, "compile", "b")
    assert len(beat.getvalue().splitlines()) == 2


def test_tty_progress_redraws_one_line_within_the_width():
    out = io.StringIO()
    view = ProgressView(out, tty=True, width=40, min_redraw_s=0)
    view.update(3723, "cuda_graphs", "\x1b[32mCapturing CUDA graphs (mixed prefill-decode, PIECEWISE): 25%\x1b[0m")
    frames = out.getvalue().split("\r\x1b[2K")[1:]
    assert len(frames) == 1 and "\n" not in frames[0]
    assert frames[0].endswith("…") and len(frames[0]) <= 39
    assert "1:02:03  cuda_graphs  | Capturing" in frames[0] and "\x1b[32m" not in frames[0]
    view.finish("Failed: exit 1")
    assert out.getvalue().endswith("\r\x1b[2KFailed: exit 1\n")


def test_format_helpers():
    assert format_elapsed(0) == "00:00" and format_elapsed(59.9) == "00:59" and format_elapsed(3600) == "1:00:00"
    assert clean_line("\x1b[1;31mERROR\x1b[0m\tboom\x07 ") == "ERROR boom"


# -- replay engine (the script baked into the test image) ----------------------------------------

def test_replay_schedule_keeps_the_recorded_timeline():
    replay = _replay_module()
    lines = (REPLAY_DIR / "logs" / "vllm-0.33-kimi-k3-8xb300.log").read_text().splitlines()
    offsets = replay.schedule(lines)
    assert offsets == sorted(offsets) and offsets[0] == 0
    first = replay.line_time(lines[0])
    last_stamped = max(t for t in map(replay.line_time, lines) if t is not None)
    assert offsets[-1] == last_stamped - first  # trailing untimestamped lines take the last time
    i = next(k for k, x in enumerate(lines) if "Loading weights took 163.80" in x)
    j = next(k for k, x in enumerate(lines) if "Starting to load model" in x)
    assert offsets[i] - offsets[j] == pytest.approx(164, abs=1)  # 17:06:58 → 17:09:42
    shard_lines = [k for k, x in enumerate(lines) if "checkpoint shards" in x]
    assert all(offsets[j] < offsets[k] < offsets[i] for k in shard_lines)


def test_replay_reads_engine_style_arguments():
    replay = _replay_module()
    got = replay.parse_args(["serve", "/models/K", "--tensor-parallel-size", "8", "--host", "127.0.0.1",
                             "--port=9001", "--served-model-name", "kimi-k3", "--trust-remote-code"])
    assert got == {"host": "127.0.0.1", "port": 9001, "model": "/models/K", "served": "kimi-k3"}
    assert replay.parse_args(["--model", "m"])["served"] == "m"
    sg = replay.line_time("[2026-11-27 18:01:45.250 TP0] Load weight begin. avail mem=262.1 GB")
    assert sg - replay.line_time("[2026-11-27 18:01:44 TP0] x") == pytest.approx(1.25)
