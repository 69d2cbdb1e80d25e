"""Child process of dump.py: build an engine's argument parser from an unpacked wheel and print its description,
or parse command lines with it.

  python _build.py describe ENGINE UNPACKED_DIR EXTENSIONS_JSON VERSIONS_JSON
  python _build.py parse ENGINE UNPACKED_DIR EXTENSIONS_JSON VERSIONS_JSON < argvs.json
      -> JSON list, one answer per argv: {"ok", "error", "unrecognized", "parsed"}; the engine's own parsing
         code runs (vLLM: `vllm serve` = the top-level parser's parse_args(["serve", *argv]); SGLang: the first
         steps of prepare_server_args: ConfigArgumentMerger for --config, then parse_args)

Runs in the tools venv (dump.py makes it); heavy runtime modules are stubs (gpustack_k3/oracle/engine_side/stubs.py says which and why).
The parser is built the way the engine's own entry point builds it:
- vLLM: the ``vllm serve`` subcommand (vllm/entrypoints/cli/main.py: a FlexibleArgumentParser with
  subparsers, ``ServeSubcommand.subparser_init``), on the CUDA platform class (what a B300 node resolves).
- SGLang: ``prepare_server_args`` (srt/server_args.py): ``argparse.ArgumentParser(prog="sglang serve")`` +
  ``ServerArgs.add_cli_args``.
"""
from __future__ import annotations

import io
import json
import logging
import os
import sys
import warnings
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
# the stub machinery, shared with the engine oracle's doubles (stdlib only)
STUBS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "gpustack_k3", "oracle", "engine_side")


def _quiet() -> None:
    os.environ.update({"VLLM_LOGGING_LEVEL": "ERROR", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                       "HF_HUB_OFFLINE": "1", "SGLANG_LOG_LEVEL": "error"})
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)


def typed_stub_unions(stubs) -> None:
    """``stub | Literal[...]`` as the real class would give it: a Union the parser helpers can take apart.

    A stub answers any operator with itself (stubs._StubMeta), so an annotation such as LoRAConfig.lora_dtype's
    ``torch.dtype | LoRADType`` (vllm/config/lora.py:46@0.33.0) evaluated to the bare torch.dtype stub, and vLLM's
    ``get_kwargs`` (engine/arg_utils.py ``get_type_hints`` / ``literal_to_kwargs``) found no Literal in it: the
    dump recorded ``choices: null`` where the release's parser refuses a value outside the Literal. With the real
    torch, ``torch.dtype.__or__`` is ``type.__or__`` and gives ``types.UnionType``; here the stub's ``|`` with a
    typing form (a Literal, a Union, ``None``'s type aside) hands over to that form's ``__ror__`` (a
    ``typing.Union``), so the parser sees the same members. Only in the dumper's process: the engine oracle runs
    the release itself."""
    import typing

    meta = stubs._StubMeta
    plain = dict(meta.__dict__)   # the stub's own operators (by name: the dunders are set below, not called here)

    def _typing_form(other) -> bool:
        return typing.get_origin(other) is not None and not isinstance(other, type)

    def _or(cls, other):
        return NotImplemented if _typing_form(other) else plain["__or__"](cls, other)

    def _ror(cls, other):
        return typing.Union[other, cls] if _typing_form(other) else plain["__ror__"](cls, other)

    for name, op in (("__or__", _or), ("__ror__", _ror)):
        setattr(meta, name, op)


def vllm_parsers():
    """(the top-level `vllm` parser, its `serve` subparser, the FlexibleArgumentParser class)."""
    import importlib

    import vllm.platforms as platforms

    platforms._current_platform = importlib.import_module("vllm.platforms.cuda").CudaPlatform()
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:   # 0.11.0: vllm/utils/__init__.py
        from vllm.utils import FlexibleArgumentParser
    import vllm.entrypoints.cli.serve as serve

    main = FlexibleArgumentParser(prog="vllm")
    subparsers = main.add_subparsers(required=False, dest="subparser")
    cmd = next(c for c in serve.cmd_init() if c.name == "serve")
    return main, cmd.subparser_init(subparsers), FlexibleArgumentParser


def sglang_parser():
    import argparse

    import sglang.srt.server_args as server_args

    parser = argparse.ArgumentParser(prog="sglang serve")
    server_args.ServerArgs.add_cli_args(parser)
    return parser


def build_vllm() -> dict:
    from describe import describe_parser, src_hash

    _main, parser, FlexibleArgumentParser = vllm_parsers()
    out = describe_parser(parser)
    out["built_as"] = "vllm serve (vllm/entrypoints/cli/serve.py ServeSubcommand.subparser_init)"
    out["code"] = {name: src_hash(getattr(FlexibleArgumentParser, name))
                   for name in ("parse_args", "_pull_args_from_config", "load_config_file")}
    return out


def build_sglang() -> dict:
    import sglang.srt.server_args as server_args
    from describe import describe_parser, src_hash
    from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger

    parser = sglang_parser()
    out = describe_parser(parser)
    out["built_as"] = "sglang.srt.server_args.prepare_server_args (argparse.ArgumentParser + ServerArgs.add_cli_args)"
    out["code"] = {"prepare_server_args": src_hash(server_args.prepare_server_args),
                   "ConfigArgumentMerger": src_hash(ConfigArgumentMerger)}
    return out


class _Refused(Exception):
    pass


def _raise(message):
    raise _Refused(message)


def _jsonable(value):
    import dataclasses
    import enum

    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return {"__enum__": value.name, "value": _jsonable(value.value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__dataclass__": type(value).__name__,
                **{f.name: _jsonable(getattr(value, f.name, None)) for f in dataclasses.fields(value)}}
    return str(value)


def parse_all(engine: str, argvs: list) -> list:
    """Each argv parsed by the engine's own code; a refusal is whatever it raises (argparse's error included)."""
    if engine == "vllm":
        main, serve_parser, _ = vllm_parsers()
        main.error = serve_parser.error = _raise

        def run(argv):
            return main.parse_args(["serve", *argv])
    else:
        from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger

        parser = sglang_parser()
        parser.error = _raise

        def run(argv):
            if "--config" in argv:
                argv = ConfigArgumentMerger(parser).merge_config_with_args(argv)
            return parser.parse_args(argv)
    out = []
    for argv in argvs:
        try:
            ns = run(list(argv))
        except _Refused as exc:
            msg = str(exc)
            # argparse joins the leftover tokens with spaces (a token may hold spaces, or be empty)
            unrec = msg.split(": ", 1)[1] if msg.startswith("unrecognized arguments:") else None
            out.append({"ok": False, "error": msg, "unrecognized": [], "unrecognized_text": unrec})
        except SystemExit as exc:
            out.append({"ok": False, "error": f"exited ({exc.code}): --help or --version", "unrecognized": []})
        except Exception as exc:  # noqa: BLE001 - the engine's own raises are refusals too
            out.append({"ok": False, "error": f"{type(exc).__name__}: {exc}", "unrecognized": []})
        else:
            out.append({"ok": True, "error": None, "unrecognized": [],
                        "parsed": {k: _jsonable(v) for k, v in sorted(vars(ns).items())}})
    return out


def main() -> int:
    mode, engine, unpacked = sys.argv[1], sys.argv[2], sys.argv[3]
    extensions, versions = json.loads(sys.argv[4]), json.loads(sys.argv[5])
    _quiet()
    sys.path.insert(0, HERE)
    sys.path.insert(1, STUBS)
    import stubs  # gpustack_k3/oracle/engine_side/stubs.py

    finder = stubs.install(set(extensions), versions)
    typed_stub_unions(stubs)
    sys.path.insert(1, unpacked)
    if mode == "parse":
        argvs = json.load(sys.stdin)
        with redirect_stdout(io.StringIO()):
            answers = parse_all(engine, argvs)
        json.dump(answers, sys.stdout)
        return 0
    with redirect_stdout(io.StringIO()):   # the engine's import-time prints must not mix with the JSON
        desc = build_vllm() if engine == "vllm" else build_sglang()
    if finder.report.catch_all and finder.report.missing:
        print(f"missing modules (stubbed by ENGINE_PARSERS_CATCH_ALL): {sorted(finder.report.missing)}", file=sys.stderr)
    desc["stubbed"] = sorted(finder.used)
    desc["absent"] = sorted(finder.report.missing)   # optional imports that raised ImportError, as without them
    json.dump(desc, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
