"""Checks for numbers from flags and files, at the edge, before anything starts.

Each number check is usable as an argparse `type=`: a bad value becomes argparse's
one-line error naming the flag. Sizes have one grammar (`parse_size`: 64K, 1.5G, 4MiB);
`parse_size` and `parse_sizes` raise UserError naming `where`.
"""

from __future__ import annotations

import argparse
import math
import re


def _number(text, kind):
    try:
        value = kind(text)
    except (TypeError, ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _bounded(kind, within, expected: str):
    """An argparse type: a finite number of `kind` for which `within(value)` holds."""
    def check(text):
        value = _number(text, kind)
        if not within(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value
    return check


positive_int = _bounded(int, lambda v: v > 0, "a positive integer")
positive_float = _bounded(float, lambda v: v > 0, "a positive number")
nonnegative_int = _bounded(int, lambda v: v >= 0, "an integer >= 0")
nonnegative_float = _bounded(float, lambda v: v >= 0, "a number >= 0")
probability = _bounded(float, lambda v: 0 <= v <= 1, "a number from 0 to 1")


def _listed(parse, expected: str):
    """An argparse type: values `parse` accepts, separated by commas."""
    def check(text) -> list:
        values = [parse(x) for x in str(text).split(",") if x.strip()]
        if not values:
            raise argparse.ArgumentTypeError(f"expected {expected} separated by commas, got {text!r}")
        return values
    return check


positive_int_list = _listed(positive_int, "positive integers")  # --ranks 16,32,64
positive_float_list = _listed(positive_float, "positive numbers")  # --rtt 0.145,9


def finite_float(text) -> float:
    return _number(text, float)


# One grammar for every size geofed reads: bytes, or a number with K, M, G or T (powers
# of 1024, as OSU, IOzone and dd count), an optional "iB" or "B" after it: 64K, 1.5G, 4MiB.
_SIZE_RE = re.compile(r"^([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([KMGT]?)(?:I?B)?$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(text) -> int | None:
    """The bytes `text` names, or None when it names no size (or less than a byte)."""
    m = _SIZE_RE.match(str(text).strip())
    value = float(m.group(1)) * _UNITS[m.group(2).upper()] if m else 0.0
    return int(value) if math.isfinite(value) and value >= 1 else None


def _not_a_size(text) -> str:
    return f"{text!r} is not a size (bytes, or with K, M, G, T: 64K, 1.5G, 4MiB)"


def parse_size(text: str, where: str = "size") -> int:
    """A size in bytes; UserError naming `where` when it is not one (or below 1 byte)."""
    from geofed.errors import UserError
    value = _size(text)
    if value is None:
        raise UserError(f"{where}: {_not_a_size(text)}")
    return value


def parse_sizes(text: str, where: str = "--sizes") -> list[int]:
    """`MIN:MAX` (powers of two from MIN, as OSU's -m), `MIN:MAX:F` (each F times the
    last: 64K:1G:4 as IOzone's grid in powers of 4) or a list `1,64,1K`."""
    from geofed.errors import UserError
    if ":" in text:
        lo_text, hi_text, *step = text.split(":", 2)
        lo, hi = parse_size(lo_text, where), parse_size(hi_text, where)
        factor = int(step[0]) if step and step[0].strip().isdigit() else 2 if not step else 0
        if factor < 2:
            raise UserError(f"{where} {text}: the step after the second ':' must be a whole factor of 2 or more")
        if lo > hi:
            raise UserError(f"{where} {text}: the range is inverted ({lo} > {hi} bytes)")
        out, s = [], lo
        while s <= hi:
            out.append(s)
            s *= factor
        return out
    out = sorted({parse_size(t, where) for t in text.split(",") if t.strip()})
    if not out:
        raise UserError(f"{where} {text}: no size given")
    return out


def size(text) -> int:
    """An argparse type for one size."""
    value = _size(text)
    if value is None:
        raise argparse.ArgumentTypeError(_not_a_size(text))
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
