"""Validation on published MoE / long-context / FP8 runs (issue 11):
``tests/validation/frontier_runs.csv`` (same columns as ``published_runs.csv``; every row
names its source and where in it the numbers are).

The Megatron-Bridge dense group (``MBRIDGE_DENSE``: Llama 3 / 3.1 8B-405B rows of NVIDIA's performance summary,
every plan field printed) is held out and reported and bounded on its own.

Only rows with a step time are used as targets (``step_time_s``: measured, or derived
from published tokens/s as global batch x sequence / tokens/s, which needs no FLOP
convention, or, for Llama 3 405B's production rows, from the published TFLOP/s per GPU
with the FLOP count stated in the row's notes); other rows that publish only TFLOP/s or
MFU are kept in the CSV for reference.
Each run becomes ``tests/validation/frontier_scenarios/<run_id>.toml``
(``python -m explore.validation_frontier --write-scenarios``). Assumptions where the
sources are silent are the same for every run (``ASSUMPTIONS``), never tuned per
run; the calibration constants are the ones fitted on ``published_runs.csv``
(not refitted here).

``python -m explore.validation_frontier`` prints predictions, errors and the MAPE.
"""
from __future__ import annotations

import re

import numpy as np

from explore.validation import REPO, read_runs, scenario_group_main, write_scenario_files

CSV_PATH = REPO / "tests" / "validation" / "frontier_runs.csv"
SCENARIO_DIR = REPO / "tests" / "validation" / "frontier_scenarios"

ASSUMPTIONS = (
    "Frontier group (issue 11), same for every run: Megatron-Core conventions (tp*pp*dp*cp = devices, "
    "ep from dp*cp, expert TP = tp); microbatch 1 unless given; distributed optimizer (ZeRO-1) with "
    "overlapped gradient reduce and parameter gather (torchtitan FSDP: ZeRO-3); TP communication "
    "overlap when tp > 1; flash attention; sequence parallelism when tp > 1; full recompute where "
    "published, otherwise none (partial recompute of norms, activations, MLA up-projections or MLPs is "
    "not modelled); EP all-to-all overlap only where the source says so; FP8 recipe as "
    "published (per-tensor when only 'FP8' is stated); experts force-balanced (capacity_factor 1, as the "
    "NVIDIA benchmark tables state); MoE: expert tensor parallelism 1 (MoE parallel folding); DGX H100/B200: 8 GPUs per NVLink domain and one 400G NIC per GPU; "
    "GB200: NVL72 domain, B200 die at GB200 clocks (2.5 PFLOP/s BF16 and 5 PFLOP/s FP8 dense, 186 GB "
    "HBM3e at 8 TB/s per GPU: NVIDIA GB200 NVL72 specifications, 72-GPU totals / 72); H800: H100 with "
    "400 GB/s NVLink (bidirectional; DeepSeek-V3 Sec. 3.1)")

MBRIDGE_DSV3 = ("NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/deepseek/deepseek_workload_base_configs.py "
                "(commit 0426418230)")
MBRIDGE_QWEN3 = ("NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/qwen/qwen3_workload_base_configs.py "
                 "(commit 01b2977e51)")
_MBRIDGE_LLAMA_COMMON = ("set_llama3_common_configs / set_llama31_common_configs: grad_reduce_in_fp32 = False (BF16 "
                         "main-gradient reduce); llama3.py base recipes: recompute none, overlap_grad_reduce and "
                         "overlap_param_gather True, fp8_param_gather False (default);")
MBRIDGE_LLAMA_2511 = ("NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/llama/{llama3,llama31}_llm_pretrain.py and "
                      "*_workload_base_configs.py (commit 5776a6d90, the 25.11 table's last edit): " + _MBRIDGE_LLAMA_COMMON)
MBRIDGE_LLAMA_2604 = ("NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/llama/llama3_llm_pretrain.py and "
                      "llama3_workload_base_configs.py (commit 74695a06d, the commit that published the 26.04 table): "
                      + _MBRIDGE_LLAMA_COMMON)
MBRIDGE_LLAMA_2606 = ("NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/llama/llama31_llm_pretrain.py and "
                      "llama31_workload_base_configs.py (commit c270efc50, 26.06 perf summary updates): "
                      + _MBRIDGE_LLAMA_COMMON)
# The held-out Megatron-Bridge dense group (every plan field printed in the row; no microbatch or interleave guessed)
MBRIDGE_DENSE = ("mbridge2606_gb200_llama31_405b_fp8_256", "mbridge2606_gb200_llama31_405b_mxfp8_256",
                 "mbridge2604_h100_llama3_70b_fp8_64", "mbridge2604_gb200_llama3_70b_mxfp8_64",
                 "mbridge2511_h100_llama31_405b_fp8_1024", "mbridge2511_h100_llama3_70b_fp8_64",
                 "mbridge2511_b200_llama31_405b_fp8_128", "mbridge2511_b200_llama31_405b_mxfp8_128",
                 "mbridge2511_b200_llama3_8b_fp8_8", "mbridge2511_b200_llama3_8b_mxfp8_8",
                 "mbridge2511_gb200_llama3_8b_fp8_8", "mbridge2511_gb200_llama3_8b_mxfp8_8")
LLAMA3_ROWS = ("llama3_405b_prod_8k_8192gpu", "llama3_405b_prod_8k_16384gpu", "llama3_405b_prod_128k_cp16_16384gpu")
LLAMA3_PLAN = ("Llama 3 (arXiv:2407.21783) Sec. 3.3.2: interleaved schedule with V stages per rank, V not printed; "
               "one layer fewer on the first and the last stage, 'the first model chunk on the first stage has only "
               "the embedding, and the last model chunk on the last stage has only output projection and loss "
               "calculation': the embedding and the loss each counted as one layer of the pipeline split "
               "(pp_embedding_as_layer, pp_loss_as_layer: Megatron-Core's account_for_embedding_in_pipeline_split / "
               "account_for_loss_in_pipeline_split), (126 + 2) / 16 = 8 slots per rank and one per chunk, so V = 8 "
               "inferred (V = 1 gives +5.5 % / +30.5 %); N, the contiguous microbatches per chunk ('flexible N', "
               "Sec. 3.3.2), not printed: N = PP, the depth-first schedule the paper names and Megatron-LM's default "
               "microbatch_group_size_per_vp_stage (Megatron-LM takes N from PP to M, each larger N adding (V - 1) "
               "(N - PP) chunk-forwards to the warm-up: N = PP holds the least); microbatch 1 sequence (not "
               "printed), so M = Batch size/DP = 32 / 16 microbatches; 'input and output tensors of each pipeline "
               "stage' deallocated when no longer used (Sec. 3.3.2): the megatron runtime holds no stage output "
               "(Megatron-LM deallocate_pipeline_outputs) and a stage's input is its first layer's stored input; "
               "FP32 gradient accumulation and FP32 reduce-scatter (Sec. 3.3.2, numerical stability); FSDP without "
               "resharding after forward = one parameter all-gather and one gradient reduce-scatter per step (zero 1); "
               "RoCE 400 Gb/s per GPU (Sec. 3.3.1); the 1:7 oversubscription between 3,072-GPU pods (Sec. 3.3.1) is not "
               "modelled (lightpath's oversubscription applies to the whole fabric, not above a pod)")
NEMO_2502_ROWS = ("nemo2502_b200_mixtral8x7b_fp8_64", "nemo2502_b200_mixtral8x22b_fp8_64k_256")
NEMO_2504_ROWS = ("nemo2504_gb200_mixtral8x7b_fp8_64", "nemo2504_gb200_mixtral8x22b_fp8_64k_256")
NEMO_2502_FP8 = ("NVIDIA/NeMo v2.2.0 (commit 7192a2c944, the 25.02 release; Megatron-LM pinned at core_r0.11.0 "
                 "791b70e031 in requirements/manifest.json) scripts/llm/performance/pretrain_mixtral_8x7b.py and "
                 "pretrain_mixtral_8x22b.py: compute_dtype fp8 -> bf16_with_fp8_mixed() with grad_reduce_in_fp32 = "
                 "False (BF16 gradient reduce-scatter); nemo/collections/llm/recipes/precision/mixed_precision.py "
                 "bf16_with_fp8_mixed: fp8_params = True, which nemo/lightning/pytorch/plugins/mixed_precision.py "
                 "turns into fp8_param_gather = True and writes into the DDP config "
                 "(update_config_with_dtype_overrides): Transformer Engine FP8 weights in a uint8 parameter buffer "
                 "(megatron/core/distributed/distributed_data_parallel.py), gathered in 1 byte; "
                 "overlap_param_gather_with_optimizer_step only when pp > 1 and vp > 1 "
                 "(scripts/llm/performance/utils.py set_primary_perf_configs)")
NEMO_2504_FP8 = ("NVIDIA/NeMo v2.3.0 (commit 2b03b748bb, the 25.04 release; Megatron-LM pinned at core_r0.12.0 "
                 "3cdfd613e6 in requirements/manifest.json) scripts/performance/utils.py set_primary_perf_configs: "
                 "fp8 recipes ds and cs (bf16_with_fp8_mixed, bf16_with_fp8_current_scaling_mixed in "
                 "nemo/collections/llm/recipes/precision/mixed_precision.py) set fp8_param_gather = True, and "
                 "grad_reduce_in_fp32 = False; recommended_model_configs/model_configs_gb200.csv: use_mcore_fsdp 0; "
                 "overlap_param_gather_with_optimizer_step only when pp > 1 and vp > 1")
FP8_GATHER_MBRIDGE = ("; parameters gathered in FP8, 1 byte (fp8_param_gather True in "
                      "src/megatron/bridge/training/mixed_precision.py bf16_with_fp8_current_scaling_mixed, which "
                      "scripts/performance/utils/precision.py get_precision_config returns for fp8_cs, at the same "
                      "commit)")
NEMO_MOE = ("; MoE layer: the Mixtral recipes' pretrain_performance_optimizations (performance_mode=True in "
            "the perf scripts) add MegatronTokenDropCallback (moe_expert_capacity_factor 1.0, "
            "moe_pad_expert_input_to_capacity True: MoEAlltoAllTokenDispatcher's drop-and-pad path, "
            "token_dispatcher.py preprocess, takes the counts from the capacity on the host, no device-to-host "
            "copy or stream synchronize); moe_token_dispatcher_type alltoall; moe_permute_fusion left at "
            "Megatron-Core's default False (TransformerConfig), only the DeepSeek-V3 / Llama 4 perf scripts set it: "
            "the unfused moe_utils.permute / unpermute run (explore/model/moe.py unfused_permute_bytes)")
MXFP8_GATHER_MBRIDGE = ("; parameter gather kept at 2 bytes: bf16_with_mxfp8_mixed (same file and commit) sets "
                        "fp8_param_gather with reuse_grad_buf_for_mxfp8_param_ag (the gather goes through the "
                        "gradient buffer), and the bytes it moves per parameter are not determined here")

# EP A2A overlap on H100 with TP > 1: the TP collectives run without overlap. Megatron-LM's TP
# overlap needs CUDA_DEVICE_MAX_CONNECTIONS=1 to launch the collectives ahead of the GEMMs they hide
# under (d98e8a64dd megatron/core/tensor_parallel/layers.py 678, 697, 710, 842-849) while the EP
# overlap's two streams need more; arguments.py 1452-1475 warns to pick one on Hopper and earlier
# (the requirement lifts from Blackwell on), and both NVIDIA recipes pick the EP overlap:
EP_OVERLAP_TP_MODELZOO = ("TP collectives not overlapped: the run's scripts (yanring/Megatron-MoE-ModelZoo "
                          "8017e11, 2025-05-27, the commit that published the row: examples/qwen3/run_235b.sh "
                          "--combined-1f1b --combined-1f1b-recipe ep_a2a, model_configs/benchmarking/Qwen3-235B-A22B.yaml "
                          "without --tp-comm-overlap, 'CUDA_DEVICE_MAX_CONNECTIONS: 32' marked 'Used for 1F1B overlap'; "
                          "798dfb503c sbatch_benchmarking.sh: A2A_OVERLAP=1 exports CUDA_DEVICE_MAX_CONNECTIONS=32), "
                          "which on H100 forgoes Megatron-LM's TP overlap (d98e8a64dd megatron/training/arguments.py "
                          "1466-1475, megatron/core/tensor_parallel/layers.py 842-849)")
EP_OVERLAP_TP_MBRIDGE = ("TP collectives not overlapped: NVIDIA-NeMo/Megatron-Bridge 4ab94dfad3 "
                         "src/megatron/bridge/perf_recipes/qwen/h100/qwen3_moe.py "
                         "qwen3_235b_a22b_pretrain_256gpu_h100_fp8cs_config: CommOverlapConfig(tp_comm_overlap=False, "
                         "overlap_moe_expert_parallel_comm=True, delay_wgrad_compute=True), "
                         "CUDA_DEVICE_MAX_CONNECTIONS 8")

RECIPE_FACTS = {  # published per-run configuration beyond the CSV columns: (facts, source)
    "mbridge2509_h100_dsv3_dropless_1024": (dict(etp=1, moe_dispatcher="deepep", overlap_moe_comm=False),
                                            MBRIDGE_DSV3 + " DEEPSEEK_V3_PRETRAIN_CONFIG_H100_V1: expert_tensor_parallel_size 1, "
                                            "hybridep dispatcher, moe_a2a_overlap False, recompute mla_up_proj + mlp"),
    "mbridge2608_gb200_dsv3_mxfp8_256": (dict(etp=1, moe_dispatcher="deepep", overlap_moe_comm=True),
                                         MBRIDGE_DSV3 + " DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_FP8_MX_V2: etp 1, hybridep, "
                                         "moe_a2a_overlap True, recompute mla_up_proj"),
    "mbridge2604_b200_dsv3_mxfp8_256": (dict(etp=1, moe_dispatcher="deepep", overlap_moe_comm=True),
                                        MBRIDGE_DSV3 + " DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2: etp 1, deepep, "
                                        "moe_a2a_overlap True, recompute mla_up_proj + mlp"),
    "mbridge2604_h100_qwen3_235b_fp8_256": (dict(etp=1, moe_dispatcher="alltoall", overlap_moe_comm=True,
                                                 overlap_tp_comm=False),
                                            MBRIDGE_QWEN3 + " QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2: etp 1, "
                                            "alltoall dispatcher, moe_a2a_overlap True; " + EP_OVERLAP_TP_MBRIDGE),
    "mcoremoe_h100_qwen3_235b_bf16_256": (dict(etp=1, moe_dispatcher="deepep", overlap_moe_comm=False),
                                          "yanring/Megatron-MoE-ModelZoo:best_practice/qwen3 (its readme): DeepEP, EDP 1, ETP 1"),
    "mcoremoe_h100_qwen3_235b_bf16_256_a2aoverlap": (dict(etp=1, moe_dispatcher="deepep", overlap_moe_comm=True,
                                                          overlap_tp_comm=False),
                                                     "yanring/Megatron-MoE-ModelZoo:best_practice/qwen3 (its readme): DeepEP, "
                                                     "ETP 1, 1F1B EP A2A overlap; " + EP_OVERLAP_TP_MODELZOO),
    "mbridge2606_h100_llama31_405b_fp8_1024": (dict(grad_reduce_bytes=2, param_gather_bytes=1.0),
                                               "NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/perf_recipes/_common.py "
                                               "(commit 4ab94dfad3) _benchmark_common and _perf_precision: "
                                               "grad_reduce_in_fp32 = False (BF16 main gradients); _perf_precision('fp8_cs') "
                                               "= src/megatron/bridge/training/mixed_precision.py "
                                               "bf16_with_fp8_current_scaling_mixed: fp8_param_gather = True (1-byte "
                                               "parameter gather); the recipe also enables "
                                               "overlap_param_gather_with_optimizer_step (not modelled: the gather keeps "
                                               "the first-forward window); "
                                               "perf_recipes/llama/h100/llama31.py "
                                               "llama31_405b_pretrain_1024gpu_h100_fp8cs_config: TP 8 PP 8 CP 2 VP 8, "
                                               "microbatch 1, GBS 1536"),
    **{rid: (dict(virtual_stages=8, pp_embedding_as_layer=True, pp_loss_as_layer=True, grad_reduce_bytes=4),
             LLAMA3_PLAN) for rid in LLAMA3_ROWS},
    **{rid: (dict(grad_reduce_bytes=2, param_gather_bytes=1.0, moe_permute_fusion=False), NEMO_2502_FP8 + NEMO_MOE)
       for rid in NEMO_2502_ROWS},
    **{rid: (dict(grad_reduce_bytes=2, param_gather_bytes=1.0, moe_permute_fusion=False), NEMO_2504_FP8 + NEMO_MOE)
       for rid in NEMO_2504_ROWS},
    "torchtitan_405b_fp8_512_interleaved": (dict(param_gather_bytes=1.0),
                                            "pytorch/torchtitan train_configs/llama3_405b.toml at the benchmark's commit "
                                            "9dec370ad2 (pytorch/torchtitan, the Markdown file benchmarks/llama3_h100_202412_torchtitan, Versions and Dates): "
                                            "[float8] enable_float8_linear, enable_fsdp_float8_all_gather and "
                                            "precompute_float8_dynamic_scale_for_fsdp true (FSDP gathers Float8Linear "
                                            "weights in 1 byte); the 70B and 8B configs there leave float8 off, so the "
                                            "benchmark's flags for those rows are not in the code (left at 2 bytes)"),
    **{rid: ((dict(grad_reduce_bytes=2, param_gather_bytes=1.0), src + FP8_GATHER_MBRIDGE) if "mxfp8" not in rid
             else (dict(grad_reduce_bytes=2), src + MXFP8_GATHER_MBRIDGE)) for rid, src in (
        ("mbridge2606_gb200_llama31_405b_fp8_256", MBRIDGE_LLAMA_2606 + " llama31_workload_base_configs.py "
         "LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_CS_V2: TP 4 PP 16 CP 1 VP 4, GBS 1536, use_megatron_fsdp False, "
         "cpu_offloading_num_layers None"),
        ("mbridge2606_gb200_llama31_405b_mxfp8_256", MBRIDGE_LLAMA_2606 + " llama31_workload_base_configs.py "
         "LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_MX_V2: TP 4 PP 16 CP 1 VP 8, GBS 1536 (overlap kept: only nvfp4 v2 "
         "calls disable_param_gather_overlap)"),
        ("mbridge2604_h100_llama3_70b_fp8_64", MBRIDGE_LLAMA_2604 + " llama3_workload_base_configs.py "
         "LLAMA3_70B_PRETRAIN_CONFIG_H100_FP8_CS_V2: TP 4 PP 8 VP 5, GBS 256 (uniform split: no "
         "pipeline_model_parallel_layout at this commit)"),
        ("mbridge2604_gb200_llama3_70b_mxfp8_64", MBRIDGE_LLAMA_2604 + " llama3_workload_base_configs.py "
         "LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_MX_V2: TP 2 PP 4 VP 5, GBS 256"),
        ("mbridge2511_h100_llama31_405b_fp8_1024", MBRIDGE_LLAMA_2511 + " LLAMA31_405B_PRETRAIN_CONFIG_H100_FP8_CS_BASE_CONFIG: "
         "TP 8 PP 8 CP 2 VP 8, GBS 512"),
        ("mbridge2511_h100_llama3_70b_fp8_64", MBRIDGE_LLAMA_2511 + " LLAMA3_70B_PRETRAIN_CONFIG_H100_FP8_CS_BASE_CONFIG: "
         "TP 4 PP 8 VP 5, GBS 128"),
        ("mbridge2511_b200_llama31_405b_fp8_128", MBRIDGE_LLAMA_2511 + " LLAMA31_405B_PRETRAIN_CONFIG_B200_FP8_CS_BASE_CONFIG: "
         "TP 4 PP 8 CP 2 VP 8, GBS 64"),
        ("mbridge2511_b200_llama3_8b_fp8_8", MBRIDGE_LLAMA_2511 + " LLAMA3_8B_PRETRAIN_CONFIG_B200_FP8_CS_BASE_CONFIG: "
         "MBS 2, cuda_graph_impl local, scope full_iteration"),
        ("mbridge2511_b200_llama3_8b_mxfp8_8", MBRIDGE_LLAMA_2511 + " LLAMA3_8B_PRETRAIN_CONFIG_B200_FP8_MX_BASE_CONFIG "
         "(= the FP8_CS config): MBS 2, CUDA graphs full_iteration; the 8B functions keep the parameter-gather overlap"),
        ("mbridge2511_gb200_llama3_8b_fp8_8", MBRIDGE_LLAMA_2511 + " LLAMA3_8B_PRETRAIN_CONFIG_GB200_FP8_CS_BASE_CONFIG: "
         "MBS 2, cuda_graph_impl local, scope full_iteration"),
        ("mbridge2511_gb200_llama3_8b_mxfp8_8", MBRIDGE_LLAMA_2511 + " LLAMA3_8B_PRETRAIN_CONFIG_GB200_FP8_MX_BASE_CONFIG "
         "(= the FP8_CS config): MBS 2, CUDA graphs full_iteration; the 8B functions keep the parameter-gather overlap"))},
    "mbridge2511_b200_llama31_405b_mxfp8_128": (dict(grad_reduce_bytes=2, overlap_param_gather=False),
                                                MBRIDGE_LLAMA_2511 + " LLAMA31_405B_PRETRAIN_CONFIG_B200_FP8_MX_BASE_CONFIG "
                                                "(= the FP8_CS config): TP 4 PP 8 CP 2 VP 8, GBS 64; "
                                                "llama31_405b_pretrain_config_b200 sets ddp/optimizer/comm_overlap "
                                                "overlap_param_gather = False for fp8_mx ('keeping this eanbled causes "
                                                "NaN grad norm')" + MXFP8_GATHER_MBRIDGE),
    "deepseekv3_prod_h800_2048": (dict(moe_dispatcher="deepep", overlap_moe_comm=True),
                                  "DeepSeek-V3 (arXiv:2412.19437) Sec. 3.2: DualPipe overlaps the all-to-all with "
                                  "compute; tokens go once per node over IB, then NVLink (Sec. 3.2.2)"),
}

# Pipeline transfers of the Megatron-Bridge Llama rows with pp > 1 and vp > 1: CommOverlapConfig
# _get_model_comm_overlap_cfgs (src/megatron/bridge/training/comm_overlap.py at 5776a6d90, 74695a06d,
# c270efc50) sets overlap_p2p_comm True and batch_p2p_comm False, no Llama perf recipe overrides them.
# The pinned Megatron-LM (3rdparty/Megatron-LM: 92c8482e6d, 23265d2db3, addc601f57) decides the count
# (explore.model.pipeline_p2p.overlapped_p2p_transfers): from addc601f57 a forward send is waited as
# soon as it is posted when deallocate_pipeline_outputs, which GPTModelProvider sets True.
P2P_OVERLAP = (" Pipeline transfers: Megatron-Bridge comm_overlap.py _get_model_comm_overlap_cfgs at the row's "
               "commit sets overlap_p2p_comm (batch_p2p_comm off) for pp > 1, vp > 1; its Megatron-LM {mlm} "
               "schedules.py forward_backward_pipelining_with_interleaving {rule}")
_P2P_ROWS = {
    **{rid: ("overlapped", "92c8482e6d", "waits each steady-state send when the next is posted")
       for rid in ("mbridge2511_h100_llama31_405b_fp8_1024", "mbridge2511_h100_llama3_70b_fp8_64",
                   "mbridge2511_b200_llama31_405b_fp8_128", "mbridge2511_b200_llama31_405b_mxfp8_128")},
    **{rid: ("overlapped", "23265d2db3", "waits each steady-state send when the next is posted")
       for rid in ("mbridge2604_h100_llama3_70b_fp8_64", "mbridge2604_gb200_llama3_70b_mxfp8_64")},
    **{rid: ("overlapped_send_wait", "addc601f57", "waits each forward send once posted "
             "(deallocate_pipeline_outputs True in GPTModelProvider)")
       for rid in ("mbridge2606_gb200_llama31_405b_fp8_256", "mbridge2606_gb200_llama31_405b_mxfp8_256",
                   "mbridge2606_h100_llama31_405b_fp8_1024")},
}
for _rid, (_mode, _mlm, _rule) in _P2P_ROWS.items():
    _facts, _src = RECIPE_FACTS[_rid]
    RECIPE_FACTS[_rid] = ({**_facts, "pp_p2p": _mode, "grad_reduce_window": "per_chunk"}, _src + P2P_OVERLAP.format(mlm=_mlm, rule=_rule))

# Tensor-parallel overlap of the Megatron-Bridge dense rows with tp > 1: the perf scripts' llama3/llama31
# *_pretrain_config_{b200,gb200,h100} set tp_comm_overlap (the base recipes' CommOverlapConfig True, off only
# for nvfp4) with an FP8 userbuffers layout from src/megatron/bridge/training/comm_overlap.py that is the same
# for every one of them: qkv/fc1 fprop and proj/fc2 dgrad RingExchangeOverlapCfg, proj/fc2 fprop
# RingExchangeOverlapCfg (num_sm 1), qkv/fc1 dgrad and wgrad BulkOverlapCfg. Transformer Engine runs each as one
# GEMM call that waits for its transfers (comm_gemm_overlap.cpp split_overlap_ag / split_overlap_rs /
# bulk_overlap, release_v2.9 as pinned at 5776a6d90, the same at c270efc50's f8a01cd5ac), the ring
# reduce-scatter summing its chunks after the last one (reduce_bf16); TE's layernorm_linear.py / linear.py
# quantize before the userbuffers all-gather (FP8 gathers).
TP_UB = (" TP overlap: comm_overlap.py {cfg} (tp_comm_overlap True): ring-exchange qkv/fc1 fprop, proj/fc2 fprop "
         "and dgrad, bulk qkv/fc1 dgrad + wgrad; Transformer Engine comm_gemm_overlap.cpp fuses each collective "
         "into its GEMM call (tp_overlap per_gemm)")
_TP_UB_ROWS = {
    "mbridge2606_gb200_llama31_405b_fp8_256": "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192 (c270efc50)",
    "mbridge2606_gb200_llama31_405b_mxfp8_256": "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192 (c270efc50)",
    "mbridge2604_h100_llama3_70b_fp8_64": "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192 (74695a06d)",
    "mbridge2604_gb200_llama3_70b_mxfp8_64": "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192 (74695a06d)",
    "mbridge2511_h100_llama31_405b_fp8_1024": "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192 (5776a6d90)",
    "mbridge2511_h100_llama3_70b_fp8_64": "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192 (5776a6d90)",
    "mbridge2511_b200_llama31_405b_fp8_128": "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192 (5776a6d90)",
    "mbridge2511_b200_llama31_405b_mxfp8_128": "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192 (5776a6d90)",
}
for _rid, _cfg in _TP_UB_ROWS.items():
    _facts, _src = RECIPE_FACTS[_rid]
    RECIPE_FACTS[_rid] = ({**_facts, "tp_overlap": "per_gemm"}, _src + TP_UB.format(cfg=_cfg))

# Pipeline split of the Megatron-Bridge Llama 3.1 405B rows (126 layers on pp x vp = 64 or 128 chunks): every
# perf config builds on the base recipe llama31_405b_pretrain_config, which sets
# account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split True, and none of them
# resets them or sets a pipeline_model_parallel_layout / first- or last-stage layer count (the workload base
# configs set pp, vp only): (126 + 2) slots, 2 per chunk on 64 chunks, 1 on 128 (Megatron-Core
# get_num_layers_to_build). The 70B rows' recipes set neither (80 layers split evenly).
PP_SPLIT = (" Pipeline split: {where} (commit {commit}) account_for_embedding_in_pipeline_split = True, "
            "account_for_loss_in_pipeline_split = True, not reset by the perf config (pp_embedding_as_layer, "
            "pp_loss_as_layer: (126 + 2) / (pp vp) layer slots per model chunk)")
_PP_SPLIT_ROWS = {
    **{rid: ("src/megatron/bridge/recipes/llama/llama3.py llama31_405b_pretrain_config recommended_kwargs, "
             "used by scripts/performance/configs/llama/llama31_llm_pretrain.py", "5776a6d90")
       for rid in ("mbridge2511_h100_llama31_405b_fp8_1024", "mbridge2511_b200_llama31_405b_fp8_128",
                   "mbridge2511_b200_llama31_405b_mxfp8_128")},
    **{rid: ("src/megatron/bridge/recipes/llama/llama3.py llama31_405b_pretrain_config ('Large model specific "
             "pipeline split configurations'), used by scripts/performance/configs/llama/llama31_llm_pretrain.py "
             "llama31_405b_pretrain_config_gb200", "c270efc50")
       for rid in ("mbridge2606_gb200_llama31_405b_fp8_256", "mbridge2606_gb200_llama31_405b_mxfp8_256")},
    "mbridge2606_h100_llama31_405b_fp8_1024": ("src/megatron/bridge/recipes/llama/h100/llama3.py "
                                               "llama31_405b_pretrain_256gpu_h100_bf16_config (aliased as "
                                               "llama31_405b_pretrain_config in recipes/llama/llama3.py), the base of "
                                               "perf_recipes/llama/h100/llama31.py "
                                               "llama31_405b_pretrain_1024gpu_h100_fp8cs_config", "4ab94dfad3"),
}
for _rid, (_where, _commit) in _PP_SPLIT_ROWS.items():
    _facts, _src = RECIPE_FACTS[_rid]
    RECIPE_FACTS[_rid] = ({**_facts, "pp_embedding_as_layer": True, "pp_loss_as_layer": True},
                          _src + PP_SPLIT.format(where=_where, commit=_commit))
# Qwen3-235B-A22B (94 layers, pp 8 vp 4): the base recipe sets both, (94 + 2) / 32 = 3 slots per chunk. The row's
# commit (01b2977e51) is not in the fetched mirror; 74695a06d, the commit that published the 26.04 table, is read.
_facts, _src = RECIPE_FACTS["mbridge2604_h100_qwen3_235b_fp8_256"]
RECIPE_FACTS["mbridge2604_h100_qwen3_235b_fp8_256"] = (
    {**_facts, "pp_embedding_as_layer": True, "pp_loss_as_layer": True},
    _src + " Pipeline split: NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/recipes/qwen/qwen3_moe.py "
    "qwen3_235b_a22b_pretrain_config (commit 74695a06d, the 26.04 table's; the row's 01b2977e51 not fetched) "
    "account_for_embedding_in_pipeline_split = True, account_for_loss_in_pipeline_split = True ('Pipeline split "
    "accounting'), kept by scripts/performance/configs/qwen/qwen3_llm_pretrain.py qwen3_235b_a22b_pretrain_config_h100 "
    "(H100_FP8_CS_V2 sets no pp_layout): (94 + 2) / (8 x 4) = 3 layer slots per model chunk")

# Qwen3-235B-A22B in Megatron-MoE-ModelZoo (pp 8 vp 4): the model config passes both flags, and runtime.conf counts
# 96 layer slots (94 + 2), so no uneven first / last stage is added and 3 layers go to each virtual stage.
for _rid in ("mcoremoe_h100_qwen3_235b_bf16_256", "mcoremoe_h100_qwen3_235b_bf16_256_a2aoverlap"):
    _facts, _src = RECIPE_FACTS[_rid]
    RECIPE_FACTS[_rid] = (
        {**_facts, "pp_embedding_as_layer": True, "pp_loss_as_layer": True},
        _src + "; pipeline split: yanring/Megatron-MoE-ModelZoo 8017e11 model_configs/benchmarking/Qwen3-235B-A22B.yaml "
        "--account-for-embedding-in-pipeline-split true, --account-for-loss-in-pipeline-split true, --num-layers 94; "
        "runtime_configs/benchmarking/runtime.conf Qwen3-235B-A22B LAYERS 96 ('Account loss and embedding for number "
        "of layers'): sbatch_benchmarking.sh adds no --decoder-first/last-pipeline-num-layers (96 % PP = 0) and "
        "--num-layers-per-virtual-pipeline-stage 96 / 8 / 4 = 3")

# Cross-entropy kernel of the Megatron-Bridge rows (training.loss_kernel "te", explore/model/calibration.py
# TE_LOGITS_*): GPTModelProvider keeps cross_entropy_loss_fusion True (src/megatron/bridge/models/gpt_provider.py)
# and the perf scripts set cross_entropy_fusion_impl "te" for every model (scripts/performance/utils/overrides.py
# _set_common_perf_overrides; the Llama 3 base recipe llama3.py _llama3_common sets it too), so Megatron-Core's
# compute_language_model_loss calls Transformer Engine's Triton parallel_cross_entropy on the 16-bit logits.
# The Qwen3 row's commit (01b2977e51) is not in the fetched mirror, so it keeps the default.
TE_LOSS = (" Cross-entropy: {where} (commit {commit}) cross_entropy_fusion_impl = 'te' with GPTModelProvider's "
           "cross_entropy_loss_fusion True: Transformer Engine parallel_cross_entropy (training.loss_kernel te)")
_TE_LOSS_ROWS = {
    **{rid: ("scripts/performance/utils/overrides.py _set_common_perf_overrides", "5776a6d90")
       for rid in MBRIDGE_DENSE if rid.startswith("mbridge2511")},
    **{rid: ("scripts/performance/utils/overrides.py _set_common_perf_overrides", "74695a06d")
       for rid in MBRIDGE_DENSE if rid.startswith("mbridge2604")},
    **{rid: ("scripts/performance/utils/overrides.py _set_common_perf_overrides", "c270efc50")
       for rid in MBRIDGE_DENSE if rid.startswith("mbridge2606")},
    "mbridge2606_h100_llama31_405b_fp8_1024": ("src/megatron/bridge/perf_recipes/_common.py _benchmark_common "
                                               "(cross_entropy_impl default, via llama/common.py "
                                               "_llama_benchmark_common)", "4ab94dfad3"),
    **{rid: ("scripts/performance/utils/overrides.py _set_common_perf_overrides", "0426418230")
       for rid in ("mbridge2509_h100_dsv3_dropless_1024", "mbridge2608_gb200_dsv3_mxfp8_256",
                   "mbridge2604_b200_dsv3_mxfp8_256")},
}
TRAINING_FACTS = {rid: (dict(loss_kernel="te"), TE_LOSS.format(where=w, commit=c))
                  for rid, (w, c) in _TE_LOSS_ROWS.items()}
"""Per-run training fields from the code the run used: (facts, source), merged into [training]."""

# Runs reported but not in the asserted set, with the reason (decided by what the model can represent,
# the same rule for every run, not by the error):
EXCLUDED = {
    "torchtitan_405b_fp8_512_interleaved": "hardware not in the catalog: H100 96 GB HBM2e at a 500 W power limit",
    "torchtitan_70b_fp8_256_asynctp": "hardware not in the catalog: H100 96 GB HBM2e at a 500 W power limit",
    "torchtitan_8b_fp8_cp8_256k": "hardware not in the catalog (H100 96 GB, 500 W); context > 8k",
    "nemo2504_gb200_mixtral8x22b_fp8_64k_256": "context > 8k: the attention core (the causal kernel's executed "
                                               "half of the s x s product) runs at a fused-attention constant "
                                               "fitted on <= 4k runs",
    "nemo2502_b200_mixtral8x22b_fp8_64k_256": "context > 8k (as above)",
    "llama3_405b_prod_8k_8192gpu": "does not fit 80 GB as modelled (97.8 GB): the published plan (no activation "
                                   "checkpointing at 8K, embedding-only and loss-only chunks) peaks on the second "
                                   "pipeline rank, which Megatron-LM's interleaved warm-up fills with 141 "
                                   "layer-microbatches of activations (75.1 GB) beside 12.75 GB of unsharded FP32 "
                                   "gradients; the embedding-only chunk lowers only the first rank's peak, "
                                   "Sec. 3.3.2's flexible N holds no less than N = pp and its freed stage inputs "
                                   "and outputs are already assumed; V inferred",
    "llama3_405b_prod_8k_16384gpu": "does not fit 80 GB as modelled (90.6 GB; as above: all 16 microbatches of the "
                                    "second rank's 8 layers in flight, 68.2 GB)",
    "llama3_405b_prod_128k_cp16_16384gpu": "context > 8k (as above); published DP 4 inconsistent with the GPU and "
                                           "token counts (DP 8 used); all-gather CP",
}

PRESET_BY_SHAPE = {(61, 7168): "deepseek-v3", (94, 4096): "qwen3-235b-a22b", (56, 6144): "mixtral-8x22b",
                   (126, 16384): "llama3-405b", (80, 8192): "llama3-70b"}

GB200 = {"base": "b200", "peak_flops_bf16": 2.5e15, "peak_flops_fp16": 2.5e15, "peak_flops_fp8": 5.0e15,
         "hbm_capacity_bytes": 186e9, "hbm_bandwidth_bytes_per_s": 8.0e12}


def _int(x, default=None):
    m = re.match(r"\s*(\d+)", x or "")
    return int(m.group(1)) if m else default


def preset_of(row) -> str:
    L, h = int(row["layers"]), int(row["hidden"])
    if (L, h) == (32, 4096):
        return "mixtral-8x7b" if row["arch_type"] == "moe" else "llama3-8b"
    return PRESET_BY_SHAPE[(L, h)]


def hardware(row) -> dict:
    acc = row["accelerator"]
    link = "roce-400" if "RoCE" in row.get("inter_node_net_per_node", "") else "ib-ndr-400"
    so = {"topology": "fat-tree", "link": link, "nics_per_device": 1.0}
    if "GB200" in acc:
        return {"accelerator": dict(GB200), "scale_up": {"size": 72, "link": "nvlink5"}, "scale_out": so}
    if "B200" in acc:
        return {"accelerator": "b200", "scale_up": {"size": 8, "link": "nvlink5"}, "scale_out": so}
    if "H800" in acc:
        return {"accelerator": "h100-sxm-80gb", "scale_up": {"size": 8, "link": "nvlink4", "bandwidth_bps": 1.6e12},
                "scale_out": so}
    return {"accelerator": "h100-sxm-80gb", "scale_up": {"size": 8, "link": "nvlink4"}, "scale_out": so}


def build_scenario(row: dict) -> dict:
    prec_text = row["precision"]
    fp8 = ("FP8" in prec_text.upper()) or ("FLOAT8" in prec_text.upper())
    recipe = ("mxfp8" if "MXFP8" in prec_text.upper() else
              "blockwise" if ("blockwise" in prec_text or "fine-grained" in prec_text) else "per-tensor")
    tp, pp, dp = int(row["tp"]), int(row["pp"]), int(row["dp"])
    cp = _int(row["cp_or_sp"], 1)
    ep = _int(row["ep"], 1)
    rc_text = row["activation_recompute"].lower()
    # partial recompute of cheap modules (norms, activations, MLA up-projections, MoE activations) is
    # not modelled: lightpath's "selective" recomputes the attention core, which flash attention never stores
    recompute = "full" if rc_text.startswith("full") else "none"
    torchtitan = row["run_id"].startswith("torchtitan")
    notes = row["notes"] + " " + row["vp_interleave"]
    overlap_moe = "a2aoverlap" in row["run_id"] or "DualPipe" in notes
    model = {"preset": preset_of(row), "seq_len": int(row["seq_len"])}
    training = {"global_batch": int(float(row["global_batch_seqs"])), "precision": "fp8" if fp8 else "bf16",
                "flash_attention": True}
    if fp8:
        training["fp8_recipe"] = recipe
    if "BF16 optimizer moments" in prec_text:
        training["optimizer_moments"] = "bf16"
        training["fp8_dispatch"] = True
    par = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "microbatch": _int(row["microbatch"], 1),
           "virtual_stages": _int(row["vp_interleave"], 1), "zero": 3 if torchtitan else 1,
           "recompute": recompute, "sequence_parallel": tp > 1, "overlap_grad_reduce": True,
           "overlap_param_gather": True, "overlap_tp_comm": tp > 1, "overlap_moe_comm": overlap_moe}
    system = {"devices": int(row["n_accel"]), **hardware(row)}
    description = ASSUMPTIONS
    if row["arch_type"] == "moe":
        par["etp"] = 1   # MoE parallel folding, as NVIDIA's MoE recipes set it (RECIPE_FACTS)
    if row["run_id"] in RECIPE_FACTS:
        facts, src = RECIPE_FACTS[row["run_id"]]
        par.update(facts)
        description += ". Run configuration: " + src
    if row["run_id"] in TRAINING_FACTS:
        facts, src = TRAINING_FACTS[row["run_id"]]
        training.update(facts)
        description += "." + src
    return {"name": row["run_id"], "description": description, "model": model, "training": training,
            "parallelism": par, "system": system}


def load_rows(path=CSV_PATH) -> list[dict]:
    return read_runs(path)


def write_scenarios() -> None:
    write_scenario_files(load_rows(), build_scenario, SCENARIO_DIR, "explore.validation_frontier", "frontier_runs.csv")


def load_cases():
    from explore.scenario import load_scenario
    return [(r["run_id"], load_scenario(SCENARIO_DIR / f"{r['run_id']}.toml"), r["step_time_kind"].split()[0].lower(),
             float(r["step_time_s"])) for r in load_rows()]


def errors(cases) -> dict[str, float]:
    """Signed relative step-time errors (predicted / published - 1) per run."""
    from explore.evaluate import evaluate
    return {rid: float(evaluate(sc, keep_invalid=True)["step_time_s"][0]) / t - 1 for rid, sc, _, t in cases}


def report(cases) -> tuple[str, dict]:
    from explore.evaluate import evaluate
    lines = [f"{'run':<46} {'kind':<9} {'published_s':>11} {'predicted_s':>11} {'error':>8}  note"]
    errs = {}
    for rid, sc, kind, t in cases:
        ds = evaluate(sc, keep_invalid=True)   # the raw time, with the reason beside it
        p = float(ds["step_time_s"][0])
        errs[rid] = p / t - 1
        note = ("excluded: " + EXCLUDED[rid]) if rid in EXCLUDED else ds["reason"].values[0]
        lines.append(f"{rid:<46} {kind:<9} {t:>11.3f} {p:>11.3f} {100 * errs[rid]:>7.2f}%  {note}")
    for label, keep in (("asserted set", lambda r: r not in EXCLUDED),
                        ("asserted set without the Megatron-Bridge dense group",
                         lambda r: r not in EXCLUDED and r not in MBRIDGE_DENSE),
                        ("Megatron-Bridge dense group (held out)", lambda r: r in MBRIDGE_DENSE),
                        ("all runs", lambda r: True)):
        a = np.abs(np.array([e for r, e in errs.items() if keep(r)]))
        lines.append(f"{label}: MAPE {100 * a.mean():.2f}%  max {100 * a.max():.2f}%  over {len(a)} runs")
    return "\n".join(lines), errs


def main(argv=None) -> int:
    return scenario_group_main("python -m explore.validation_frontier", write_scenarios, report, load_cases, argv)


if __name__ == "__main__":
    raise SystemExit(main())
