"""The page's one utilization scale: the fill of every resource it paints, and its legend, from one function.

A resource the run never kept busy is grey (`IDLE`); one busy a fraction
u > 0 of the run is `colour(u)`, linear in sRGB between the `STOPS` —
yellow, orange, dark red — so busier is darker. The legend's ramp is a CSS
gradient through the same stops, which a browser interpolates in sRGB too:
the legend at u shows the colour a resource busy u is filled with. The
colours are computed here, not in the browser, so a test without one can
check them.
"""

from __future__ import annotations

IDLE = "#c7ccd4"
STOPS = ((0.0, (0xfa, 0xcc, 0x15)), (0.5, (0xf9, 0x73, 0x16)), (1.0, (0xb9, 0x1c, 0x1c)))
DARK_INK, LIGHT_INK = "#1f2937", "#ffffff"
LIGHT_INK_BELOW = 0.25  # relative luminance of a fill under which its label is written in white


def colour(utilization: float) -> str:
    """`#rrggbb` of a resource busy `utilization` of the run: IDLE at 0 (or less), the scale above it, 1 beyond 1."""
    return ramp(min(1.0, utilization)) if utilization > 0 else IDLE


def ramp(u: float) -> str:
    """The scale's colour at `u` in [0, 1]: linear in sRGB between the two stops around it."""
    for (u0, c0), (u1, c1) in zip(STOPS, STOPS[1:]):
        if u <= u1:
            t = (u - u0) / (u1 - u0)
            return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(c0, c1))
    raise ValueError(f"{u} is beyond the scale's last stop, {STOPS[-1][0]}")


def ink(fill: str) -> str:
    """The colour a label is written in on `fill`: white on the dark end of the scale, else the page's ink."""
    return LIGHT_INK if relative_luminance(fill) < LIGHT_INK_BELOW else DARK_INK


def relative_luminance(fill: str) -> float:
    """WCAG's relative luminance of `#rrggbb`: 0 for black, 1 for white."""
    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (int(fill[i:i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)


def legend() -> dict:
    """What the page's legend draws: the idle colour and the ramp's stops, `[utilization, colour]`."""
    return {"idle": IDLE, "stops": [[u, ramp(u)] for u, _ in STOPS]}
