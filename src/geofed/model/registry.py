"""Every workload model by name: `geofed predict NAME`, `geofed advise NAME`."""

from __future__ import annotations

from geofed.errors import UserError
from geofed.model import grayscott, hpl, mdfs, mpi, obstacle, transfer

MODELS = {m.name: m for m in (*mpi.MODELS, *mdfs.MODELS, *obstacle.MODELS, *grayscott.MODELS, *transfer.MODELS,
                                  *hpl.MODELS)}


def get(name: str):
    try:
        return MODELS[name]
    except KeyError:
        raise UserError(f"unknown workload {name!r}; known: {', '.join(MODELS)}") from None
