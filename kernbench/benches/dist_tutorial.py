"""PyTorch's "Writing Distributed Applications" tutorial, snippet by snippet, with only device names edited.

The module is written as the tutorial writes it: `import torch`,
`import torch.distributed as dist`, `import torch.multiprocessing as mp`
(kernbench's namespace while kernbench runs the bench, ADR 0005). Each
`run_*` below is the tutorial's `run(rank, size)` of one section, as printed
there, except that tensors are made on the worker's device
(`device=f"cuda:{rank}"`: "cuda" is the simulated ahbm device) instead of the
CPU, and that it returns what the rank holds, for the check. They are started
as the tutorial's `__main__` block starts them, here in the bench's
`run(torch)`: `mp.set_start_method("spawn")`, one
`mp.Process(target=init_process, ...)` per rank, `init_process_group` in
each worker, then `join`. Every section runs on 2 ranks (the tutorial's
`world_size = 2`) over SIPs 0 and 1, and then `bench_check` compares what
each rank holds with what the tutorial says it prints; the ring all-reduce
section (`isend` to the right, `recv` from the left) checks its sum against
`dist.all_reduce`. The tutorial prints its tensors, so the bench needs
values: with --timing-only it stops at once with one line saying so.
"""

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from kernbench.errors import KernbenchError


class TutorialNeedsValues(KernbenchError):
    """The tutorial prints the tensors it holds: there are none to print with --timing-only (one line, status 2)."""

SECTIONS = []


def section(fn):
    SECTIONS.append(fn)
    return fn


def run(_torch):
    """The tutorial's `__main__` block, once per section (the bench's `torch` argument is the imported `torch`)."""
    if torch.is_timing_only():
        raise TutorialNeedsValues("dist_tutorial prints the tutorial's tensors, which --timing-only does not compute: "
                                  "run it with values")
    held = {}

    def init_process(rank, size, fn, backend="gloo"):
        """ Initialize the distributed environment. """
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = "29500"
        dist.init_process_group(backend, rank=rank, world_size=size)
        held.setdefault(fn.__name__, {})[rank] = fn(rank, size)
        dist.destroy_process_group()

    world_size = 2
    mp.set_start_method("spawn")
    for fn in SECTIONS:
        processes = []
        for rank in range(world_size):
            p = mp.Process(target=init_process, args=(rank, world_size, fn))
            p.start()
            processes.append(p)
        for p in processes:
            p.join()
    bench_check(held)
    print(f"  {len(SECTIONS)} sections of the distributed tutorial: OK")


# ---- the tutorial's sections ---------------------------------------------------------------

@section
def run_blocking_p2p(rank, size):
    """Blocking point-to-point communication."""
    tensor = torch.zeros(1, device=f"cuda:{rank}")
    if rank == 0:
        tensor += 1
        # Send the tensor to process 1
        dist.send(tensor=tensor, dst=1)
    else:
        # Receive tensor from process 0
        dist.recv(tensor=tensor, src=0)
    print("Rank ", rank, " has data ", tensor[0])
    return float(tensor[0])


@section
def run_non_blocking_p2p(rank, size):
    """Non-blocking point-to-point communication."""
    tensor = torch.zeros(1, device=f"cuda:{rank}")
    req = None
    if rank == 0:
        tensor += 1
        # Send the tensor to process 1
        req = dist.isend(tensor=tensor, dst=1)
        print("Rank 0 started sending")
    else:
        # Receive tensor from process 0
        req = dist.irecv(tensor=tensor, src=0)
        print("Rank 1 started receiving")
    req.wait()
    print("Rank ", rank, " has data ", tensor[0])
    return float(tensor[0])


@section
def run_all_reduce(rank, size):
    """All-Reduce example."""
    group = dist.new_group([0, 1])
    tensor = torch.ones(1, device=f"cuda:{rank}")
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    print("Rank ", rank, " has data ", tensor[0])
    return float(tensor[0])


@section
def run_collectives(rank, size):
    """The collectives the tutorial lists: broadcast, reduce, scatter, gather, all_gather, all_to_all, barrier."""
    device = f"cuda:{rank}"
    tensor = torch.full((2,), float(rank + 1), device=device)
    dist.broadcast(tensor, src=0)
    got = {"broadcast": tensor.tolist()}
    tensor = torch.full((2,), float(rank + 1), device=device)
    dist.reduce(tensor, dst=1, op=dist.ReduceOp.SUM)
    got["reduce"] = tensor.tolist()
    tensor = torch.zeros(2, device=device)
    scatter_list = [torch.full((2,), float(10 * (r + 1)), device=device) for r in range(size)] if rank == 0 else None
    dist.scatter(tensor, scatter_list, src=0)
    got["scatter"] = tensor.tolist()
    tensor = torch.full((2,), float(rank + 1), device=device)
    gather_list = [torch.zeros(2, device=device) for _ in range(size)] if rank == 0 else None
    dist.gather(tensor, gather_list, dst=0)
    got["gather"] = [t.tolist() for t in gather_list] if rank == 0 else None
    tensor_list = [torch.zeros(2, device=device) for _ in range(size)]
    dist.all_gather(tensor_list, torch.full((2,), float(rank + 1), device=device))
    got["all_gather"] = [t.tolist() for t in tensor_list]
    inputs = [torch.full((2,), float(10 * rank + r), device=device) for r in range(size)]
    outputs = [torch.zeros(2, device=device) for _ in range(size)]
    dist.all_to_all(outputs, inputs)
    got["all_to_all"] = [t.tolist() for t in outputs]
    dist.barrier()
    print("Rank ", rank, " has data ", got)
    return got


@section
def run_average_gradients(rank, size):
    """Distributed training's `average_gradients`, on a linear model's parameters."""
    torch.manual_seed(1234)
    weight = torch.nn.Parameter(torch.ones(4, 3, device=f"cuda:{rank}"))
    x = torch.full((2, 4), float(rank + 1), device=f"cuda:{rank}")
    (x @ weight).sum().backward()
    average_gradients([weight])
    return weight.grad.tolist()


def average_gradients(parameters):
    """ Gradient averaging. """
    size = float(dist.get_world_size())
    for param in parameters:
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= size


@section
def run_ring_all_reduce(rank, size):
    """Our own ring all-reduce, checked against dist.all_reduce."""
    send = torch.arange(4, dtype=torch.float32, device=f"cuda:{rank}") * (rank + 1)
    recv = torch.zeros(4, device=f"cuda:{rank}")
    allreduce(send, recv)
    reference = send.clone()
    dist.all_reduce(reference, op=dist.ReduceOp.SUM)
    return recv.tolist(), reference.tolist()


def allreduce(send, recv):
    """ Implementation of a ring-reduce with addition. """
    rank = dist.get_rank()
    size = dist.get_world_size()
    send_buff = send.clone()
    recv_buff = send.clone()
    accum = send.clone()

    left = ((rank - 1) + size) % size
    right = (rank + 1) % size

    for i in range(size - 1):
        if i % 2 == 0:
            # Send send_buff
            send_req = dist.isend(send_buff, right)
            dist.recv(recv_buff, left)
            accum[:] += recv_buff[:]
        else:
            # Send recv_buff
            send_req = dist.isend(recv_buff, right)
            dist.recv(send_buff, left)
            accum[:] += send_buff[:]
        send_req.wait()
    recv[:] = accum[:]


def bench_check(held):
    """What the tutorial says each section prints, for its 2 ranks."""
    expected = {
        "run_blocking_p2p": {0: 1.0, 1: 1.0},
        "run_non_blocking_p2p": {0: 1.0, 1: 1.0},
        "run_all_reduce": {0: 2.0, 1: 2.0},
        "run_collectives": {r: {
            "broadcast": [1.0, 1.0], "reduce": [1.0, 1.0] if r == 0 else [3.0, 3.0],
            "scatter": [10.0 * (r + 1)] * 2, "gather": [[1.0, 1.0], [2.0, 2.0]] if r == 0 else None,
            "all_gather": [[1.0, 1.0], [2.0, 2.0]], "all_to_all": [[float(10 * s + r)] * 2 for s in range(2)],
        } for r in range(2)},
        "run_average_gradients": {r: [[3.0] * 3] * 4 for r in range(2)},  # rank r's gradient is 2(r + 1)
        "run_ring_all_reduce": {r: ([0.0, 3.0, 6.0, 9.0], [0.0, 3.0, 6.0, 9.0]) for r in range(2)},
    }
    for name, want in expected.items():
        if held.get(name) != want:
            raise AssertionError(f"  {name}: the ranks hold {held.get(name)}, the tutorial expects {want}")
