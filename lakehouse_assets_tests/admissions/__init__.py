"""A second source unlike the reference, declared the way a user would add one: ward
admissions landing as CSV, a bronze table over them, a SQL silver table with DROP ROW
constraints (and so a quarantine), and a Python gold table. Nothing else is written: the
landing asset, its sensor, checks, freshness and replay come from these declarations."""
