"""ADR 0019: the page's one utilization scale, which fills every resource it paints and draws its legend."""

from __future__ import annotations

import pytest

from kernbench.web.utilization_scale import IDLE, LIGHT_INK, STOPS, colour, ink, legend, relative_luminance


def rgb(fill: str) -> tuple[int, ...]:
    return tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))


@pytest.mark.quick
def test_adr0019_t38_the_scale_is_grey_when_idle_and_darkens_with_utilization_through_the_legends_stops():
    assert colour(0) == colour(0.0) == colour(-1) == IDLE
    steps = [colour(k / 100) for k in range(1, 101)]
    assert IDLE not in steps and all(len(fill) == 7 and fill[0] == "#" for fill in steps)
    luminance = [relative_luminance(fill) for fill in steps]
    assert all(a > b for a, b in zip(luminance, luminance[1:]))  # busier is darker, step by step
    assert colour(1.0) == colour(1.7) == "#%02x%02x%02x" % STOPS[-1][1]  # above 100% (rounding) is 100%
    # The legend's ramp is the stops; between two, the fill is the straight line a CSS gradient draws.
    assert legend() == {"idle": IDLE, "stops": [[u, "#%02x%02x%02x" % c] for u, c in STOPS]}
    (u0, c0), (u1, c1) = STOPS[0], STOPS[1]
    middle = (u0 + u1) / 2
    assert all(abs(got - (a + b) / 2) <= 0.5 for got, a, b in zip(rgb(colour(middle)), c0, c1))
    assert ink(colour(1.0)) == LIGHT_INK != ink(colour(0.01))  # a label stays readable on the darkest fill
