"""Plain Triton kernels that kernbench's benches and tests launch.

These files import only `triton`: they run unchanged on a real GPU with torch
tensors, which is how `tests/gpu/` cross-checks the simulator's numerics.
"""
