"""A command line is judged as the engine runs it (issue 31 item 7): the layout rules of the documents we render
(the model volume mounted at the path's parent directory) never turn check-args / check-pd into unusable input."""
from __future__ import annotations

import json

from click.testing import CliRunner

from gpustack_k3.cli.main import cli


def _run(*args: str):
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return res.exit_code, res.output


def test_check_args_and_check_pd_accept_a_model_path_at_the_root():
    code, out = _run("check-args", "--engine", "sglang", "-o", "json", "--", "--model-path", "/m", "--tp-size", "8")
    assert code in (0, 1) and "mount point" not in out, out
    json.loads(out)
    code, out = _run("check-pd", "--engine", "sglang", "-o", "json",
                     "--prefill", "--model-path /m --tp-size 8 --disaggregation-mode prefill",
                     "--decode", "--model-path /m --tp-size 8 --disaggregation-mode decode")
    assert code in (0, 1) and "mount point" not in out, out
    json.loads(out)


def test_a_document_we_render_keeps_the_layout_rule():
    code, out = _run("import", "--engine", "sglang", "--", "--model-path", "/m", "--tp-size", "8")
    assert code == 2 and "mount point" in out, out
