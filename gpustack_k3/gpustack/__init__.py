"""GPUStack 2.3.0 integration: HTTP client, apply/status/delete, the `gpustack` click group (cli.py)."""
