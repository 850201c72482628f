"""PyTorch's native tensor parallelism over `torch.distributed`: DeviceMesh, DTensor and parallelize_module."""

from kernbench.dtensor.device_mesh import DeviceMesh, init_device_mesh
from kernbench.dtensor.distribute_module import distribute_module
from kernbench.dtensor.dtensor import DTensor, distribute_tensor
from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.factories import empty, full, ones, rand, randn, zeros
from kernbench.dtensor.placements import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "DTensorError", "DeviceMesh", "Partial", "Placement", "Replicate", "Shard", "distribute_module",
           "distribute_tensor", "empty", "full", "init_device_mesh", "ones", "rand", "randn", "zeros"]
