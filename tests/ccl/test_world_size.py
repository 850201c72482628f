"""ADR 0012: a world of one rank per SIP is allowed whatever the PE count of one SIP."""

from __future__ import annotations

import numpy as np

from kernbench.session import Session
from tests.cli import REPO_ROOT


def test_adr0012_t73_world_size_equal_to_the_sip_count_runs_rank_per_sip_beyond_one_sips_pes(tmp_path):
    """4 SIPs of one cube with one PE each: world size 4 is more than a SIP's PEs, and still one rank per SIP."""
    shipped = (REPO_ROOT / "kernbench/configs/topology/default.yaml").read_text()
    topology = tmp_path / "one_pe_sips.yaml"
    topology.write_text(shipped.replace("cube_mesh: {w: 2, h: 2}", "cube_mesh: {w: 1, h: 1}")
                        .replace("corners: [nw, ne, sw, se], pe_per_corner: 2", "corners: [nw], pe_per_corner: 1"))
    session = Session(str(topology))
    results = {}

    def worker(rank, torch):
        torch.ahbm.set_device(rank)
        x = torch.full((64,), rank + 1.0, dtype=torch.float32)
        torch.distributed.all_reduce(x)
        results[rank] = x.numpy()

    def bench(torch):
        torch.distributed.init_process_group(backend="ahbm")
        assert torch.distributed.get_world_size() == 4 > session.ctx.topology.pes_per_sip
        torch.multiprocessing.spawn(worker, args=(torch,), nprocs=4)

    session.run(bench, session.torch)
    assert {rank: float(np.unique(values)[0]) for rank, values in results.items()} == {r: 10.0 for r in range(4)}
    assert [record["ranks"] for record in session.ctx.collectives] == [[0, 1, 2, 3]]
