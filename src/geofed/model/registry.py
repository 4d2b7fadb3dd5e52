"""Every workload model by name: `geofed predict NAME`, `geofed advise NAME`.

The models are the `MODELS` of the modules of this package: a new model is one new
module, found here without a list to keep."""

from __future__ import annotations

import importlib
import pkgutil

import geofed.model
from geofed.errors import UserError


def _find() -> dict:
    found = {}
    for info in pkgutil.iter_modules(geofed.model.__path__):
        for m in getattr(importlib.import_module(f"geofed.model.{info.name}"), "MODELS", ()):
            assert m.name not in found, f"two models named {m.name}"
            found[m.name] = m
    return found


MODELS = _find()


def get(name: str):
    try:
        return MODELS[name]
    except KeyError:
        raise UserError(f"unknown workload {name!r}; known: {', '.join(MODELS)}") from None
