"""Typed configs: frozen, keyword-only dataclasses that round-trip to dicts and YAML.

Every config in encoderlab subclasses :class:`Config`. The base gives:

- ``to_dict()`` / ``from_dict()`` with nested configs, tuples and Optional fields;
- ``to_yaml()`` / ``from_yaml()``;
- an unknown key raises :class:`ConfigError` naming the key, where it was, and the valid keys;
- ``with_overrides(["a.b=3", ...])`` for command-line ``key=value`` overrides, values parsed as YAML.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

import yaml

C = TypeVar("C", bound="Config")


class ConfigError(ValueError):
    """A config could not be built: an unknown key, a wrong type or an invalid value."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Base for all encoderlab configs. Subclasses are ``@dataclass(frozen=True, kw_only=True)``."""

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
        data = dict(data or {})
        if not isinstance(data, dict):
            raise ConfigError(f"{where or cls.__name__}: expected a mapping, got {type(data).__name__}")
        hints = get_type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            label = f"{where}: " if where else ""
            raise ConfigError(
                f"{label}unknown key(s) {unknown} for {cls.__name__}; valid keys: {sorted(fields)}"
            )
        kwargs = {}
        for name, value in data.items():
            kwargs[name] = _coerce(value, hints[name], f"{where}.{name}" if where else name)
        try:
            return cls(**kwargs)
        except TypeError as e:  # missing required fields
            raise ConfigError(f"{where or cls.__name__}: {e}") from None

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
                data = yaml.safe_load(p.read_text())
            except yaml.YAMLError as e:
                raise ConfigError(f"{p}: invalid YAML: {e}") from None
            where = str(p)
        else:
            data = yaml.safe_load(str(path_or_text))
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
            node = data
            parts = key.strip().split(".")
            for i, part in enumerate(parts[:-1]):
                if not isinstance(node.get(part), dict):
                    node[part] = {} if node.get(part) is None else node[part]
                    if not isinstance(node[part], dict):
                        raise ConfigError(f"override {key!r}: {'.'.join(parts[: i + 1])} is not a section")
                node = node[part]
            node[parts[-1]] = yaml.safe_load(raw)
        return type(self).from_dict(data)


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
