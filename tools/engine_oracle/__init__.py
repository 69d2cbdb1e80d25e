"""Engine oracle: each pinned engine release's own argument-to-config validation, run on CPU, as the judge of
gpustack-k3's verdicts (README.md of this directory)."""
