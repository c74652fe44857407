import os

import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import wgraph as wg  # noqa: E402


@pytest.fixture(scope="session")
def dev():
    """One device for the whole run (device creation costs ~0.5 s on lavapipe)."""
    return wg.default_device()


@pytest.fixture
def rng():
    import numpy as np

    return np.random.default_rng(1234)
