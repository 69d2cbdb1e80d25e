"""What runs inside an engine release's interpreter (the CPU torch venv, ``python -I worker.py``): the worker, the
doubles of GPU-only answers, the import stubs (shared with tools/engine_parsers' parser dumps) and the NIXL pair
comparison. Standard library and the release only: nothing here imports gpustack_k3, and the modules import each
other as top-level modules (this directory is put on sys.path by worker.py)."""
