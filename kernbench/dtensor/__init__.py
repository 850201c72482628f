"""PyTorch's native tensor parallelism over `torch.distributed`: DeviceMesh, DTensor and parallelize_module."""

from kernbench.dtensor.device_mesh import DeviceMesh, init_device_mesh
from kernbench.dtensor.dtensor import DTensor, distribute_tensor
from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.placements import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "DTensorError", "DeviceMesh", "Partial", "Placement", "Replicate", "Shard", "distribute_tensor",
           "init_device_mesh"]
