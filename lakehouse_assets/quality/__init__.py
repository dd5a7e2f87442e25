"""Data quality: one contract per table drives asset checks, stream routing and quarantine.

- :mod:`~lakehouse_assets.quality.rules`: row rules as Spark Columns, with a severity.
- :mod:`~lakehouse_assets.quality.contract`: a Pandera PySpark model plus its rules.
- :mod:`~lakehouse_assets.quality.bronze`, ``silver``, ``gold``: the lakehouse's contracts.
- :mod:`~lakehouse_assets.quality.evaluation`: failing-row counts and samples, from the writes' commits or one pass.
- :mod:`~lakehouse_assets.quality.expectations`: rules enforced on each batch a table writes.
- :mod:`~lakehouse_assets.quality.quarantine`: the silver stream's routing (lossless).
- :mod:`~lakehouse_assets.quality.checks`: Dagster asset checks from a contract.
"""
