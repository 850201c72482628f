"""`python -m kernbench` is the same as the `kernbench` command."""

import sys

from kernbench.cli import main

sys.exit(main())
