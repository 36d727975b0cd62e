"""Tuning: the one search loop over any backend, the tuner that drives it per shape, and replay."""
