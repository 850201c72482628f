"""Print docs/megatron-surface.md from the code: `python docs/megatron_surface.py > docs/megatron-surface.md`.

The page lists, per `megatron.core` module, the names kernbench provides
and where (kernbench.tp); tests/tp/megatron/test_surface.py fails when the
committed page differs. A module's names are those it defines that do not
start with `_`, and the private names Megatron's own tests call
(`_CopyToModelParallelRegion`, `_set_cuda_rng_state`, ...).
"""

import importlib
import inspect

# megatron.core module -> the kernbench modules holding its names (a name list where only some are Megatron's).
MODULES = {
    "megatron.core.parallel_state": ["kernbench.tp.parallel_state"],
    "megatron.core.tensor_parallel": ["kernbench.tp.tensor_parallel"],
    "megatron.core.tensor_parallel.mappings": ["kernbench.tp.mappings"],
    "megatron.core.tensor_parallel.layers": ["kernbench.tp.layers", "kernbench.tp.param_attributes",
                                             ("kernbench.tp.embedding", ["VocabParallelEmbedding"])],
    "megatron.core.tensor_parallel.random": ["kernbench.tp.random"],
    "megatron.core.tensor_parallel.cross_entropy": ["kernbench.tp.cross_entropy"],
    "megatron.core.tensor_parallel.data": ["kernbench.tp.data"],
    "megatron.core.tensor_parallel.utils": ["kernbench.tp.utils"],
    "megatron.core.process_groups_config": [("kernbench.tp.process_groups_config", ["ProcessGroupCollection"])],
    "megatron.core.models.common.language_module.language_module": [("kernbench.tp.language_module",
                                                                      ["LanguageModule"])],
    "megatron.core.model_parallel_config": [("kernbench.tp.config", ["ModelParallelConfig"])],
    "megatron.core.transformer.transformer_config": [("kernbench.tp.config", ["TransformerConfig"])],
    "megatron.core.utils": [("kernbench.tp.init_methods", ["init_method_normal", "scaled_init_method_normal"]),
                            ("kernbench.tp.mappings", ["get_tensor_model_parallel_group_if_none"]),
                            ("kernbench.tp.utils", ["divide", "ensure_divisibility"])],
    "megatron.core.fusions.fused_bias_gelu": [("kernbench.tp.fusions", ["bias_gelu_impl"])],
    "megatron.core.distributed.finalize_model_grads": [("kernbench.tp.finalize", ["finalize_model_grads"])],
}
PRIVATE = {"_CopyToModelParallelRegion", "_ReduceFromModelParallelRegion", "_ScatterToModelParallelRegion",
           "_GatherFromModelParallelRegion", "_ScatterToSequenceParallelRegion", "_GatherFromSequenceParallelRegion",
           "_ReduceScatterToSequenceParallelRegion", "_AllGatherFromTensorParallelRegion",
           "_ReduceScatterToTensorParallelRegion", "_reduce", "_split_along_last_dim", "_split_along_first_dim",
           "_gather_along_last_dim", "_gather_along_first_dim", "_reduce_scatter_along_first_dim",
           "_reduce_scatter_along_last_dim", "_get_cuda_rng_state", "_set_cuda_rng_state", "_fork_rng",
           "_get_all_rng_states", "_set_all_rng_states", "_VocabParallelCrossEntropy"}


def names_of(module_name: str, chosen=None) -> list[tuple[str, str, str]]:
    """(name, kernbench module, first docstring line) for each Megatron name `module_name` provides."""
    module = importlib.import_module(module_name)
    exported = getattr(module, "__all__", None)
    rows = []
    for name, value in vars(module).items():
        if chosen is not None and name not in chosen:
            continue
        defined_here = getattr(value, "__module__", None) == module_name and (
            inspect.isclass(value) or inspect.isfunction(value))
        if chosen is None and not (name in PRIVATE and defined_here) and not (
                not name.startswith("_") and (defined_here if exported is None else name in exported)):
            continue
        doc = inspect.getdoc(value) if inspect.isclass(value) or callable(value) else None
        rows.append((name, getattr(value, "__module__", module_name) or module_name,
                     (doc or "").split("\n\n")[0].replace("\n", " ").replace("|", "\\|")))
    return sorted(rows)


def render() -> str:
    lines = ["# The Megatron-LM surface of kernbench", "",
             "Generated from the code by `python docs/megatron_surface.py > docs/megatron-surface.md`; a test fails",
             "when this page differs from what the code generates. Each `megatron.core` module below is the kernbench",
             "module(s) to import in its place (`from kernbench.tp import parallel_state, tensor_parallel` for",
             "`from megatron.core import parallel_state, tensor_parallel`). The names are Megatron's, with",
             "Megatron's signatures, beside a few helpers of kernbench's own that the modules define (their",
             "docstrings say so); each description is the first paragraph of the docstring. A Megatron name not",
             "listed is not provided.", ""]
    for megatron, sources in MODULES.items():
        rows = []
        for source in sources:
            module, chosen = (source, None) if isinstance(source, str) else source
            rows.extend(names_of(module, chosen))
        lines += [f"## `{megatron}`", "", "| name | kernbench | description |", "|---|---|---|"]
        lines += [f"| `{name}` | `{where}` | {doc or '(no description)'} |" for name, where, doc in sorted(rows)]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(), end="")
