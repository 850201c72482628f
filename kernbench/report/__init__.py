"""Reports of a finished run: a dict for `--json`, and the same as readable text."""

from kernbench.report.run_report import format_report, run_report

__all__ = ["format_report", "run_report"]
