"""Print docs/torch-surface.md from the code: `python docs/torch_surface.py > docs/torch-surface.md`.

The page lists the names of a run's torch namespace (kernbench.runtime_api.namespace.surface
renders it); tests/runtime_api/test_surface.py fails when the committed page differs.
"""

from kernbench.runtime_api.namespace.surface import render_surface
from kernbench.session import Session

if __name__ == "__main__":
    print(render_surface(Session("default").torch), end="")
