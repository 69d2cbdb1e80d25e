"""The declarative API: the deployment document (CLI files and the Kubernetes custom resource alike)."""
