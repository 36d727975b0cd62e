"""The runtime path kernel code calls: the lookup, miss recording, the Triton drop-in and exports.

Importing this package imports nothing heavy: no optuna, typer, alembic or torch, and no CUDA."""
