"""Typed parameters: a frozen dataclass whose fields carry their help and how a
command-line word becomes their value. A workload's and a model's parameters are such
dataclasses; their command-line options are made from them, never written twice."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Callable

from geofed.validate import positive_float, positive_int


class Params:
    """Base of parameter classes: each subclass is a frozen dataclass of `param` fields."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(frozen=True)(cls)


class Declared:
    """Base of classes declared by keywords, as `class Latency(Model, name="mpi-latency")`:
    each keyword sets a class attribute the base defines; `help` is the docstring's first
    paragraph. The registries read these attributes and nothing is listed twice."""
    help: str = ""

    def __init_subclass__(cls, **declared):
        super().__init_subclass__()
        for key, value in declared.items():
            if not hasattr(cls, key):
                raise TypeError(f"{cls.__name__}: {key} is not something a {cls.__mro__[1].__name__} declares")
            setattr(cls, key, value)
        if cls.__doc__:
            cls.help = " ".join(cls.__doc__.split("\n\n")[0].split())


def param(default: Any, help: str, type: Callable[[str], Any] | None = None,
          choices: tuple[str, ...] | None = None) -> Any:
    """A field: its default, its help, and the word's parser (by default from the default's
    type: a positive integer or number, else the word itself) or its choices."""
    return dataclasses.field(default=default, metadata={"help": help, "type": type, "choices": choices})


def joined(parse: Callable[[str], list]) -> Callable[[str], str]:
    """A field's type for a list given as words separated by commas: checked by `parse` (an
    argparse type that returns the list) and kept as text, as a Params field holds it."""
    return lambda text: ",".join(map(str, parse(text)))


def add_options(ap: argparse.ArgumentParser, params_type: type) -> None:
    """One option per field: --field-name VALUE (a switch for a bool)."""
    for f in dataclasses.fields(params_type):
        flag, meta = "--" + f.name.replace("_", "-"), f.metadata
        if isinstance(f.default, bool):
            ap.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=meta["help"])
            continue
        parse = meta.get("type") or {int: positive_int, float: positive_float}.get(type(f.default), str)
        shown = "" if f.default is None else f" (default {f.default})"
        ap.add_argument(flag, type=None if meta.get("choices") else parse, choices=meta.get("choices"),
                        default=f.default, dest=f.name, help=meta["help"] + shown)


def from_args(params_type: type, args: argparse.Namespace):
    """The parameters from the options add_options made."""
    return params_type(**{f.name: getattr(args, f.name) for f in dataclasses.fields(params_type)})
