"""Megatron's `ProcessGroupCollection`: the process groups a module is given explicitly, by short names.

Megatron's newer code passes groups instead of reading `parallel_state`
(`pg_collection.tp`, `.dp_cp`, `.expt_dp`, ...). A collection holds any of
its declared names; one not set reads None, an undeclared one is an
AttributeError, and the constructor refuses unknown names with Megatron's
ValueError. `use_mpu_process_groups(required_pgs)` fills it from this
rank's `parallel_state` groups.

Names for what `initialize_model_parallel` refuses are None: generalized
tensor parallelism (`gtp_remat`, `expt_gtp_remat`), hierarchical context
parallelism (`hcp`) and several distributed-optimizer instances
(`inter_dist_opt`); with one instance the optimizer's group is the whole
world, which None is to `torch.distributed` (`intra_dist_opt`). The groups
with weight rematerialization are the plain ones, since none is active.
The all-gather groups (`dp_cp_ag`, `expt_dp_ag`) start None: the user
makes them (`parallel_state.create_all_gather_groups`) and sets them.
"""

from __future__ import annotations

from functools import partial

from kernbench.tp import parallel_state as ps

# Each declared name and how `use_mpu_process_groups` finds this rank's group for it.
GROUPS = {
    "tp": partial(ps.get_tensor_model_parallel_group, check_initialized=False),
    "pp": partial(ps.get_pipeline_model_parallel_group, check_initialized=False),
    "mp": partial(ps.get_model_parallel_group, check_initialized=False),
    "embd": partial(ps.get_embedding_group, check_initialized=False),
    "pos_embd": partial(ps.get_position_embedding_group, check_initialized=False),
    "cp": partial(ps.get_context_parallel_group, check_initialized=False),
    "tp_cp": partial(ps.get_tensor_and_context_parallel_group, check_initialized=False),
    "hcp": lambda: None,
    "ep": partial(ps.get_expert_model_parallel_group, check_initialized=False),
    "expt_tp": partial(ps.get_expert_tensor_parallel_group, check_initialized=False),
    "tp_ep": partial(ps.get_expert_tensor_and_model_parallel_group, check_initialized=False),
    "tp_ep_pp": partial(ps.get_expert_tensor_model_pipeline_parallel_group, check_initialized=False),
    "tp_ep_pp_with_egtp_remat": partial(ps.get_expert_tensor_model_pipeline_parallel_group, check_initialized=False),
    "tp_dp_cp": partial(ps.get_tensor_and_data_parallel_group, check_initialized=False, with_context_parallel=True),
    "dp": partial(ps.get_data_parallel_group),
    "dp_cp": partial(ps.get_data_parallel_group, with_context_parallel=True),
    "dp_cp_gtp_remat": partial(ps.get_data_parallel_group, with_context_parallel=True),
    "dp_cp_ag": lambda: None,
    "gtp_remat": lambda: None,
    "expt_gtp_remat": lambda: None,
    "expt_dp": partial(ps.get_expert_data_parallel_group, check_initialized=False),
    "expt_dp_gtp_remat": partial(ps.get_expert_data_parallel_group, check_initialized=False),
    "expt_dp_ag": lambda: None,
    "intra_dp_cp": partial(ps.get_data_parallel_group, with_context_parallel=True, partial_data_parallel=True),
    "intra_expt_dp": partial(ps.get_expert_data_parallel_group, check_initialized=False,
                             partial_expert_data_parallel=True),
    "inter_dist_opt": lambda: None,
    "intra_dist_opt": lambda: None,
}


class ProcessGroupCollection:
    """Process groups by Megatron's short names (module docstring)."""

    def __init__(self, **kwargs):
        for name, group in kwargs.items():
            if name not in GROUPS:
                raise ValueError(f"Unknown attribute: {name}")
            setattr(self, name, group)

    def __getattr__(self, name: str):
        if name in GROUPS:
            return None
        raise AttributeError(f"'ProcessGroupCollection' object has no attribute '{name}'")

    def __repr__(self) -> str:
        held = [f"{name}({group.size()})" for name, group in vars(self).items() if group is not None
                and not isinstance(group, list)]
        return f"ProcessGroupCollection({', '.join(held)})" if held else "ProcessGroupCollection(empty)"

    @classmethod
    def use_mpu_process_groups(cls, required_pgs: list[str] | None = None) -> "ProcessGroupCollection":
        """This rank's `parallel_state` groups, all of them or those `required_pgs` names."""
        names = list(GROUPS) if required_pgs is None else list(required_pgs)
        invalid = [name for name in names if name not in GROUPS]
        if invalid:
            raise ValueError(f"Invalid process groups requested: {invalid}")
        return cls(**{name: GROUPS[name]() for name in names})
