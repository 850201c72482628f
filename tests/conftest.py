"""Project-wide test wiring: ADR markers derived from test names.

A test that implements row `Tn` of `adr/NNNN-*.md` is named
`test_adrNNNN_tn_<behaviour>`. This hook gives it the marker `adrNNNN`, so
`pytest -m adr0003` runs one decision record's matrix.
"""

from __future__ import annotations

import re
from pathlib import Path

ADR_TEST_NAME = re.compile(r"^test_adr(\d{4})_t(\d+)_")
ADR_DIR = Path(__file__).resolve().parent.parent / "adr"


def pytest_configure(config):
    for record in sorted(ADR_DIR.glob("[0-9][0-9][0-9][0-9]-*.md")):
        number = record.name[:4]
        config.addinivalue_line("markers", f"adr{number}: tests of {record.name}")


def pytest_collection_modifyitems(config, items):
    # A test may name a record that does not exist yet; it still gets its marker,
    # and tests/test_adr_matrix.py reports the missing record.
    registered = {line.split(":")[0] for line in config.getini("markers")}
    for item in items:
        match = ADR_TEST_NAME.match(getattr(item, "originalname", item.name))
        if match:
            marker = f"adr{match.group(1)}"
            if marker not in registered:
                config.addinivalue_line("markers", f"{marker}: tests of a record not written yet")
                registered.add(marker)
            item.add_marker(marker)
