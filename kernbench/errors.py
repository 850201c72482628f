"""The root of kernbench's error types.

Every error a user can cause derives from `KernbenchError`. The command line
prints such an error as its one-line (or one-paragraph) message and exits with
status 2, so each subclass's message must be written for the person who caused
it: what was found, where, and what was expected.
"""


class KernbenchError(Exception):
    """An error caused by the user's input, reported without a traceback."""
