"""Typed configs: frozen, keyword-only dataclasses that round-trip to dicts and YAML.

Every config in encoderlab subclasses :class:`Config`. The base gives:

- ``to_dict()`` / ``from_dict()`` with nested configs, tuples and Optional fields;
- ``to_yaml()`` / ``from_yaml()``;
- an unknown key raises :class:`ConfigError` naming the key, where it was, and the valid keys;
- ``with_overrides(["a.b=3", ...])`` for command-line ``key=value`` overrides, values parsed as YAML.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, TypeVar, Union, get_args, get_origin, get_type_hints

import yaml

from encoderlab.errors import EncoderlabError

C = TypeVar("C", bound="Config")


class ConfigError(EncoderlabError):
    """A config could not be built: an unknown key, a wrong type or an invalid value."""


class ConfigNote(UserWarning):
    """A config used a key of an older version: it was read as its replacement, named here."""


def renamed_bf16(value: Any) -> tuple[str, Any]:
    """``bf16: true|false`` (before ``precision``) -> ``precision``. ``true`` was the default, meant
    "the fast precision", and on a CPU without bf16 matrix units is 13-80x slower than fp32 (measured,
    docs/benchmarks.md): it maps
    to ``auto``, which is bf16 exactly where bf16 is faster. ``false`` asked for fp32 and keeps it."""
    if not isinstance(value, bool):
        raise ConfigError(f"bf16: expected true/false, got {value!r} (the key is now precision: auto|fp32|bf16)")
    return "precision", "auto" if value else "fp32"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Base for all encoderlab configs. Subclasses are ``@dataclass(frozen=True, kw_only=True)``."""

    # Keys of older versions, {old key: value -> (new key, new value)}: files written before a
    # rename still load, with a ConfigNote naming the new key.
    RENAMED: ClassVar[dict[str, Callable[[Any], tuple[str, Any]]]] = {}

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Subclasses check cross-field invariants here and raise ConfigError."""

    # ---- dict / YAML round trip -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            out[f.name] = _to_plain(getattr(self, f.name))
        return out

    @classmethod
    def from_dict(cls: type[C], data: dict[str, Any] | None, *, where: str = "") -> C:
        if not isinstance(data or {}, dict):  # a YAML list or scalar where a mapping belongs
            raise ConfigError(f"{where or cls.__name__}: expected a mapping, got {type(data).__name__}")
        data = dict(data or {})
        hints = get_type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        label = where or cls.__name__
        for old, rename in cls.RENAMED.items():
            if old in data:
                new, value = rename(data.pop(old))
                if new in data:
                    raise ConfigError(f"{label}: both {old!r} (an old key) and {new!r} are set; keep only {new!r}")
                data[new] = value
                warnings.warn(ConfigNote(f"{label}: {old!r} is an old key, read as {new}: {value}; "
                                         f"write {new} instead"), stacklevel=2)
        unknown = sorted(set(data) - set(fields))
        if unknown:
            label = f"{where}: " if where else ""
            hints = "".join(f"; {k!r}: did you mean {m!r}?" for k in unknown if (m := closest(str(k), fields)))
            raise ConfigError(
                f"{label}unknown key(s) {unknown} for {cls.__name__}{hints}; valid keys: {sorted(fields)}"
            )
        kwargs = {}
        for name, value in data.items():
            kwargs[name] = _coerce(value, hints[name], f"{where}.{name}" if where else name)
        try:
            return cls(**kwargs)
        except TypeError as e:  # missing required fields
            raise ConfigError(f"{where or cls.__name__}: {e}") from None
        except ConfigError as e:  # validate(): say in which file / section the invalid values are
            if where and not str(e).startswith(where):
                raise ConfigError(f"{where}: {e}") from None
            raise

    def to_yaml(self, path: str | Path | None = None) -> str:
        text = yaml.safe_dump(self.to_dict(), sort_keys=False)
        if path is not None:
            Path(path).write_text(text)
        return text

    @classmethod
    def from_yaml(cls: type[C], path_or_text: str | Path) -> C:
        text = str(path_or_text)
        p = Path(path_or_text) if "\n" not in text and not text.lstrip().startswith("{") else None
        if p is not None and p.exists():
            try:
                data = yaml.safe_load(p.read_text(encoding="utf-8"))
            except (yaml.YAMLError, UnicodeDecodeError) as e:
                raise ConfigError(f"{p}: invalid YAML: {e}") from None
            where = str(p)
        else:
            try:
                data = yaml.safe_load(str(path_or_text))
            except yaml.YAMLError as e:
                raise ConfigError(f"invalid YAML: {e}") from None
            where = ""
        return cls.from_dict(data or {}, where=where)

    # ---- overrides --------------------------------------------------------------------------
    def replace(self: C, **changes: Any) -> C:
        return dataclasses.replace(self, **changes)

    def with_overrides(self: C, overrides: list[str] | tuple[str, ...]) -> C:
        """Apply ``dotted.key=value`` strings; values are parsed as YAML scalars/lists."""
        data = self.to_dict()
        for item in overrides:
            if "=" not in item:
                raise ConfigError(f"override {item!r} is not of the form key=value")
            key, raw = item.split("=", 1)
            if not all(part.strip() for part in key.split(".")):
                raise ConfigError(f"override {item!r}: empty key; expected dotted.key=value")
            node = data
            parts = key.strip().split(".")
            try:
                value = yaml.safe_load(raw)
            except yaml.YAMLError as e:
                raise ConfigError(f"override {item!r}: the value is not valid YAML ({e})") from None
            if parts[-1] not in _fields_at(type(self), parts[:-1]):
                parts, value = _apply_rename(type(self), parts, value)
            for i, part in enumerate(parts[:-1]):
                if not isinstance(node.get(part), dict):
                    node[part] = {} if node.get(part) is None else node[part]
                    if not isinstance(node[part], dict):
                        raise ConfigError(f"override {key!r}: {'.'.join(parts[: i + 1])} is not a section")
                node = node[part]
            node[parts[-1]] = value
        return type(self).from_dict(data)


def closest(word: str, choices) -> str | None:
    """The closest of ``choices`` to a misspelled ``word`` (difflib, ratio >= 0.6), or None: what
    every unknown-name error suggests ("did you mean ..."), so a typo names its fix."""
    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return close[0] if close else None


def _config_at(cls: type, parts: list[str]) -> type | None:
    """The Config class at a dotted path below ``cls`` (None where the path leaves the configs)."""
    for part in parts:
        hint = get_type_hints(cls).get(part) if isinstance(cls, type) and issubclass(cls, Config) else None
        if hint is None:
            return None
        if _is_union(hint):
            hint = next((a for a in get_args(hint) if isinstance(a, type) and issubclass(a, Config)), None)
        if not (isinstance(hint, type) and issubclass(hint, Config)):
            return None
        cls = hint
    return cls


def _fields_at(cls: type, parts: list[str]) -> set[str]:
    sub = _config_at(cls, parts)
    return {f.name for f in dataclasses.fields(sub)} if sub is not None else set()


def _apply_rename(cls: type, parts: list[str], value: Any) -> tuple[list[str], Any]:
    """An override of an old key (``trainer.bf16=false``) as the key that replaced it, with a note."""
    sub = _config_at(cls, parts[:-1])
    rename = sub.RENAMED.get(parts[-1]) if sub is not None else None
    if rename is None:
        return parts, value
    new, value = rename(value)
    where = ".".join(parts)
    warnings.warn(ConfigNote(f"override {where}: an old key, read as {'.'.join([*parts[:-1], new])}={value}"),
                  stacklevel=3)
    return [*parts[:-1], new], value


def _to_plain(value: Any) -> Any:
    if isinstance(value, Config):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [_to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_plain(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Turn plain YAML data into the annotated type, with errors that name the key."""
    if tp is Any:
        return value
    if _is_union(tp):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"{where}: cannot be {value!r}")
    origin = get_origin(tp)
    if origin is typing.Literal:
        if value not in get_args(tp):
            raise ConfigError(f"{where}: {value!r} is not one of {list(get_args(tp))}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        args = get_args(tp)
        inner = args[0] if args else Any
        items = [_coerce(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if isinstance(tp, type) and issubclass(tp, Config):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping for {tp.__name__}, got {value!r}")
        return tp.from_dict(value, where=where)
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads "2e10" (no dot, no sign) as a string
            try:
                value = float(value)
            except ValueError:
                raise ConfigError(f"{where}: expected a number, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    return value
