"""`torch.distributed.tensor.parallel`: `parallelize_module` and the parallel styles."""

from kernbench.dtensor.parallel.api import parallelize_module
from kernbench.dtensor.parallel.style import (ColwiseParallel, ParallelStyle, PrepareModuleInput, PrepareModuleOutput,
                                              RowwiseParallel, SequenceParallel)

__all__ = ["ColwiseParallel", "ParallelStyle", "PrepareModuleInput", "PrepareModuleOutput", "RowwiseParallel",
           "SequenceParallel", "parallelize_module"]
