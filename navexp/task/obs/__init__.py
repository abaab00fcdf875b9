"""Observation terms (registry with provenance and declared widths) and the group builder."""
