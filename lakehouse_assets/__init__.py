"""lakehouse_assets: an incremental lakehouse as a Dagster asset graph on Spark and Delta Lake.

``defs`` is loaded on first access, so importing a submodule (as Spark's Python workers do)
does not import Dagster and the whole asset graph.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "defs":
        from lakehouse_assets.definitions import defs

        return defs
    raise AttributeError(f"module 'lakehouse_assets' has no attribute {name!r}")


def __dir__() -> list[str]:
    return ["defs"]
