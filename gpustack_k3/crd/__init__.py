"""The ``K3Deployment`` CRD: structural schema from the pydantic model, CEL rules from the catalog.

Import the submodules (``gpustack_k3.crd.manifest``, ``.cel``, ``.schema``, ``.celeval``); this
package module stays import-light so the CLI starts fast.
"""
