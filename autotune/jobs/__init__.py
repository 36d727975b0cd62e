"""Scheduled work over the store: nightly jobs (plan, re-tune, verify) and reports."""
