"""The one error type of the topology layer.

A malformed topology file, or a question about a SIP, cube or dtype the
loaded machine does not have, is the user's to fix; the message says where
(file, line, key path) and what was expected, so the CLI can print it alone.
"""

from kernbench.errors import KernbenchError


class TopologyError(KernbenchError):
    """A topology file that cannot be used, or a query outside the machine it describes."""
