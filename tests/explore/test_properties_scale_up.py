"""A larger scale-up domain never lengthens a step: designs found by the network property test."""
from network_designs import _cp_ocs_reconfigurable, _su_pair


def test_larger_scale_up_domain_tree_chain():
    """Found by this test: NCCL's tree all-reduce chains the ranks of a node
    (collectives.tree_latency_s: (n/nodes - 1) intra-node hops), so doubling the domain (16 -> 32
    B200s) lengthened the latency-bound gradient all-reduce. On an NVLink-SHARP scale-up NCCL also
    has the NVLS tree (one switch reduction per node, collectives.nvls_tree_latency_s) and picks
    the faster; with it the larger domain is no slower."""
    p, so, su = "parallelism.", "system.scale_out.", "system.scale_up."
    row = {**_cp_ocs_reconfigurable(), p + "tp": 2, p + "pp": 2, p + "dp": 64, p + "cp": 2,
           p + "virtual_stages": 2, p + "recompute": "selective", p + "sequence_parallel": True,
           p + "overlap_grad_reduce": True, p + "overlap_param_gather": True, p + "overlap_moe_comm": True,
           p + "moe_dispatcher": "deepep", "training.global_batch": 1024, "training.flash_attention": True,
           "system.devices": 512, "system.accelerator": "b200", su + "size": 16, su + "link": "nvlink5",
           su + "bandwidth_bps": 7.2e12, so + "topology": "fat-tree", so + "link": "ib-ndr-400",
           so + "bandwidth_bps": 400e9, so + "nics_per_device": 2.0, so + "oversubscription": 2.0}
    a, b = _su_pair("mixtral-8x7b", row)
    assert b <= a * (1 + 1e-9), (a, b)


def test_larger_scale_up_domain_ocs_port_split():
    """Found by this test: ocs-reconfigurable split a node's ports greedily by planned bytes, and
    with twice the ports (8 -> 16) the pipeline chains kept one port each, half the share per
    device, while the step sums the phases' times: 1.3 % slower. Circuits now go where they save
    the most transfer time (reconfig.class_ports) for traffic weighted as on the step's critical
    path (explore.model.system.network_spec): 1.6 % faster instead."""
    p, so, su = "parallelism.", "system.scale_out.", "system.scale_up."
    row = {**_cp_ocs_reconfigurable(), p + "tp": 1, p + "pp": 4, p + "dp": 16, p + "cp": 1, p + "ep": 8,
           p + "microbatch": 2, p + "zero": 2, p + "recompute": "selective", p + "overlap_param_gather": True,
           p + "overlap_tp_comm": True, p + "overlap_moe_comm": True, p + "grad_reduce_bytes": 4,
           "training.global_batch": 32, "training.flash_attention": True, "system.devices": 64,
           "system.accelerator": "b200", su + "size": 4, su + "link": "nvlink5", su + "bandwidth_bps": 7.2e12,
           so + "link": "ib-ndr-400", so + "bandwidth_bps": 400e9, so + "nics_per_device": 2.0,
           so + "oversubscription": 2.0, so + "cube_dim": 4, so + "reconfiguration": "per-step",
           so + "ocs_reconfig_s": 1.0}
    a, b = _su_pair("mixtral-8x7b", row)
    assert b <= a * (1 + 1e-9), (a, b)


def test_context_parallel_gradient_ring_gets_circuits():
    """The design of _cp_ocs_reconfigurable (cp 2): doubling the scale-up domain no longer slows it."""
    a, b = _su_pair("gpt3-175b", _cp_ocs_reconfigurable())
    assert b <= a, (a, b)


def test_larger_scale_up_domain_torus_dimension_order():
    """Found by this test: an expert-gradient group (stride 32 devices, 16 ranks) on a torus of
    1,024 nodes of 4 (8 x 8 x 16) has rings of 8 and 2 along dimensions 1 and 2; with nodes of 8
    (8 x 8 x 8) its stride of 4 nodes leaves rings of 2 spaced 4 apart on dimension 0 (a quarter
    of its bandwidth) before a ring of 8 on dimension 1. Reduced in the dimensions' index order,
    the full buffer went over the slow ring first: 1.53x slower. The torus collective now runs its
    dimensions fastest first (collectives.torus_reduce_scatter_s)."""
    p, so, su = "parallelism.", "system.scale_out.", "system.scale_up."
    row = {**_cp_ocs_reconfigurable(), p + "tp": 4, p + "pp": 8, p + "dp": 64, p + "cp": 2, p + "ep": 8,
           p + "zero": 3, p + "recompute": "selective", p + "sequence_parallel": True,
           p + "overlap_grad_reduce": True, p + "overlap_tp_comm": True, p + "overlap_moe_comm": True,
           p + "moe_dispatcher": "deepep", p + "grad_reduce_bytes": 4, "training.global_batch": 256,
           "training.flash_attention": True, "system.devices": 4096, "system.accelerator": "h100-sxm-80gb",
           su + "size": 4, su + "link": "nvlink4", su + "bandwidth_bps": 7.2e12, so + "topology": "torus",
           so + "link": "ib-ndr-400", so + "bandwidth_bps": 400e9, so + "nics_per_device": 2.0,
           so + "oversubscription": 1.0, so + "reconfiguration": "per-step"}
    a, b = _su_pair("mixtral-8x7b", row)
    assert b <= a * (1 + 1e-9), (a, b)


def test_larger_scale_up_domain_torus_protocol():
    """Found by this test: a gradient group of 32 B200s on an ocs-torus of two nodes of 16 ran the
    torus model's plain rings (no per-call protocol time), on one node of 32 NCCL's flat call,
    which pays the Simple protocol's per-call pipeline time on each of its buckets: 5.4 % slower.
    The torus call now makes the same protocol choice (Simple with its pipeline time, or the
    low-latency protocol at a fraction of each link's rate)."""
    p, so, su = "parallelism.", "system.scale_out.", "system.scale_up."
    row = {**_cp_ocs_reconfigurable(), p + "zero": 1, p + "recompute": "full", p + "sequence_parallel": True,
           p + "overlap_grad_reduce": True, p + "overlap_tp_comm": True, p + "overlap_moe_comm": True,
           p + "grad_reduce_bytes": 4, "training.global_batch": 16, "system.accelerator": "b200",
           su + "size": 16, su + "link": "nvlink5", su + "bandwidth_bps": 7.2e12, so + "topology": "ocs-torus",
           so + "link": "ib-ndr-400", so + "bandwidth_bps": 400e9, so + "nics_per_device": 2.0,
           so + "oversubscription": 4.0}
    a, b = _su_pair("mixtral-8x7b", row)
    assert b <= a * (1 + 1e-9), (a, b)

