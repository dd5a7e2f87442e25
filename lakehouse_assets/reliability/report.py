"""What an invariant check found: violations that name the table and the rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# How many offending rows or files a violation quotes; the count says how many there are.
SAMPLE_SIZE = 5


def quote(columns: Iterable[str], rows: Counter[tuple[Any, ...]]) -> list[str]:
    """A few of ``rows`` as ``{column: value}`` text, each with how many times it counts."""
    names = list(columns)
    return [f"{dict(zip(names, row, strict=True))}" + (f" x{n}" if n > 1 else "")
            for row, n in list(rows.items())[:SAMPLE_SIZE]]


@dataclass(frozen=True)
class Violation:
    """One broken promise: which invariant, on which table, what exactly is wrong."""

    invariant: str
    table: str
    message: str
    #: A few of the offending rows, files or versions, as text.
    samples: tuple[str, ...] = ()

    def __str__(self) -> str:
        text = f"[{self.invariant}] {self.table}: {self.message}"
        for sample in self.samples:
            text += f"\n    {sample}"
        return text


@dataclass
class InvariantResult:
    """The outcome of one invariant: its violations, or why it could not be checked."""

    name: str
    description: str
    violations: list[Violation] = field(default_factory=list)
    #: Set when there was nothing to check (e.g. no table yet); a skip is not a failure.
    skipped: str | None = None
    #: The tables checked, and those passed over with why (neither is a failure).
    checked: list[str] = field(default_factory=list)
    passed_over: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def add(self, table: str, message: str, samples: list[str] | tuple[str, ...] = ()) -> None:
        """Record a violation of this invariant on ``table``."""
        self.violations.append(Violation(self.name, table, message, tuple(samples)[:SAMPLE_SIZE]))


@dataclass
class InvariantReport:
    """Every invariant's result, in the order they were checked."""

    results: list[InvariantResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def violations(self) -> list[Violation]:
        return [v for r in self.results for v in r.violations]

    def result(self, name: str) -> InvariantResult:
        """The result of the invariant called ``name``."""
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(name)

    def summary(self) -> str:
        """One line per invariant (``ok``, ``FAILED (n)`` or ``skipped``), then each violation."""
        lines = []
        for r in self.results:
            verdict = (
                "ok" if r.ok and not r.skipped
                else (f"skipped: {r.skipped}" if r.ok else f"FAILED ({len(r.violations)})")
            )
            lines.append(f"{r.name:<22} {verdict}  - {r.description}")
            if r.checked:
                lines.append(f"{'':<22} checked: {', '.join(r.checked)}")
            lines.extend(f"{'':<22} not checked: {why}" for why in r.passed_over)
        lines.extend(str(v) for v in self.violations)
        return "\n".join(lines)
