import pytest


@pytest.fixture(scope="session", autouse=True)
def prefect_harness():
    """One temporary Prefect API for every flow test (starting one costs seconds)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
