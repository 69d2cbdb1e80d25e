import pytest

from tests.support.k8s_emulator import K8sEmulator, Resource

# A custom resource without a schema: the generic CRUD, watch and fault tests use it, so that what they store
# is what they wrote (our K3Deployment is pruned and type-checked against its CRD, tested on its own).
WIDGET = Resource("example.com", "v1", "widgets", "Widget", subresources=frozenset({"status"}), shortnames=("wd",),
                  custom=True)


@pytest.fixture
def emu():
    with K8sEmulator() as e:
        e.add_resource(WIDGET)
        yield e


@pytest.fixture
def api(emu):
    client = emu.api_client()
    yield client
    client.close()
