"""The runtime a bench programs against: the run, its tensors, their device ops, and the `torch` namespace.

Parts, each importing only the ones listed before it (tests/test_architecture.py
pins the order):

- the run's foundations, at this level: `errors`, `device` (device strings),
  `unsupported` (one line for a name kernbench lacks); then `current_run`,
  `streams`, `autograd` (the graph and backward pass);
- `layout/`: where a tensor's elements sit in its storage (views, boxes) and
  copies between storages;
- `launch/`: launching programs on the PEs (kernel launch, the port a
  program's ops go through, access plans) and Triton's driver;
- `ops/`: the op table — one row per device op, with its numpy
  implementation, dtype rule, forms, derivative and cost class — and the
  device ops that time and execute the rows;
- `tensor/`: `Tensor` itself, its methods generated from the op table, and
  moves between devices;
- `generators`, then `context`: the run's random generators and `RuntimeContext`;
- none of the four importing another: `spmd` (a spawn whose ranks do the same
  work simulated once, adr/0022-spmd-replication.md), and `nn/` (`torch.nn`:
  `Module`, `Parameter`, layers, `init`, `utils`), `optim/` (`torch.optim`:
  optimizers and learning-rate schedulers) and `data/` (`torch.utils.data`:
  datasets, samplers, the DataLoader, on the host), built on `tensor/` and the
  op table (adr/0020-nn-and-optim.md);
- `namespace/`: the modules a bench sees (`torch.*` factories, `torch.ahbm`,
  random, `torch.multiprocessing`, `import torch` during a run, the surface
  page).

`torch.distributed.tensor` builds on
`kernbench.ccl` (torch.distributed) and so lives above it, not here.
"""
