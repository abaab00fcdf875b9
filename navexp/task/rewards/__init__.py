"""Reward terms (registry), the weighted sum with per-term episode sums, and the termination logic."""
