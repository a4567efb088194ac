"""Is a decoded events.jsonl line a well-formed event? The console reads files that anything may
have written (a run of another version, a half-synced copy, a hand edit), and a value of the
wrong type would only fail later, deep inside a widget. `check_event` answers with the first
problem found, so the line can be skipped and counted instead.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

from searchgrpo.events import event_from_dict

MAX_NAME = 128
"""Longest metric or component name accepted."""


def decode_event(data: Any) -> tuple[Any, str]:
    """(event, "") for a well-formed event's JSON value, else (None, the problem in a few words)."""
    if not isinstance(data, dict):
        return None, f"a JSON {type(data).__name__}, not an object"
    try:
        event = event_from_dict(data)
    except ValueError as exc:
        return None, str(exc)[:80]
    except TypeError:
        return None, f"{str(data.get('type'))[:40]} without all its fields"
    problem = check_event(event)
    return (None, problem) if problem else (event, "")


def check_event(event: Any) -> str:
    """The first field of `event` whose value does not fit its declared type ('' if none)."""
    return _check_dataclass(event, type(event).__name__)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _check_dataclass(obj: Any, where: str) -> str:
    for f in dataclasses.fields(obj):
        cls: type = type(obj)
        problem = _check(getattr(obj, f.name), _hints(cls)[f.name], f"{where}.{f.name}")
        if problem:
            return problem
    return ""


def _check(value: Any, tp: Any, where: str) -> str:
    origin = typing.get_origin(tp)
    if tp is Any:
        return ""
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _check_dataclass(value, where) if isinstance(value, tp) else f"{where} is not an object"
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if not _check(value, arg, where):
                return ""
        return f"{where} has the wrong type"
    if tp is type(None):
        return "" if value is None else f"{where} is not null"
    if origin is list:
        if not isinstance(value, list):
            return f"{where} is not a list"
        (item,) = typing.get_args(tp)
        for i, v in enumerate(value):
            problem = _check(v, item, f"{where}[{i}]")
            if problem:
                return problem
        return ""
    if origin is dict:
        if not isinstance(value, dict):
            return f"{where} is not an object"
        _, item = typing.get_args(tp)
        for k, v in value.items():
            if item is float and not is_name(k):
                return f"{where} has an odd name {str(k)[:40]!r}"
            problem = _check(v, item, f"{where}[{str(k)[:40]!r}]")
            if problem:
                return problem
        return ""
    if tp is bool:
        return "" if isinstance(value, bool) else f"{where} is not true or false"
    if tp is int:
        return "" if isinstance(value, int) and not isinstance(value, bool) else f"{where} is not a whole number"
    if tp is float:
        return "" if isinstance(value, (int, float)) and not isinstance(value, bool) else f"{where} is not a number"
    if tp is str:
        return "" if isinstance(value, str) else f"{where} is not a string"
    return ""


def is_name(key: Any) -> bool:
    """A metric or component name: a short string of printable characters."""
    return isinstance(key, str) and 0 < len(key) <= MAX_NAME and key.isprintable()
