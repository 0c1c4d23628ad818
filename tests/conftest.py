"""Suite-wide pytest hooks."""

from __future__ import annotations

import pytest

NAMED_FAILURES = 5


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the failed tests in pytest's last line too: CI reports keep only that line, and a
    failure that happens only there is otherwise anonymous."""
    stats = terminalreporter.stats
    failed = [*stats.get("failed", []), *stats.get("error", [])]
    for report in failed[:NAMED_FAILURES]:
        stats.setdefault(f"failed: {report.nodeid}", []).append(report)
