"""Step time moves one way with every network resource, on every family and plan knob
(network_designs.py docstring)."""
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st, HealthCheck

from network_designs import (PINNED, NET_SETTINGS, _check_network, _moe_a2a_two_leaves, designs,
                             pp_pairs_across_leaves)


# Found by the slow randomized run in session 8 (present at 53b7903 too): 64 A100 under radix-64
# leaves, pipeline pairs 32 devices apart (tp 8, pp 2, dp 4). Oversubscription 2 -> 4 grows a leaf
# from 42 to 51 devices at the fixed radix, so the job's partly filled second leaf shrinks from 22
# to 13 devices and fewer pairs cross. The model gave a leaf o-th of its down ports as uplinks
# (21 and 12.75), so the crossing load fell 22 / 21 -> 13 / 12.75 and the step 33 us
# (3.75285 -> 3.75281 s). A leaf has the ports its radix leaves (22 and 13: fat_tree.
# leaf_oversubscription), where both loads are 1 and the step is the same; the networkx leaf-spine
# agrees (test_properties_nics.py::test_oversubscription_partial_leaf_networkx).
OVERSUB_PARTIAL_LEAF = {'parallelism.tp': 8, 'parallelism.pp': 2, 'parallelism.dp': 4, 'parallelism.cp': 1, 'parallelism.ep': 1, 'parallelism.microbatch': 1, 'parallelism.virtual_stages': 1, 'parallelism.zero': 0, 'parallelism.recompute': 'none', 'parallelism.sequence_parallel': False, 'parallelism.overlap_grad_reduce': False, 'parallelism.overlap_param_gather': False, 'parallelism.overlap_tp_comm': False, 'parallelism.overlap_moe_comm': False, 'parallelism.moe_dispatcher': 'alltoall', 'parallelism.grad_reduce_bytes': 2, 'parallelism.zero3_calls_per_layer': 1.0, 'parallelism.zero3_gather_passes': 2.0, 'parallelism.list_collectives': False, 'parallelism.fsdp_root_unit': False, 'parallelism.zero3_replicated_params_per_layer': 0.0, 'parallelism.pp_p2p': 'batched', 'parallelism.grad_reduce_window': 'last_slot', 'parallelism.tp_overlap': 'layer', 'parallelism.pp_scatter_grads': False, 'parallelism.grad_accumulation': 'fused', 'training.global_batch': 4, 'training.flash_attention': False, 'system.devices': 64, 'system.accelerator': 'a100-sxm-80gb', 'system.scale_up.size': 4, 'system.scale_up.link': 'nvlink3', 'system.scale_up.bandwidth_bps': 2400000000000.0, 'system.scale_up.latency_s': 3e-06, 'system.scale_out.topology': 'fat-tree', 'system.scale_out.link': 'ib-hdr-200', 'system.scale_out.bandwidth_bps': 200000000000.0, 'system.scale_out.latency_s': 5e-06, 'system.scale_out.nics_per_device': 1.0, 'system.scale_out.oversubscription': 2.0, 'system.scale_out.cube_dim': 2, 'system.scale_out.reconfiguration': 'per-job', 'system.scale_out.ocs_reconfig_s': 1e-06}


@NET_SETTINGS
@given(designs(), st.floats(1.01, 10.0))
@example(("mixtral-8x7b", [_moe_a2a_two_leaves()]), 2.0)
@example(("gpt3-175b", PINNED["gpt3-175b"]), 2.0)
@example(("mixtral-8x7b", PINNED["mixtral-8x7b"]), 2.0)
@example(("gpt3-175b", [pp_pairs_across_leaves()]), 2.0)
@example(("gpt3-175b", [OVERSUB_PARTIAL_LEAF]), 2.0)
def test_network_resources_move_step_time_one_way(model_rows, factor):
    model, rows = model_rows
    assert _check_network(model, rows, factor) > 0 or len(rows) < 8


@pytest.mark.slow
@settings(max_examples=600, derandomize=False, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(designs(), st.floats(1.01, 10.0))
def test_network_resources_move_step_time_one_way_randomized(model_rows, factor):
    model, rows = model_rows
    _check_network(model, rows, factor)
