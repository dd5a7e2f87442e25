"""Helpers of the CLI tests: find the installed command, make Delta tables and checkpoints.

Tables are made with ``deltalake.write_deltalake``, not Spark: making them starts no JVM.
"""

from __future__ import annotations

import os
import struct
import sys
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, write_deltalake

# The console script pip installed next to this interpreter ([project.scripts] in pyproject).
CONSOLE_SCRIPT = Path(sys.executable).parent / "lakehouse"
TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class Result:
    """What one run of the command did."""

    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        # pytest prints this when an assertion on a result fails: show everything.
        return (f"lakehouse {' '.join(self.args)} -> exit {self.code}\n"
                f"--- stdout ---\n{self.stdout}--- stderr ---\n{self.stderr}")


Runner = Callable[..., Result]


def command(via: str = "script") -> list[str]:
    """The argv prefix of the installed console script, or of ``python -m``."""
    if via == "module":
        return [sys.executable, "-m", "lakehouse_assets.cli"]
    if not CONSOLE_SCRIPT.exists():
        pytest.fail(f"{CONSOLE_SCRIPT} is missing: run `.venv/bin/pip install -e .` to install it")
    return [str(CONSOLE_SCRIPT)]


def cli_env(root: Path | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a run: ours, with LAKEHOUSE_ROOT set to ``root`` (or unset)."""
    env = {k: v for k, v in os.environ.items() if k != "LAKEHOUSE_ROOT"}
    if root is not None:
        env["LAKEHOUSE_ROOT"] = str(root)
    env.update(extra or {})
    return env


def write_table(root: Path, table: str, data: pa.Table | Mapping[str, Sequence[object]], *,
                mode: str = "append", custom_metadata: Mapping[str, str] | None = None) -> Path:
    """Write ``data`` to the Delta table ``layer.name`` under ``root``; returns its folder."""
    layer, name = table.split(".")
    path = root / layer / name
    arrow = data if isinstance(data, pa.Table) else pa.table(dict(data))
    properties = CommitProperties(custom_metadata=dict(custom_metadata)) if custom_metadata else None
    write_deltalake(str(path), arrow, mode=mode, commit_properties=properties)
    return path


def hadoop_checksum(data: bytes, chunk: int = 512) -> bytes:
    """A ``.crc`` file as Hadoop's local file system writes it beside a file."""
    sums = b"".join(struct.pack(">I", zlib.crc32(data[i:i + chunk])) for i in range(0, len(data), chunk))
    return b"crc\0" + struct.pack(">i", chunk) + sums


def write_checkpoint(root: Path, table: str, *, committed: int | None, planned: int | None,
                     offset: str = ('{"sourceVersion":1,"reservoirId":"no-such-table","reservoirVersion":4,'
                                    '"index":-1,"isStartingVersion":false}'),
                     query_id: str = "3f1c0d2e-query") -> Path:
    """A checkpoint folder shaped like Spark's: ``metadata``, ``offsets/N``, ``commits/N``."""
    layer, name = table.split(".")
    folder = root / "_checkpoints" / layer / name
    (folder / "offsets").mkdir(parents=True)
    (folder / "commits").mkdir()
    (folder / "metadata").write_text(f'{{"id":"{query_id}"}}\n')
    for batch in range(planned + 1 if planned is not None else 0):
        text = f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":{batch}}}\n{offset}\n'.encode()
        (folder / "offsets" / str(batch)).write_bytes(text)
        (folder / "offsets" / f".{batch}.crc").write_bytes(hadoop_checksum(text))
    for batch in range(committed + 1 if committed is not None else 0):
        (folder / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    return folder

