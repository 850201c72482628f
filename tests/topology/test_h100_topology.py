"""ADR 0008 T8-T12: topology/h100.yaml's derived facts are the H100 SXM5's published numbers, in closed form.

The machine the GEMM fidelity check runs on (adr/0008-cost-model.md, "A GEMM
fidelity check against a real H100"): one SIP whose 132 PEs are the SMs.
Every figure below is NVIDIA's (H100 datasheet, SXM5 column, and the
Hopper whitepaper), recomputed from the file's keys, so an edit that breaks
one of them fails here rather than in a GPU comparison nobody runs in CI.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from kernbench.kernels import DeviceProperties
from kernbench.topology import load_topology

H100_YAML = Path(__file__).resolve().parents[2] / "topology" / "h100.yaml"

SMS = 132
TENSOR_FLOPS_PER_SM_PER_CYCLE = 4 * 512 * 2  # 4 tensor cores x 512 dense f16 FMA a clock x 2 flops
TENSOR_CLOCK_HZ = 1_830_000_000  # the clock the datasheet's tensor peaks are quoted at
MAX_BOOST_HZ = 1_980_000_000  # the clock of its FP32 / FP64 vector peaks
PUBLISHED = {
    "f16_dense_flops": 989.4e12,
    "i8_dense_ops": 1978.9e12,
    "fp32_vector_flops": 66.9e12,
    "hbm_bytes_per_s": 3.35e12,
}


@pytest.fixture(scope="module")
def h100():
    return load_topology(H100_YAML)


def close(value, published, within=Fraction(1, 1000)):
    return abs(Fraction(value) / Fraction(published) - 1) <= within


def test_adr0008_t8_the_h100_topology_is_one_sip_of_132_pes(h100):
    """ADR 0008 T8: one SIP, PEs = the 132 SMs (4 memory partitions x 33), as a GPU driver would report."""
    assert h100.n_sips == 1
    assert h100.pes_per_sip == h100.total_pes == SMS
    assert h100.cubes_per_sip * h100.pes_per_cube == SMS
    properties = DeviceProperties.from_topology(h100, 0)
    assert properties.pe_count == SMS  # torch.cuda.get_device_properties(0).multi_processor_count on the H100
    assert properties.clock_hz == TENSOR_CLOCK_HZ


def test_adr0008_t9_peak_matrix_rates_are_the_datasheets_dense_peaks(h100):
    """ADR 0008 T9: peak f16 = 132 x 4096 flop/cycle x 1.83 GHz = 989.4 TFLOP/s; bf16 the same; i8 twice."""
    assert h100.pe.matrix_unit.rate("f16") == TENSOR_FLOPS_PER_SM_PER_CYCLE
    assert h100.sip_peak_flops("f16") == SMS * TENSOR_FLOPS_PER_SM_PER_CYCLE * TENSOR_CLOCK_HZ
    assert close(h100.sip_peak_flops("f16"), PUBLISHED["f16_dense_flops"])
    assert h100.sip_peak_flops("bf16") == h100.sip_peak_flops("f16")
    assert close(h100.sip_peak_flops("i8"), PUBLISHED["i8_dense_ops"])


def test_adr0008_t10_vector_lanes_are_the_sms_fp32_lanes(h100):
    """ADR 0008 T10: 128 lanes x 2 flops (FMA) x 132 SMs at the 1.98 GHz boost clock = the datasheet's 66.9 TFLOP/s."""
    assert close(h100.pe.vector_unit.lanes * 2 * SMS * MAX_BOOST_HZ, PUBLISHED["fp32_vector_flops"])


def test_adr0008_t11_hbm_is_80_gib_at_3_35_tb_per_s_over_all_cubes(h100):
    """ADR 0008 T11: the cubes' HBM adds up to 80 GiB and exactly 3.35 TB/s; each cube holds an equal share."""
    total_bandwidth = h100.cube.hbm.bandwidth_bytes_per_s * h100.cubes_per_sip
    assert total_bandwidth == 3_350_000_000_000 == PUBLISHED["hbm_bytes_per_s"]
    assert h100.hbm_bytes_per_sip == 80 * 2**30
    # The ridge point of the roofline the GEMM bench's "bound" column uses: ~295 flops per byte.
    assert 290 < h100.sip_peak_flops("f16") / total_bandwidth < 300


def test_adr0008_t12_tcm_is_the_sms_shared_memory(h100):
    """ADR 0008 T12: TCM = 228 KiB of shared memory a SM, its port 32 banks x 4 bytes a clock."""
    assert h100.pe.tcm.capacity_bytes == 228 * 1024
    assert h100.pe.tcm.bandwidth_bytes_per_s == 32 * 4 * TENSOR_CLOCK_HZ
    # The library GEMM's three pipeline stages of 64x32 and 32x64 f16 tiles (24 KiB) fit 9 times.
    assert h100.pe.tcm.capacity_bytes // (3 * (64 * 32 + 32 * 64) * 2 + 1024) == 9
