"""The declarative API: the deployment document (CLI files and the Kubernetes custom resource alike).

One version today, ``v1alpha1`` (``gpustack_k3.api.v1alpha1``); import from there.
"""
