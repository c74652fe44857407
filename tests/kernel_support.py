"""Which registry variants a test device can run: by the features the registry says a variant needs, not by
its name (prefill_flash_* needs subgroups without saying so in its name)."""

from wgraph.kernels.registry import registry


def lacks_subgroups(dev, variant: str | None) -> bool:
    """True when `variant` needs the subgroup feature and the device has none (None: the planner picks)."""
    return variant is not None and "subgroup" in registry()[variant].features and not dev.caps.has_subgroups
