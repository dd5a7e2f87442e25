"""Spark Declarative Pipelines and Lakeflow pipelines, run unchanged as this asset graph: a
folder named in ``LAKEHOUSE_PIPELINES`` (a ``spark-pipeline.yml`` and its source files)
becomes one table asset per dataset (:func:`~.assets.pipeline_assets`)."""
