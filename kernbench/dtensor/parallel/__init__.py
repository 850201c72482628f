"""`torch.distributed.tensor.parallel`: `parallelize_module`, the parallel styles and `loss_parallel`."""

from kernbench.dtensor.parallel.api import parallelize_module
from kernbench.dtensor.parallel.loss import loss_parallel
from kernbench.dtensor.parallel.style import (ColwiseParallel, ParallelStyle, PrepareModuleInput, PrepareModuleOutput,
                                              RowwiseParallel, SequenceParallel)

__all__ = ["ColwiseParallel", "ParallelStyle", "PrepareModuleInput", "PrepareModuleOutput", "RowwiseParallel",
           "SequenceParallel", "loss_parallel", "parallelize_module"]
