"""The journal: one JSON line per finished point, appended as each finishes — the sweep's record of truth.

Every other file in the output folder (the CSV, Parquet, the summary) is
rebuilt from it. A line is written and synced in one `write`, so a process
killed mid-write leaves at most one torn last line; reading skips it, and
the next append starts on a line of its own. A point run again (`--fresh`,
`--retry-failed`) gets a new line: the last line for an input hash wins.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

JOURNAL_NAME = "results.jsonl"


class Journal:
    """The journal file of one output folder."""

    def __init__(self, folder: Path):
        self.path = folder / JOURNAL_NAME

    def records(self) -> list[dict]:
        """Every complete record, oldest first; a torn or foreign line is skipped."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        records = []
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("key"), str):
                records.append(record)
        return records

    def latest(self) -> dict[str, dict]:
        """The last record of each input hash."""
        return {record["key"]: record for record in self.records()}

    def append(self, record: dict) -> dict:
        """Add `record` as one line, on disk before this returns; return it as the journal holds it (as
        `records` would read it back)."""
        line = json.dumps(record, sort_keys=True, default=str) + "\n"
        with open(self.path, "ab") as file:
            if file.tell() and not _ends_with_newline(self.path):
                line = "\n" + line  # a torn line from a killed run stays alone on its line
            file.write(line.encode("utf-8"))
            file.flush()
            os.fsync(file.fileno())
        return json.loads(line)


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as file:
        file.seek(-1, os.SEEK_END)
        return file.read(1) == b"\n"
