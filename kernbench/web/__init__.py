"""kernbench.web: a local page showing the machine, a run's utilization, its report and timeline (`kernbench web`)."""

from kernbench.web.machine_model import machine_model
from kernbench.web.page_data import WebInputError, page_data, read_inputs, topology_for
from kernbench.web.server import WebServerError, make_server

__all__ = ["WebInputError", "WebServerError", "machine_model", "make_server", "page_data", "read_inputs",
           "topology_for"]
