"""End-to-end tests: the real Dagster daemon and webserver over a temporary lakehouse."""
