import pytest

from tests.support.k8s_emulator import K8sEmulator


@pytest.fixture
def emu():
    with K8sEmulator() as e:
        yield e


@pytest.fixture
def api(emu):
    client = emu.api_client()
    yield client
    client.close()
