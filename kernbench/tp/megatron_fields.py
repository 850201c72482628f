"""The fields of Megatron's configuration dataclasses that nothing in kernbench.tp reads, with Megatron's defaults.

`ModelParallelConfig` and `TransformerConfig` (kernbench.tp.config) declare
the fields the layers and parallel state read; these tables add every other
field Megatron-LM declares, so a Megatron script's configuration builds
unchanged and each name reads back what it was given (or Megatron's default).
They tune features kernbench does not have — FP8 and FP4, mixture of
experts, Mamba, CUDA graphs, Transformer Engine and NCCL options, activation
offloading and recomputation, pipeline schedules, multi-token prediction —
so they change nothing in a simulated run. A default that is an object in
Megatron is its plain value here (`attention_backend`: the enum member's
name; list factories: an empty list, copied per instance).

Names and defaults are those of Megatron-LM's
megatron/core/model_parallel_config.py and
megatron/core/transformer/transformer_config.py at commit d98e8a6
(2026-08-22), in Megatron's order.
"""

MODEL_PARALLEL_CONFIG = {
    "tensor_parallel_num_weight_shards": None, "gtp_weight_remat_size": 1,
    "pipeline_model_parallel_comm_backend": None, "hierarchical_context_parallel_sizes": None,
    "max_seqlen_per_dp_cp_rank": None, "hybrid_context_parallel": False,
    "expert_tensor_parallel_num_weight_shards": None, "expert_gtp_weight_remat_size": 1, "timers": None,
    "finalize_model_grads_func": None, "grad_scale_func": None, "moe_grad_scale_func": None,
    "mtp_grad_scale_func": None, "no_sync_func": None, "grad_sync_func": None, "param_sync_func": None,
    "enable_autocast": False, "num_microbatches_with_partial_activation_checkpoints": None,
    "tp_comm_bulk_wgrad": True, "tp_comm_bulk_dgrad": True, "tp_comm_overlap_ag": True, "tp_comm_overlap_rs": True,
    "tp_comm_overlap_rs_dgrad": False, "tp_comm_split_ag": True, "tp_comm_atomic_ag": False, "tp_comm_split_rs": True,
    "tp_comm_atomic_rs": False, "cross_entropy_loss_fusion": False, "cross_entropy_fusion_impl": "native",
    "tp_comm_overlap_disable_qkv": False, "tp_comm_overlap_disable_fc1": False, "tp_comm_bootstrap_backend": "nccl",
    "overlap_moe_expert_parallel_comm": False, "delay_wgrad_compute": False,
    "overlap_dispatch_backward_with_experts_wgrad": False, "ep_overlap_early_attn_memory_release": False,
    "variable_seq_lengths": False, "overlap_p2p_comm": False, "batch_p2p_comm": True, "batch_p2p_sync": True,
    "use_ring_exchange_p2p": False, "deallocate_pipeline_outputs": False, "defer_embedding_wgrad_compute": False,
    "wgrad_deferral_limit": 0, "overlap_p2p_comm_warmup_flush": False, "mtp_standalone": False,
    "cpu_offloading": False, "cpu_offloading_num_layers": 0, "_cpu_offloading_context": None,
    "cpu_offloading_activations": True, "cpu_offloading_weights": False, "cpu_offloading_double_buffering": False,
    "cpu_offloading_retain_pinned_cpu_buffers": False, "barrier_with_L1_time": True,
}


TRANSFORMER_CONFIG = {
    "mtp_num_layers": None, "mtp_loss_scaling_factor": 0.1, "mtp_use_repeated_layer": False,
    "mtp_detach_heads": False, "mtp_hsm": False, "mtp_hybrid_override_pattern": None,
    "num_layers_in_first_pipeline_stage": None, "num_layers_in_last_pipeline_stage": None,
    "pipeline_model_parallel_layout": None, "account_for_embedding_in_pipeline_split": False,
    "account_for_loss_in_pipeline_split": False, "attention_backend": "auto", "flash_attention_version": None,
    "softmax_type": "vanilla", "activation_func_fp8_input_store": False, "glu_linear_offset": 0.0,
    "activation_func_clamp_value": None, "num_moe_experts": None, "rotary_interleaved": False, "window_size": None,
    "window_attn_skip_freq": None, "qk_layernorm": False, "qk_l2_norm": False, "qk_clip": False, "qk_clip_alpha": 0.5,
    "qk_clip_threshold": 100, "log_max_attention_logit": False, "attention_output_gate": False, "test_mode": False,
    "calculate_per_token_loss": False, "multi_latent_attention": False, "no_rope_freq": None,
    "experimental_attention_variant": None, "experimental_attention_variant_loss_scale_func": None,
    "dsa_indexer_n_heads": None, "dsa_indexer_head_dim": None, "dsa_indexer_topk": None, "dsa_indexer_topk_freq": 1,
    "dsa_indexer_skip_topk_offset": 0, "dsa_indexer_loss_coeff": None, "dsa_indexer_use_sparse_loss": False,
    "dsa_kernel_backend": "none", "dsa_indexer_rope_interleaved": False, "dsa_indexer_rotate_activation": True,
    "dsa_indexer_scoring_relu": True, "dsa_indexer_k_norm_epsilon": None, "dsa_indexer_k_norm_fp32": False,
    "linear_attention_freq": None, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "init_model_with_meta_device": False, "mup_width_mult": 1.0, "mup_base_hidden_size": None,
    "mup_embedding_mult": 1.0, "mup_output_mult": 1.0, "mup_base_head_dim": None, "mup_attn_scale_power": 1.0,
    "disable_bf16_reduced_precision_matmul": False, "persist_layer_norm": False, "memory_efficient_layer_norm": False,
    "use_fused_weighted_squared_relu": False, "fused_single_qkv_rope": False, "fused_residual_rmsnorm": False,
    "use_transformer_engine_op_fuser": False, "recompute_method": None, "recompute_num_layers": None,
    "distribute_saved_activations": False, "recompute_modules": None, "fp8": None, "fp8_recipe": "delayed",
    "fp8_param": False, "fp8_quantizer_factory": None, "fp8_margin": 0, "fp8_interval": 1, "fp8_amax_history_len": 1,
    "fp8_amax_compute_algo": "most_recent", "fp8_wgrad": True, "fp8_output_proj": False,
    "fp8_dot_product_attention": False, "fp8_multi_head_attention": False, "tp_only_amax_red": False,
    "first_last_layers_bf16": False, "num_layers_at_start_in_bf16": 1, "num_layers_at_end_in_bf16": 1,
    "use_kitchen": False, "use_kitchen_attention": False, "kitchen_attention_backend": "sdpa", "fp4": None,
    "fp4_recipe": "nvfp4", "fp4_param": False, "fp4_quantizer_factory": None, "high_priority_a2a_comm_stream": False,
    "moe_shared_expert_intermediate_size": None, "moe_shared_expert_gate": False, "moe_shared_expert_overlap": False,
    "use_grouped_gemm_for_shared_expert": False, "moe_shared_expert_glu_interleave_size": None, "moe_layer_freq": 1,
    "moe_ffn_hidden_size": None, "moe_router_load_balancing_type": "aux_loss", "moe_router_topk": 2,
    "moe_enable_routing_replay": False, "moe_router_topk_limited_devices": None,
    "moe_router_padding_for_quantization": False, "moe_router_padding_for_fp8": False, "moe_router_num_groups": None,
    "moe_router_group_topk": None, "moe_router_pre_softmax": False, "moe_router_topk_scaling_factor": None,
    "moe_router_score_function": "softmax", "moe_router_dtype": None, "moe_router_enable_expert_bias": False,
    "moe_router_bias_update_rate": 0.001, "moe_router_quantile_balancing_ema": 0.0,
    "moe_router_force_load_balancing": False, "moe_router_force_biased": None,
    "use_grouped_gemm_for_dense_mlp": False, "moe_grouped_gemm": False, "moe_use_grouped_tensor": False,
    "moe_single_grouped_weight": False, "moe_single_grouped_bias": False, "moe_aux_loss_coeff": 0.0,
    "moe_z_loss_coeff": None, "moe_input_jitter_eps": None, "moe_token_dropping": False,
    "moe_token_dispatcher_type": "allgather", "moe_enable_deepep": False, "moe_flex_dispatcher_backend": "deepep",
    "moe_permute_fusion_into_hybridep": False, "moe_hybridep_pad_uneven_dispatch_inputs": False,
    "moe_per_layer_logging": False, "moe_expert_capacity_factor": None, "moe_pad_expert_input_to_capacity": False,
    "moe_pad_experts_for_cuda_graph_inference": False, "moe_token_drop_policy": "probs", "moe_layer_recompute": False,
    "moe_permute_fusion": False, "moe_router_fusion": False, "moe_apply_probs_on_input": False,
    "moe_latent_size": None, "gtp_remat_opt_in_modules": [], "moe_flex_dispatcher_num_sms": None,
    "moe_deepep_num_sms": None, "moe_hybridep_num_sms": None, "moe_hybridep_num_blocks_permute": None,
    "moe_hybridep_num_blocks_unpermute": None, "moe_hybridep_num_sms_preprocessing": 108,
    "moe_ncclep_zero_copy": False, "moe_dispatch_fwd_dtype": "bf16", "moe_combine_bwd_dtype": "bf16",
    "moe_mlp_glu_interleave_size": None, "moe_expert_rank_capacity_factor": None, "cp_comm_type": None,
    "enable_cuda_graph": False, "cuda_graph_use_single_mempool": True, "cuda_graph_retain_backward_graph": False,
    "cuda_graph_warmup_steps": 3, "external_cuda_graph": False, "cuda_graph_impl": "none",
    "cuda_graph_modules": "full", "inference_cuda_graph_scope": None, "cuda_graph_scope": None,
    "enable_mhc_connections": False, "mhc_num_residual_streams": 4, "mhc_sinkhorn_iterations": 20,
    "mhc_init_gating_factor": 0.01, "mhc_recompute_layer_num": None, "clone_scatter_output_in_embedding": True,
    "disable_parameter_transpose_cache": False, "config_logger_dir": "", "flash_decode": False,
    "batch_invariant_mode": False, "batch_invariant_backend": "te_native", "use_te_activation_func": False,
    "inference_rng_tracker": False, "inference_sampling_seed": 42, "symmetric_ar_type": None,
    "nccl_all_reduce_for_prefill": False, "use_inference_optimized_layers": False,
    "inference_fuse_tp_communication": False, "inference_disable_triton_nvls_kernels": False,
    "inference_grouped_gemm_backend": "vllm", "inference_moe_disable_fused_quant_kernels": False,
    "inference_moe_token_dispatcher_type": "nvls", "mrope_section": None, "mamba_state_dim": 128,
    "mamba_head_dim": 64, "mamba_num_groups": 8, "mamba_num_heads": None, "gdp_num_householder": 3,
    "mamba_training_ssm_states_dtype": None, "use_mamba_mem_eff_path": True, "gdp_cutedsl_kernel": False,
    "gdp_num_chunk_states_to_recompute": 2, "mlp_chunks_for_prefill": 1, "mlp_chunks_for_training": 1,
    "heterogeneous_block_specs": False, "hetereogenous_dist_checkpoint": False, "quant_recipe": None,
    "transformer_impl": "transformer_engine", "fine_grained_activation_offloading": False, "offload_modules": [],
    "min_offloaded_tensor_size": 1048576, "delay_offload_until_cuda_graph": False,
    "delta_offload_bytes_across_pp_ranks": 0, "activation_offload_fraction": 1.0, "moe_paged_stash": False,
    "moe_paged_stash_page_size": 64, "moe_paged_stash_buffer_size_factor_cuda": 1.1,
    "moe_paged_stash_buffer_size_factor_cpu": 0.0, "fine_grained_offloading_max_inflight_offloads": None,
}
