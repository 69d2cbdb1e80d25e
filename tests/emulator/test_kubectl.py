"""The real kubectl (a client-go client) against the emulator: discovery, short names, server-side apply."""
import pathlib
import subprocess

import pytest

from tests.support import tiers

ROOT = pathlib.Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.tools


def test_kubectl_apply_get_delete(emu, tmp_path):
    exe = tiers.tool("kubectl", "the CI image ships it; .ci/setup_tools.sh checks for it")
    kc = emu.write_kubeconfig(str(tmp_path / "kubeconfig"))
    emu.create_namespace("llm")

    def kubectl(*args, stdin=None):
        r = subprocess.run([exe, "--kubeconfig", kc, *args], input=stdin, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        assert "Warning" not in r.stderr, r.stderr
        return r.stdout

    preset = (ROOT / "gpustack_k3/catalog/data/presets/vllm-fixed.yaml").read_text()
    assert "serverside-applied" in kubectl("apply", "--server-side", "-n", "llm", "--validate=false", "-f", "-",
                                           stdin=preset)
    assert "kimi-k3-vllm" in kubectl("get", "k3dep", "-n", "llm")
    manager = kubectl("get", "k3dep", "kimi-k3-vllm", "-n", "llm", "-o", "jsonpath={.metadata.managedFields[0].manager}")
    assert manager == "kubectl"
    assert "deleted" in kubectl("delete", "k3dep", "kimi-k3-vllm", "-n", "llm")
    assert emu.objects("k3.gpustack.ai/v1alpha1/k3deployments", "llm") == []
