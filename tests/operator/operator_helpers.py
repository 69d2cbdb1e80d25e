"""Shared helpers of the operator tests (a uniquely named module: `conftest` is not importable
reliably when several test folders have one)."""
import time

G, V, P = "k3.gpustack.ai", "v1alpha1", "k3deployments"
NS = "llm"


def wait_for(fn, timeout=15.0, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # not there yet
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")


def k3(name, **spec):
    return {"apiVersion": f"{G}/{V}", "kind": "K3Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"engine": {"name": "vllm"}, **spec}}
