"""The errors tensor parallelism raises for a user's mistake."""

from kernbench.errors import KernbenchError


class ModelParallelError(KernbenchError):
    """Sizes that cannot be partitioned, or model-parallel state used before it was initialized."""


class NotDivisibleError(ModelParallelError, AssertionError):
    """A size the group cannot split evenly: an `AssertionError` too, as Megatron's `divide` and mappings assert."""


class NotInitializedError(ModelParallelError, AssertionError):
    """Model-parallel state used before `initialize_model_parallel`: an `AssertionError` too, as Megatron's
    getters assert their group is initialized."""


class StateNotInitializedRuntimeError(ModelParallelError, RuntimeError):
    """Model-parallel state used before `initialize_model_parallel` where Megatron raises a `RuntimeError` rather
    than asserting (`create_all_gather_groups`)."""


class MegatronAssertionError(ModelParallelError, AssertionError):
    """A use Megatron refuses with an assertion (an expert layer's bias added inside it): an `AssertionError` too."""
