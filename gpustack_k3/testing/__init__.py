"""Test fixtures shipped with the package (like ``kopf.testing``) so that ``tests/`` and ``bench/``
share them: ``k8s_emulator.K8sEmulator`` is a Kubernetes API emulator over real HTTP (kmock-based)
for the official ``kubernetes`` client (needs the test extras: kmock, aiohttp, jsonpatch);
``documents.merge`` deep-merges test documents; ``ports.free_port`` hands out a loopback port."""
