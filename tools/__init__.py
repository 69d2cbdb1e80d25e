"""Repository tooling (generators, golden writers): not part of the installed package, like LWS's hack/."""
