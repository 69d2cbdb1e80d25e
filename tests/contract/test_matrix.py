"""issue 23 item 11: one contract for every command, checked as a matrix.

Every command x every preset and example spec x hostile inputs (empty, binary, huge, wrong types, conflicting
options, unreachable servers) x every output format. For each run:

* the exit code is one the command documents (0, 1, 2; 130 only for Ctrl-C, never seen here);
* under ``-o json`` stdout is exactly one JSON document (data on 0, the error/refusal object on 1 and 2, with
  ``exit_code`` equal to the exit code), under ``-o yaml`` one YAML document;
* no traceback and no "internal error" anywhere;
* ``render --out``: nothing partial or stale (a failed render leaves the directory as it was, no staging or
  backup folders are left beside it, a successful one holds exactly the render's files).

Commands run in-process through the CLI's own entry point (``gpustack_k3.cli.main.run``), so the whole matrix
takes well under two minutes on 2 cores; the cross product of the big axes is a fixed-seed sample (every
command, every input and every format each appear), and hypothesis throws arbitrary bytes at the readers.
"""
from __future__ import annotations

import io
import json
import os
import random
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustack_k3.catalog import load_catalog
from gpustack_k3.cli.main import run

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted((REPO / "tests" / "render" / "fixtures" / "specs").glob("*.yaml"))
PRESETS = sorted(load_catalog().presets)
FORMATS = ("text", "json", "yaml")
DOCUMENTED = {0, 1, 2}
UNREACHABLE = "http://127.0.0.1:9"      # discard port: connection refused at once
LOG = REPO / "tests" / "fixtures" / "logs" / "vllm-0.8.5-tp2-ready.log"


def hostile_files(tmp: Path) -> dict[str, str]:
    """name -> path of each hostile input (spec readers)."""
    files = {
        "empty": b"",
        "binary": bytes(range(256)) * 4,
        "utf16": "apiVersion: x\n".encode("utf-16"),
        "huge": b"# " + b"x" * (1 << 20) + b"\n",
        "wrong-type-scalar": b"5\n",
        "wrong-type-list": b"- a\n- b\n",
        "wrong-type-field": b"apiVersion: k3.gpustack.ai/v1alpha1\nkind: K3Deployment\nmetadata: {name: x}\n"
                            b"spec: {engine: {name: vllm}, parallel: {tp: eight}}\n",
        "two-docs": b"a: 1\n---\nb: 2\n",
        "alias-bomb": b"a: &a [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(
            f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n".encode()
            for p, c in zip("abcdefgh", "bcdefghi")),
        "bad-yaml": b"spec: [unclosed\n",
    }
    out = {}
    for name, data in files.items():
        p = tmp / f"{name}.yaml"
        p.write_bytes(data)
        out[name] = str(p)
    out["missing"] = str(tmp / "no-such-file.yaml")
    out["directory"] = str(tmp)
    return out


def invoke(argv: list[str], capsysbinary, stdin: bytes = b"") -> tuple[int, str, str]:
    old = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        code = run(argv)
    finally:
        sys.stdin = old
    out = capsysbinary.readouterr()
    return code, out.out.decode("utf-8", "replace"), out.err.decode("utf-8", "replace")


def check(argv: list[str], code: int, out: str, err: str, fmt: str) -> None:
    where = " ".join(argv)[:300]
    assert code in DOCUMENTED, f"{where}: exit {code}\n{err[-2000:]}"
    for stream in (out, err):
        assert "Traceback" not in stream and "internal error" not in stream, f"{where}:\n{stream[-3000:]}"
    if fmt == "json":
        try:
            data = json.loads(out)
        except ValueError as exc:
            raise AssertionError(f"{where}: exit {code}, stdout is not JSON ({exc}):\n{out[:1500]}\n{err[-1500:]}")
        if code != 0 and isinstance(data, dict) and "exit_code" in data:
            assert data["exit_code"] == code and data.get("ok", False) is False, where
        if code == 2:
            assert isinstance(data, dict) and data.get("exit_code") == 2, f"{where}: {out[:800]}"
    elif fmt == "yaml":
        try:
            docs = [d for d in yaml.safe_load_all(out)]
        except yaml.YAMLError as exc:
            raise AssertionError(f"{where}: exit {code}, stdout is not YAML ({exc}):\n{out[:1500]}")
        if code == 2:
            assert docs and isinstance(docs[0], dict) and docs[0].get("exit_code") == 2, f"{where}: {out[:800]}"


# ---------------------------------------------------------------------------------------------- the commands

def spec_commands(src: list[str]) -> dict[str, list[str]]:
    """Every command that reads a deployment document, given ``src`` (a path, ``-`` or ``--preset N``)."""
    return {
        "validate": ["validate", *src],
        "dry-run": ["dry-run", *src],
        "plan": ["plan", *src],
        "render": ["render", *src],
        "render-kubernetes": ["render", *src, "--target", "kubernetes"],
        "render-gpustack": ["render", *src, "--target", "gpustack"],
        "render-docker": ["render", *src, "--target", "docker"],
        "render-launch": ["render", *src, "--target", "launch"],
        "render-argv": ["render", *src, "--target", "argv"],
        "run-docker": ["run", "start", *src, "--dry-run"],
        "run-local": ["run", "start", *src, "--runtime", "local", "--dry-run"],
        "gpustack-apply": ["gpustack", "apply", *src, "--server", UNREACHABLE, "--dry-run"],
        "coldstart-spec": ["coldstart", str(LOG), "--year", "2026", "--spec" if src[0] != "--preset" else "--preset",
                           src[-1]],
    }


OTHER = {
    "explain": ["explain"],
    "explain-unknown": ["explain", "no-such-rule"],
    "explain-rule": ["explain", "unknown-catalog-entry"],
    "presets": ["presets"],
    "presets-show": ["presets", "--show", "vllm-fixed"],
    "presets-show-unknown": ["presets", "--show", "nope"],
    "crd": ["crd"],
    "crd-rules": ["crd", "--rules"],
    "advise": ["advise", "--context", "131072", "--concurrency", "64"],
    "advise-wrong-type": ["advise", "--context", "lots", "--concurrency", "64"],
    "advise-too-long": ["advise", "--context", "999999999", "--concurrency", "1"],
    "check-args": ["check-args", "--engine", "vllm", "--", "vllm", "serve", "/models/x", "-tp", "8"],
    "check-args-refused": ["check-args", "--engine", "vllm", "--", "vllm", "serve", "/models/x", "--no-such-flag"],
    "check-args-empty": ["check-args", "--engine", "vllm", "--"],
    "check-args-binary": ["check-args", "--engine", "vllm", "--", "\udcff\x00", "--seed", "\x01"],
    "check-args-wrong-type": ["check-args", "--engine", "vllm", "--gpus", "many", "--", "vllm", "serve", "/m/x"],
    "check-args-bad-version": ["check-args", "--engine", "vllm", "--engine-version", "9.9", "--", "vllm", "serve"],
    "import": ["import", "--engine", "vllm", "--", "vllm", "serve", "moonshotai/Kimi-K3", "-tp", "8"],
    "import-refused": ["import", "--engine", "sglang", "--", "--no-such-flag"],
    "check-pd": ["check-pd", "--engine", "vllm", "--prefill", "vllm serve /m/x -tp 8", "--decode", "vllm serve /m/x"],
    "check-pd-unquoted": ["check-pd", "--engine", "vllm", "--prefill", "vllm serve '", "--decode", "x"],
    "check-pd-empty": ["check-pd", "--engine", "vllm", "--prefill", "", "--decode", ""],
    "coldstart": ["coldstart", str(LOG), "--year", "2026"],
    "doctor": ["doctor", str(LOG)],
    "gpustack-status": ["gpustack", "status", "m", "--server", UNREACHABLE],
    "gpustack-delete": ["gpustack", "delete", "m", "--server", UNREACHABLE],
    "probe-unreachable": ["probe", UNREACHABLE, "--requests", "1", "--concurrency", "1", "--warmup", "0",
                          "--timeout", "2"],
    "probe-bad-url": ["probe", "not a url"],
    "conflicting-spec-and-preset": ["validate", str(SPECS[0]), "--preset", "vllm-fixed"],
    "conflicting-neither": ["render"],
    "unknown-option": ["render", "--preset", "vllm-fixed", "--no-such-option"],
    "unknown-command": ["no-such-command"],
    "bad-choice": ["render", "--preset", "vllm-fixed", "--target", "nowhere"],
    "render-format-mismatch": ["render", "--preset", "vllm-fixed", "--target", "kubernetes", "-o", "shell"],
    "fail-on-bad": ["validate", "--preset", "vllm-fixed", "--fail-on", "info"],
}


def with_format(argv: list[str], fmt: str) -> list[str]:
    """Insert ``-o fmt`` before a ``--`` (engine argv) or at the end."""
    if "--" in argv:
        i = argv.index("--")
        return [*argv[:i], "-o", fmt, *argv[i:]]
    return [*argv, "-o", fmt]


def matrix(tmp: Path) -> list[tuple[str, list[str]]]:
    """(id, argv) of every command x every input: presets, example specs, hostile files, stdin."""
    cases = []
    sources = [[("--preset"), p] for p in PRESETS] + [[str(s)] for s in SPECS]
    sources += [[path] for path in hostile_files(tmp).values()]
    for src in sources:
        for name, argv in spec_commands(src).items():
            cases.append((f"{name}:{src[-1]}", argv))
    return cases + [(k, v) for k, v in OTHER.items()]


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("GPUSTACK_API_KEY", "not-a-key")
    monkeypatch.setenv("GPUSTACK_K3_HTTP_ATTEMPTS", "1")


def test_every_command_every_input_every_format(tmp_path, capsysbinary):
    """Each (command, input) pair in every format would be ~1,900 runs; a fixed-seed sample keeps every pair
    in one format (rotated) and every pair whose command does something cheap in all three."""
    rng = random.Random(23)
    cases = matrix(tmp_path)
    runs = 0
    for i, (name, argv) in enumerate(cases):
        formats = FORMATS if (name in OTHER or rng.random() < 0.15) else (FORMATS[i % 3],)
        for fmt in formats:
            full = with_format(argv, fmt)
            code, out, err = invoke(full, capsysbinary)
            check(full, code, out, err, fmt)
            runs += 1
    assert runs > 300


@pytest.mark.parametrize("fmt", FORMATS)
def test_stdin_inputs(capsysbinary, fmt):
    for data in (b"", b"\x00\x01\x02", b"not: [yaml", (REPO / "tests/render/fixtures/specs" / SPECS[0].name).read_bytes()):
        for argv in (["validate", "-"], ["render", "-", "--target", "argv"], ["coldstart", "-"]):
            full = with_format(argv, fmt)
            code, out, err = invoke(full, capsysbinary, stdin=data)
            check(full, code, out, err, fmt)


# ------------------------------------------------------------------------------------- no partial, no stale

def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("fmt", FORMATS)
def test_render_out_is_never_partial_or_stale(tmp_path, capsysbinary, fmt):
    out = tmp_path / "out"
    bad = hostile_files(tmp_path / "in" if (tmp_path / "in").mkdir() is None else tmp_path)
    sources = [["--preset", p] for p in PRESETS] + [[str(s)] for s in SPECS] + [[p] for p in bad.values()]
    rng = random.Random(2300 + FORMATS.index(fmt))
    rng.shuffle(sources)
    for src in sources[:12]:
        target = rng.choice(["all", "kubernetes", "argv", "docker", "gpustack", "launch"])
        before = _tree(out) if out.exists() else None
        argv = ["render", *src, "--target", target, "--out", str(out), "-o", fmt]
        code, o, e = invoke(argv, capsysbinary)
        check(argv, code, o, e, fmt)
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [], "staging left behind"
        if code == 0:
            files = set(_tree(out)) - {".gpustack-k3-render"}
            shown = {Path(line.split(" ", 1)[1]).relative_to(out).as_posix()
                     for line in e.splitlines() if line.startswith("wrote ")}
            assert files == shown, (argv, files ^ shown)      # exactly this render's files: nothing stale
            for f in files:
                if f.endswith(".sh"):
                    assert os.access(out / f, os.X_OK) and (out / f).read_text().startswith("#!")
        else:
            assert (_tree(out) if out.exists() else None) == before, argv   # a failure changes nothing


# ------------------------------------------------------------------------------------- property-based readers

@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode),
                      st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                                   lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c,
                                                                                       max_size=3),
                                   max_leaves=12).map(lambda v: yaml.safe_dump({"apiVersion": "k3.gpustack.ai/v1alpha1",
                                                                                 "kind": "K3Deployment",
                                                                                 "metadata": {"name": "x"},
                                                                                 "spec": v}).encode())),
       fmt=st.sampled_from(FORMATS),
       cmd=st.sampled_from([["validate", "-"], ["render", "-", "--target", "docker"], ["dry-run", "-"],
                            ["coldstart", "-"], ["doctor", "-"], ["run", "start", "-", "--dry-run"]]))
def test_arbitrary_bytes_never_break_the_contract(capsysbinary, data, fmt, cmd):
    full = with_format(cmd, fmt)
    code, out, err = invoke(full, capsysbinary, stdin=data)
    check(full, code, out, err, fmt)


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tokens=st.lists(st.one_of(st.sampled_from(["-tp", "8", "--seed", "--max-model-len", "1M", "--dtype", "=",
                                                  "--kv-transfer-config", "{", "--config", "-O3", "--no-enable-x"]),
                                 st.text(max_size=10)), max_size=12),
       fmt=st.sampled_from(FORMATS), cmd=st.sampled_from(["check-args", "import", "plan"]))
def test_arbitrary_engine_argv_never_breaks_the_contract(capsysbinary, tokens, fmt, cmd):
    full = [cmd, "--engine", "vllm", "-o", fmt, "--", "vllm", "serve", "/models/x", *tokens]
    code, out, err = invoke(full, capsysbinary)
    check(full, code, out, err, fmt)


def test_operator_with_an_unreachable_api_server_is_one_line_exit_2(tmp_path):
    """The operator reading an API server that refuses connections: a one-line message, exit 2 (no "internal
    error ... please report", no traceback). A subprocess: the operator installs signal handlers."""
    import subprocess

    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": UNREACHABLE}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    p = subprocess.run([sys.executable, "-m", "gpustack_k3", "operator", "run", "--kubeconfig", str(kc),
                        "--metrics-port", "0", "--metrics-host", "127.0.0.1"], capture_output=True, text=True,
                       timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 2, p.stderr[-2000:]
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "cannot reach the server" in errors[0], p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr


# ------------------------------------------------------------------------------------- what a server may answer

class _Answers:
    """A loopback HTTP server answering every request with one (status, content type, body): what a GPUStack URL
    may give when it is not GPUStack's API (a login page, a truncated answer, JSON of the wrong shape)."""

    def __init__(self) -> None:
        import http.server
        import threading

        self.answer = (200, "application/json", b"{}")
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                status, ctype, body = outer.answer
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture(scope="module")
def answers():
    srv = _Answers()
    try:
        yield srv
    finally:
        srv.close()


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(
                         st.sampled_from(["items", "pagination", "totalPage", "id", "name", "state", "replicas",
                                          "ready_replicas", "message", "detail", "model_id", "worker_name"]) |
                         st.text(max_size=6), c, max_size=4),
                     max_leaves=14)
_BODIES = st.one_of(
    st.just(b"<!doctype html><html><body><form action=/login>sign in</form></body></html>"),
    _JSON.map(lambda v: json.dumps(v).encode()),
    _JSON.map(lambda v: json.dumps(v).encode()).flatmap(
        lambda b: st.integers(0, max(0, len(b) - 1)).map(lambda n: b[:n])),          # truncated JSON
    _JSON.map(lambda v: json.dumps({"items": [v], "pagination": {"totalPage": 1}}).encode()),   # wrong item types
    st.binary(max_size=60),
)


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(status=st.sampled_from([200, 200, 200, 201, 204, 302, 400, 401, 404, 409, 422, 500]),
       ctype=st.sampled_from(["application/json", "text/html; charset=utf-8"]), body=_BODIES,
       fmt=st.sampled_from(FORMATS),
       cmd=st.sampled_from([["gpustack", "status", "kimi"], ["gpustack", "status", "kimi", "--cluster", "c"],
                            ["gpustack", "delete", "kimi"],
                            ["gpustack", "apply", "--preset", "vllm-fixed", "--dry-run"],
                            ["gpustack", "apply", "--preset", "vllm-fixed"]]))
def test_any_server_answer_never_breaks_the_contract(capsysbinary, answers, status, ctype, body, fmt, cmd):
    """Issue 33 item 6: whatever a GPUStack URL answers, the command ends as 0, 1 or 2 with one ``error:`` line on a
    failure (never exit 3 or "internal error"), and one JSON object under -o json."""
    answers.answer = (status, ctype, body)
    full = [*cmd, "--server", answers.url, "-o", fmt]
    code, out, err = invoke(full, capsysbinary)
    check(full, code, out, err, fmt)
    if code == 2:
        assert len([ln for ln in err.splitlines() if ln.startswith("error:")]) == 1, err


def test_a_login_page_for_an_api_is_exit_2_naming_the_server(capsysbinary, answers):
    answers.answer = (200, "text/html", b"<html><body>Please sign in</body></html>")
    for cmd in (["gpustack", "status", "kimi"], ["gpustack", "apply", "--preset", "vllm-fixed", "--dry-run"]):
        code, out, err = invoke([*cmd, "--server", answers.url, "-o", "json"], capsysbinary)
        assert code == 2, err
        obj = json.loads(out)
        assert obj["exit_code"] == 2 and obj["error"]["kind"] == "operational", obj
        assert answers.url in obj["error"]["message"] and "internal error" not in err, obj
