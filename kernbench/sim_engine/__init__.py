"""kernbench's discrete-event engine: integer-picosecond time, greenlet processes, resources, op log, trace."""

from kernbench.sim_engine.engine import Engine
from kernbench.sim_engine.errors import Deadlock, EngineUsageError, ProcessFailed
from kernbench.sim_engine.events import Event, Timeout
from kernbench.sim_engine.op_log import LabelTotals, OpLog, OpRecord, UnitUsage
from kernbench.sim_engine.process import Process, Task
from kernbench.sim_engine.resources import Channel, ExclusiveUnit, Route, transfer, transfer_and_wait
from kernbench.sim_engine.trace import chrome_trace_events, write_chrome_trace

__all__ = [
    "Channel",
    "Deadlock",
    "Engine",
    "EngineUsageError",
    "Event",
    "ExclusiveUnit",
    "LabelTotals",
    "OpLog",
    "OpRecord",
    "Process",
    "ProcessFailed",
    "Route",
    "Task",
    "Timeout",
    "UnitUsage",
    "chrome_trace_events",
    "transfer",
    "transfer_and_wait",
    "write_chrome_trace",
]
