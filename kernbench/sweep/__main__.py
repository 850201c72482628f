"""`python -m kernbench.sweep SWEEP.yaml ...` is `kernbench sweep SWEEP.yaml ...`."""

import sys

from kernbench.sweep.command import main

sys.exit(main())
