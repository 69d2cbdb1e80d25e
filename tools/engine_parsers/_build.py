"""Child process of dump.py: build an engine's argument parser from an unpacked wheel and print its description.

  python _build.py ENGINE UNPACKED_DIR EXTENSIONS_JSON VERSIONS_JSON

Runs in the tools venv (dump.py makes it); heavy runtime modules are stubs (stubs.py says which and why).
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


def _quiet() -> None:
    os.environ.update({"VLLM_LOGGING_LEVEL": "ERROR", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                       "HF_HUB_OFFLINE": "1", "SGLANG_LOG_LEVEL": "error"})
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)


def build_vllm() -> dict:
    import importlib

    import vllm.platforms as platforms

    platforms._current_platform = importlib.import_module("vllm.platforms.cuda").CudaPlatform()
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:   # 0.11.0: vllm/utils/__init__.py
        from vllm.utils import FlexibleArgumentParser
    import vllm.entrypoints.cli.serve as serve
    from describe import describe_parser, src_hash

    main = FlexibleArgumentParser(prog="vllm")
    subparsers = main.add_subparsers(required=False, dest="subparser")
    cmd = next(c for c in serve.cmd_init() if c.name == "serve")
    parser = cmd.subparser_init(subparsers)
    out = describe_parser(parser)
    out["built_as"] = "vllm serve (vllm/entrypoints/cli/serve.py ServeSubcommand.subparser_init)"
    out["code"] = {name: src_hash(getattr(FlexibleArgumentParser, name))
                   for name in ("parse_args", "_pull_args_from_config", "load_config_file")}
    return out


def build_sglang() -> dict:
    import argparse

    import sglang.srt.server_args as server_args
    from describe import describe_parser, src_hash
    from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger

    parser = argparse.ArgumentParser(prog="sglang serve")
    server_args.ServerArgs.add_cli_args(parser)
    out = describe_parser(parser)
    out["built_as"] = "sglang.srt.server_args.prepare_server_args (argparse.ArgumentParser + ServerArgs.add_cli_args)"
    out["code"] = {"prepare_server_args": src_hash(server_args.prepare_server_args),
                   "ConfigArgumentMerger": src_hash(ConfigArgumentMerger)}
    return out


def main() -> int:
    engine, unpacked, extensions, versions = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
    _quiet()
    sys.path.insert(0, HERE)
    import stubs

    finder = stubs.install(set(extensions), versions)
    sys.path.insert(1, unpacked)
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
