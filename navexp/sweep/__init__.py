"""Optuna studies through Hydra: search spaces, the sweeper, in-trial reporting and the report."""
