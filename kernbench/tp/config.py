"""`ModelParallelConfig` and `TransformerConfig`: Megatron's configuration dataclasses, names and defaults.

Megatron's layers take `config=` (a `megatron.core.ModelParallelConfig`, or a
`TransformerConfig` built on it) and read from it how to allocate and
initialize their weights and whether sequence parallelism is on. These are
the same dataclasses, built by keyword with Megatron's names and defaults.

**Declared here** (read by kernbench.tp, or derived as Megatron derives them):

- read by the layers: `params_dtype` (Megatron's default, float32),
  `perform_initialization`, `use_cpu_initialization` (the master weight
  drawn on the host from the rank's default generator, partitioned; else
  each partition drawn inside the RNG tracker's model-parallel fork, as
  Megatron's GPU initialization), `sequence_parallel`, `deterministic_mode`;
- the sizes (`tensor_model_parallel_size`, ...): as in Megatron, layers ask
  `parallel_state`, not the config; `expert_tensor_parallel_size` defaults
  to the tensor size and `autocast_dtype` to `params_dtype`, as Megatron's;
- `TransformerConfig`'s model shape and the derived defaults Megatron sets:
  `ffn_hidden_size` = 4·hidden, `kv_channels` = hidden / heads,
  `num_query_groups` = heads, `init_method` = `init_method_normal(std)`,
  `output_layer_init_method` = N(0, std² / (2·num_layers)),
  `embedding_init_method` = `init_method` (or its own std);
  `activation_func` defaults to the run's `torch.nn.functional.gelu`.

**Accepted with no effect**: every other field Megatron declares
(`kernbench.tp.megatron_fields`: FP8, MoE, Mamba, CUDA graphs, NCCL and
Transformer Engine options, ...), so a Megatron script's configuration
builds unchanged. A keyword Megatron does not have is one line naming it.

**Refused**: context and expert parallel sizes above 1 (no layer here splits
the sequence across context-parallel ranks or experts across expert-parallel
ranks, though `parallel_state` lays out their groups), `use_mup=True`, and
what Megatron itself refuses (fp16 with bf16, heads not divisible by the
tensor size, a zero head count or layer count where Megatron divides by it).

Any object with these attribute names works as `config=`; missing ones take
the defaults (`config_value`).
"""

from __future__ import annotations

import difflib
import functools
import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable

from kernbench.dtypes import float32
from kernbench.tp import parallel_state
from kernbench.tp.errors import ModelParallelError
from kernbench.tp.init_methods import init_method_normal
from kernbench.tp.megatron_fields import MODEL_PARALLEL_CONFIG, TRANSFORMER_CONFIG


def gelu(x):
    """Megatron's default `activation_func`, `torch.nn.functional.gelu` (exact), of the run's `torch` namespace."""
    return parallel_state.get_torch_namespace().nn.functional.gelu(x)


def _with_megatron_fields(table: dict[str, Any]):
    """Add `table`'s Megatron fields (name: default) to a class about to become a dataclass."""

    def add(cls):
        for name, default in table.items():
            cls.__annotations__[name] = Any
            setattr(cls, name, field(default_factory=list) if isinstance(default, list) else default)
        return cls

    return add


def _keywords_named(cls):
    """Make a dataclass's unknown keyword one `ModelParallelError` naming it and the close Megatron names."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, **kwargs):
        names = [f.name for f in fields(cls) if f.init]
        unknown = [name for name in kwargs if name not in names]
        if unknown:
            close = sorted({match for name in unknown for match in difflib.get_close_matches(name, names, n=2)})
            raise ModelParallelError(f"{cls.__name__}: {', '.join(map(repr, unknown))} is not a field of Megatron's "
                                     f"{cls.__name__}" + (f" (close: {', '.join(close)})" if close else ""))
        init(self, **kwargs)

    cls.__init__ = __init__
    return cls


@_keywords_named
@dataclass(kw_only=True)
@_with_megatron_fields(MODEL_PARALLEL_CONFIG)
class ModelParallelConfig:
    """Megatron's `ModelParallelConfig`: built by keyword; the fields below are read here, the rest accepted."""

    tensor_model_parallel_size: int = 1
    pipeline_model_parallel_size: int = 1
    virtual_pipeline_model_parallel_size: int | None = None
    sequence_parallel: bool = False
    context_parallel_size: int = 1
    expert_model_parallel_size: int = 1
    expert_tensor_parallel_size: int | None = None
    perform_initialization: bool = True
    use_cpu_initialization: bool = False
    fp16: bool = False
    bf16: bool = False
    params_dtype: Any = float32
    deterministic_mode: bool = False
    gradient_accumulation_fusion: bool = False
    tp_comm_overlap: bool = False
    use_te_rng_tracker: bool = False
    pipeline_dtype: Any = None
    autocast_dtype: Any = None
    microbatch_group_size_per_vp_stage: int | None = None

    def __post_init__(self) -> None:
        for name in ("context_parallel_size", "expert_model_parallel_size"):
            if getattr(self, name) != 1:
                raise ModelParallelError(
                    f"{type(self).__name__}({name}={getattr(self, name)!r}): the layers of kernbench.tp do not "
                    f"implement context and expert parallelism (their sizes must be 1; parallel_state lays out "
                    f"their groups, but no layer splits the sequence or the experts across them)")
        if self.expert_tensor_parallel_size is None:
            self.expert_tensor_parallel_size = self.tensor_model_parallel_size
        if self.autocast_dtype is None:
            self.autocast_dtype = self.params_dtype
        if self.microbatch_group_size_per_vp_stage is None:
            self.microbatch_group_size_per_vp_stage = self.pipeline_model_parallel_size


@_keywords_named
@dataclass(kw_only=True)
@_with_megatron_fields(TRANSFORMER_CONFIG)
class TransformerConfig(ModelParallelConfig):
    """Megatron's `TransformerConfig`: a `ModelParallelConfig` with the model's shape and its layers' options."""

    num_layers: int = 0
    hidden_size: int = 0
    num_attention_heads: int = 0
    num_query_groups: int | None = None
    ffn_hidden_size: int | None = None
    kv_channels: int | None = None
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    softmax_scale: float | None = None
    fp32_residual_connection: bool = False
    apply_residual_connection_post_layernorm: bool = False
    layernorm_epsilon: float = 1e-5
    layernorm_zero_centered_gamma: bool = False
    add_bias_linear: bool = True
    add_qkv_bias: bool = False
    gated_linear_unit: bool = False
    activation_func: Callable = gelu
    normalization: str = "LayerNorm"
    init_method: Callable | None = None
    output_layer_init_method: Callable | None = None
    init_method_std: float = 0.02
    embedding_init_method: Callable | None = None
    embedding_init_method_std: float | None = None
    apply_query_key_layer_scaling: bool = False
    attention_softmax_in_fp32: bool = True
    bias_activation_fusion: bool = False
    masked_softmax_fusion: bool = False
    bias_dropout_fusion: bool = False
    apply_rope_fusion: bool = False
    recompute_granularity: str | None = None
    use_mup: bool = False
    is_hybrid_model: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        name = type(self).__name__
        if self.use_mup:
            raise ModelParallelError(f"{name}(use_mup=True): maximal-update parametrization is not implemented in "
                                     f"kernbench.tp")
        if self.fp16 and self.bf16:
            raise ModelParallelError(f"{name}: only one of fp16 and bf16 may be True")
        if self.num_attention_heads % self.tensor_model_parallel_size:
            raise ModelParallelError(f"{name}: num_attention_heads ({self.num_attention_heads}) must be a multiple "
                                     f"of tensor_model_parallel_size ({self.tensor_model_parallel_size})")
        if self.apply_query_key_layer_scaling:
            self.attention_softmax_in_fp32 = True
        if self.ffn_hidden_size is None:
            self.ffn_hidden_size = 4 * self.hidden_size
        if self.kv_channels is None:
            if self.num_attention_heads <= 0:
                raise ModelParallelError(f"{name}: num_attention_heads must be positive (kv_channels is "
                                         f"hidden_size / num_attention_heads), got {self.num_attention_heads}")
            self.kv_channels = self.hidden_size // self.num_attention_heads
        if self.num_query_groups is None:
            self.num_query_groups = self.num_attention_heads
        tp, groups = self.tensor_model_parallel_size, self.num_query_groups
        if groups % tp and tp % groups:
            raise ModelParallelError(f"{name}: num_query_groups ({groups}) must be a multiple or a divisor of "
                                     f"tensor_model_parallel_size ({tp})")
        self._derive_init_methods(name)

    def _derive_init_methods(self, name: str) -> None:
        """Megatron's defaults: N(0, std²) for every layer, N(0, std² / (m·num_layers)) for output layers."""
        if self.embedding_init_method_std is None:
            self.embedding_init_method_std = self.init_method_std
        if self.embedding_init_method is None:
            if self.init_method is None or self.embedding_init_method_std != self.init_method_std:
                self.embedding_init_method = init_method_normal(self.embedding_init_method_std)
            else:
                self.embedding_init_method = self.init_method
        if self.init_method is None:
            self.init_method = init_method_normal(self.init_method_std)
        if self.output_layer_init_method is None:
            if self.num_layers <= 0:
                raise ModelParallelError(f"{name}: num_layers must be positive (the output layers' init std is "
                                         f"init_method_std / sqrt(2 num_layers)), got {self.num_layers}")
            multiplier = 1.0 if self.is_hybrid_model else 2.0
            self.output_layer_init_method = init_method_normal(
                self.init_method_std / math.sqrt(multiplier * self.num_layers))


DEFAULT_CONFIG = ModelParallelConfig()


def config_value(config, name: str):
    """`config.name`, or the `ModelParallelConfig` default when `config` is None or has no such attribute."""
    return getattr(config, name, getattr(DEFAULT_CONFIG, name))
