import gc

import pytest

import wgraph as wg  # sets a private XDG_RUNTIME_DIR when none is set (wgraph/process_setup.py)


COMPILE_ALL_FIRST = "test_registry.py::test_package_registry_compiles_on_device"


def pytest_collection_modifyitems(session, config, items):
    """The test that compiles every shipped variant (PipelineCache.warm: side by side, a thread a core) runs first
    when it is collected: most of the suite's time on lavapipe is compiling pipelines, and the tests that run
    kernels then find theirs in the session device's cache instead of compiling them one at a time. Nothing else
    moves, and no test may depend on a pipeline not being compiled yet (the alphabetical order already ran most
    tests after it)."""
    first = [item for item in items if item.nodeid.endswith(COMPILE_ALL_FIRST)]
    if first:
        items[:] = first + [item for item in items if item not in first]


def pytest_collection_finish(session):
    _freeze_what_lives()


def _freeze_what_lives():
    """Move every object alive now into the collector's permanent generation (gc.freeze): the session's objects
    (test modules, the registry's ~500 kernels, the device) are not scanned again by each full collection, of
    which a run makes ~90 (the bench sections' own gc.collect() before each timing among them: ~0.15 s each
    over the whole heap). Objects made later are collected as before."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def dev():
    """One device for the whole run (device creation costs ~0.5 s on lavapipe)."""
    from wgraph.kernels.registry import registry

    device = wg.default_device()
    registry()  # loaded once a process by the first op anyway: frozen with the device
    _freeze_what_lives()
    return device


@pytest.fixture(autouse=True)
def _nothing_pending_from_before(request):
    """A test using the session device starts with its pending list empty: an immediate op another test left
    unread (kv_quantize of a refusal test) went to the GPU inside the next one's dev.stats window, and a count of
    that test's dispatches read 2 for 1 (test_rope_kv after test_kv_cache)."""
    if "dev" in request.fixturenames:
        request.getfixturevalue("dev").flush()


@pytest.fixture(scope="module")
def tiny_llama():
    """A tiny random Llama checkpoint (config dict, weights by HF name), the same for each module that asks."""
    from wgraph.models.random_checkpoint import random_weights, tiny_config

    cfg = tiny_config()
    return cfg, random_weights(cfg, seed=0)


@pytest.fixture
def rng():
    import numpy as np

    return np.random.default_rng(1234)


# Hypothesis profiles (tests/test_property_*.py): "ci" is the default — derandomized (a fixed seed), few
# examples, no deadline (a first pipeline compile on lavapipe takes seconds); `--hypothesis-profile=long`
# for deeper runs. The plugin loads a --hypothesis-profile after this file has registered them.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True, database=None,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=400, deadline=None, derandomize=False,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


@pytest.fixture
def fresh_templates(dev):
    """No op template from another test's call, for tests that replace an op's planner: a template of a call with
    the same params would skip the replaced plan (the template key holds the params, not the plan), and the
    test's own must not serve later calls."""
    dev.templates.clear()
    yield
    dev.templates.clear()
