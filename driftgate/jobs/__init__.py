"""Application jobs: plain functions that wire the domain steps to the adapters.

The CLI calls a job directly; the Prefect flows in ``flows/`` call the same step
functions as tasks. Nothing here imports Prefect.
"""
