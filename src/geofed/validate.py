"""Checks for numbers from flags and files, at the edge, before anything starts.

Each is usable as an argparse `type=`: a bad value becomes argparse's one-line error
naming the flag; from elsewhere, `check(...)` raises UserError naming `where`.
"""

from __future__ import annotations

import argparse
import math


def _number(text, kind):
    try:
        value = kind(text)
    except (TypeError, ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_int(text) -> int:
    value = _number(text, int)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_int_list(text) -> list[int]:
    """Positive integers separated by commas (`--ranks 16,32,64`)."""
    values = [positive_int(x) for x in str(text).split(",") if x.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, got {text!r}")
    return values


def positive_float(text) -> float:
    value = _number(text, float)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def finite_float(text) -> float:
    return _number(text, float)


def nonnegative_int(text) -> int:
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def nonnegative_float(text) -> float:
    value = _number(text, float)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def probability(text) -> float:
    value = _number(text, float)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}")
    return value


def choices(allowed: tuple[str, ...], none: bool = False):
    """An argparse type: some of `allowed` separated by commas, returned in the order of
    `allowed` without repeats; with `none`, the word none stands for an empty list."""
    def parse(text) -> list[str]:
        given = [x.strip() for x in str(text).split(",") if x.strip()]
        if none and given == ["none"]:
            return []
        unknown = [x for x in given if x not in allowed]
        if unknown or not given:
            known = ", ".join(allowed) + (", or none" if none else "")
            what = f"unknown {unknown[0]!r}" if unknown else "nothing named"
            raise argparse.ArgumentTypeError(f"{what} (known: {known}; separate several with commas)")
        return [x for x in allowed if x in given]
    return parse


def read_text(path, what: str) -> str:
    """A text file the user named; UserError naming it when it cannot be read as UTF-8."""
    from geofed.errors import UserError
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise UserError(f"{path}: cannot read {what}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: {what} is not UTF-8 text (byte {e.start})") from None
