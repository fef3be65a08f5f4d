"""The node catalogue: a read-only view over a ComfyUI `GET /object_info` body."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Section = Literal["required", "optional", "hidden"]
SECTIONS: tuple[Section, ...] = ("required", "optional", "hidden")


@dataclass(frozen=True)
class InputSpec:
    """One declared input of a node class.

    `raw` is the entry exactly as object_info lists it. `type` is its declared type name
    ("INT", "MODEL", "IMAGE,MASK", "*", "COMBO"); a classic combo, whose first element is the
    list of options itself, reads as "COMBO" here and keeps its list in `raw[0]`.
    """

    name: str
    section: Section
    raw: Any

    @property
    def declared(self) -> Any:
        """The first element of the entry: a type name, or the options list of a classic combo."""
        if isinstance(self.raw, str):
            return self.raw
        return self.raw[0] if isinstance(self.raw, list | tuple) and self.raw else None

    @property
    def type(self) -> str:
        """The type name, "COMBO" for both kinds of combo."""
        declared = self.declared
        return declared if isinstance(declared, str) else "COMBO"

    @property
    def config(self) -> Mapping[str, Any]:
        """The options dict (min, max, default, tooltip, ...), empty when none is given."""
        if isinstance(self.raw, list | tuple) and len(self.raw) > 1:
            extra = self.raw[1]
            if isinstance(extra, Mapping):
                return extra
        return {}

    @property
    def options(self) -> tuple[Any, ...] | None:
        """The options of a combo (classic list, or "COMBO" with an `options` entry), else None."""
        declared = self.declared
        if isinstance(declared, list):
            return tuple(declared)
        listed = self.config.get("options")
        if declared == "COMBO" and isinstance(listed, list):
            return tuple(listed)
        return None

    @property
    def input_config(self) -> list[Any]:
        """`[declared, config]`, the `input_config` that ComfyUI's validation errors echo."""
        return [copy.deepcopy(self.declared), copy.deepcopy(dict(self.config))]


@dataclass(frozen=True, eq=False)
class Catalog:
    """Node classes known to one ComfyUI instance, or the union of several.

    A catalogue built from one instance may carry that instance's name (`source`). A merged
    catalogue keeps its parts, so the gateway can ask which sources offer a class or a combo
    value (`sources_for_class`, `sources_for_value`). Treat `object_info` as read-only.
    Catalogues compare and hash by identity (they are large; cache on them freely).
    """

    object_info: Mapping[str, Mapping[str, Any]]
    source: str = ""
    parts: Mapping[str, Catalog] = field(default_factory=dict, repr=False)

    @classmethod
    def from_object_info(cls, object_info: Mapping[str, Any], source: str = "") -> Catalog:
        """Wrap an object_info body (entries that are not objects are dropped)."""
        entries = {name: info for name, info in object_info.items() if isinstance(info, Mapping)}
        return cls(object_info=entries, source=source)

    @classmethod
    def from_json_file(cls, path: str | Path, source: str = "") -> Catalog:
        """Load an object_info body saved as JSON."""
        with Path(path).open(encoding="utf-8") as handle:
            return cls.from_object_info(json.load(handle), source=source)

    @property
    def classes(self) -> frozenset[str]:
        """Every known class_type."""
        return frozenset(self.object_info)

    @property
    def sources(self) -> frozenset[str]:
        """Names of every source that contributed (unnamed ones excluded)."""
        if self.parts:
            return frozenset().union(*(part.sources for part in self.parts.values()))
        return frozenset({self.source}) if self.source else frozenset()

    def __contains__(self, class_type: object) -> bool:
        return isinstance(class_type, str) and class_type in self.object_info

    def info(self, class_type: str) -> Mapping[str, Any]:
        """The object_info entry of a class (KeyError when unknown)."""
        return self.object_info[class_type]

    def is_output_node(self, class_type: str) -> bool:
        """True when the class has OUTPUT_NODE set (it is executed for its side effect)."""
        return self.object_info.get(class_type, {}).get("output_node") is True

    def is_api_node(self, class_type: str) -> bool:
        """True for the classes flagged `api_node` (they call a remote service)."""
        return self.object_info.get(class_type, {}).get("api_node") is True

    def category(self, class_type: str) -> str:
        """The class's category path, e.g. "loaders" or "advanced/loaders"."""
        category = self.object_info.get(class_type, {}).get("category", "")
        return category if isinstance(category, str) else ""

    def inputs(self, class_type: str) -> tuple[InputSpec, ...]:
        """All declared inputs, required then optional then hidden, each section in order."""
        declared = self._declared_inputs(class_type)
        return tuple(
            InputSpec(name, section, entries[name])
            for section in SECTIONS
            for entries in [declared.get(section, {})]
            for name in self._section_order(class_type, section, entries)
        )

    def input_spec(self, class_type: str, name: str) -> InputSpec | None:
        """The declared input `name` of the class, or None when it declares none such.

        Like ComfyUI, a name found in "required" wins over "optional", then "hidden".
        """
        declared = self._declared_inputs(class_type)
        for section in SECTIONS:
            entries = declared.get(section, {})
            if isinstance(entries, Mapping) and name in entries:
                return InputSpec(name, section, entries[name])
        return None

    def return_types(self, class_type: str) -> tuple[Any, ...]:
        """The class's RETURN_TYPES as listed (a combo output may be a list of options)."""
        output = self.object_info.get(class_type, {}).get("output", [])
        return tuple(output) if isinstance(output, list | tuple) else ()

    def combo_options(self, class_type: str, name: str) -> tuple[Any, ...] | None:
        """The options of a combo input, or None when it is not a combo."""
        spec = self.input_spec(class_type, name)
        return spec.options if spec is not None else None

    def hidden_values(self, class_type: str) -> tuple[Any, ...]:
        """The hidden inputs' declarations as listed ("UNIQUE_ID", or ["UNIQUE_ID"] for v3)."""
        hidden = self._declared_inputs(class_type).get("hidden", {})
        return tuple(hidden.values()) if isinstance(hidden, Mapping) else ()

    def with_combo_options(self, replacements: Mapping[tuple[str, str], Sequence[Any]]) -> Catalog:
        """A copy with the options of `(class_type, input_name)` combos replaced.

        Pairs naming an unknown class or an input that is not a combo are ignored.
        """
        info = dict(self.object_info)
        for (class_type, name), options in replacements.items():
            spec = self.input_spec(class_type, name)
            if spec is None or spec.options is None:
                continue
            entry = copy.deepcopy(info[class_type])
            _set_options(entry["input"][spec.section], name, list(options))
            info[class_type] = entry
        return Catalog(object_info=info, source=self.source, parts=self.parts)

    def sources_for_class(self, class_type: str) -> frozenset[str]:
        """Sources that offer the class (empty when unknown or unnamed)."""
        if self.parts:
            return _union(part.sources_for_class(class_type) for part in self.parts.values())
        return self.sources if class_type in self.object_info else frozenset()

    def sources_for_value(self, class_type: str, name: str, value: Any) -> frozenset[str]:
        """Sources whose combo `class_type.name` lists `value`.

        For an input that is not a combo there (or not declared), every source offering the
        class: only combo lists differ between instances in a way validation checks.
        """
        if self.parts:
            return _union(
                part.sources_for_value(class_type, name, value) for part in self.parts.values()
            )
        if class_type not in self.object_info:
            return frozenset()
        options = self.combo_options(class_type, name)
        if options is not None and value not in options:
            return frozenset()
        return self.sources

    @staticmethod
    def merge(catalogs: Mapping[str, Catalog] | Iterable[Catalog]) -> Catalog:
        """The union of several catalogues.

        Classes are unioned; for a class several sources offer, the first entry is kept and
        each of its combo lists becomes the union of all sources' lists (first-seen order).
        Given a mapping, each catalogue is recorded under its key (its own `source` is
        replaced); given an iterable, under the names the catalogues already carry ("#0",
        "#1", ... for unnamed ones). A merged catalogue passed in keeps its own parts' names,
        so merges nest.
        """
        if isinstance(catalogs, Mapping):
            parts = {name: _renamed(part, name) for name, part in catalogs.items()}
        else:
            parts = {part.source or f"#{index}": part for index, part in enumerate(catalogs)}
        merged: dict[str, Mapping[str, Any]] = {}
        for part in parts.values():
            for class_type, info in part.object_info.items():
                merged[class_type] = _merge_entry(merged.get(class_type), info)
        return Catalog(object_info=merged, parts=parts)

    def _declared_inputs(self, class_type: str) -> Mapping[str, Any]:
        declared = self.object_info.get(class_type, {}).get("input", {})
        return declared if isinstance(declared, Mapping) else {}

    def _section_order(
        self, class_type: str, section: Section, entries: Mapping[str, Any]
    ) -> list[str]:
        order = self.object_info.get(class_type, {}).get("input_order", {}).get(section, [])
        listed = [name for name in order if name in entries]
        return listed + [name for name in entries if name not in listed]


def _renamed(part: Catalog, name: str) -> Catalog:
    if part.parts:
        return part
    return Catalog(object_info=part.object_info, source=name)


def _union(groups: Iterable[frozenset[str]]) -> frozenset[str]:
    return frozenset().union(*groups)


def _missing(present: Sequence[Any], extra: Iterable[Any]) -> list[Any]:
    """Values of `extra` not in `present`, in order, without repeats."""
    seen = {value for value in present if _hashable(value)}
    unhashable = [value for value in present if not _hashable(value)]
    added: list[Any] = []
    for value in extra:
        if value in seen if _hashable(value) else value in unhashable:
            continue
        added.append(value)
        if _hashable(value):
            seen.add(value)
        else:
            unhashable.append(value)
    return added


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _set_options(entries: dict[str, Any], name: str, options: list[Any]) -> None:
    entry = list(entries[name])
    if isinstance(entry[0], list):
        entry[0] = options
    else:
        entry[1] = {**entry[1], "options": options}
    entries[name] = entry


def _merge_entry(kept: Mapping[str, Any] | None, other: Mapping[str, Any]) -> Mapping[str, Any]:
    """`kept` with each combo list extended by the values only `other` lists."""
    if kept is None:
        return other
    mine, theirs = Catalog({"_": kept}), Catalog({"_": other})
    extended: dict[tuple[Section, str], list[Any]] = {}
    for spec in mine.inputs("_"):
        options, extra = spec.options, theirs.combo_options("_", spec.name)
        if options is None or not extra:
            continue
        added = _missing(options, extra)
        if added:
            extended[(spec.section, spec.name)] = [*options, *added]
    if not extended:
        return kept
    combined = copy.deepcopy(dict(kept))
    for (section, name), values in extended.items():
        _set_options(combined["input"][section], name, values)
    return combined
