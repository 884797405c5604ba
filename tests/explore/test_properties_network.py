"""Step time moves one way with every network resource, on every family and plan knob
(network_designs.py docstring)."""
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st, HealthCheck

from network_designs import (PINNED, NET_SETTINGS, _check_network, _moe_a2a_two_leaves, designs,
                             pp_pairs_across_leaves)


@NET_SETTINGS
@given(designs(), st.floats(1.01, 10.0))
@example(("mixtral-8x7b", [_moe_a2a_two_leaves()]), 2.0)
@example(("gpt3-175b", PINNED["gpt3-175b"]), 2.0)
@example(("mixtral-8x7b", PINNED["mixtral-8x7b"]), 2.0)
@example(("gpt3-175b", [pp_pairs_across_leaves()]), 2.0)
def test_network_resources_move_step_time_one_way(model_rows, factor):
    model, rows = model_rows
    assert _check_network(model, rows, factor) > 0 or len(rows) < 8


@pytest.mark.slow
@settings(max_examples=600, derandomize=False, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(designs(), st.floats(1.01, 10.0))
def test_network_resources_move_step_time_one_way_randomized(model_rows, factor):
    model, rows = model_rows
    _check_network(model, rows, factor)

