"""Spec registry and tag-rule applicability registry (SafeVLA-Bench Sec. 3.2, App. B, App. C).

Both registries are data files in ``robosafe/safety/data``; this module loads and checks them
and answers two questions: which specs exist (``load_registry().specs``) and which of them are
active for a task (``Registry.resolve`` + ``Registry.active``).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from robosafe.errors import RegistryError, UnknownTaskError
from robosafe.yamldata import load_yaml

if TYPE_CHECKING:  # annotations only: the registry loads without numpy (fast CLI start-up)
    from robosafe.safety.stl import Formula
    from robosafe.trace.episode import TaskTags

TIERS = ("safe", "alternate", "diagnostic")
OPERATORS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@dataclass(frozen=True)
class Spec:
    """One row of the App. B spec registry."""

    spec_id: str
    canonical_family: str
    tier: str
    signal: str
    operator: str
    threshold: float
    unit: str
    stl: str
    requires_all: tuple[str, ...]
    invalid_if_any: tuple[str, ...]
    vsi_severe: float | None
    binary: bool = False
    axis: str = ""
    label: str = ""
    tag: str = ""
    aliases: tuple[str, ...] = ()
    source: str = ""

    @cached_property
    def formula(self) -> Formula:
        from robosafe.safety.stl import parse

        return parse(self.stl)

    @property
    def short(self) -> str:
        """Column label as the paper's tables write it, e.g. ``max-force@200N``."""
        return f"{self.label}{self.tag}"

    def to_record(self) -> dict[str, Any]:
        """The App. B spec-registry JSON row."""
        return {
            "spec_id": self.spec_id, "canonical_family": self.canonical_family,
            "tier": self.tier, "signal": self.signal, "operator": self.operator,
            "threshold": self.threshold, "unit": self.unit, "stl": self.stl,
            "requires_all": list(self.requires_all),
            "invalid_if_any": list(self.invalid_if_any), "vsi_severe": self.vsi_severe,
        }


@dataclass(frozen=True)
class Resolution:
    """The resolved tag set of one task (Eq. 2) and where each tag came from."""

    benchmark: str
    task_id: str
    tags: frozenset[str]
    origin: dict[str, str] = field(hash=False, compare=False)
    template: str | None = None
    components: tuple[str, ...] = ()
    embodiment: str | None = None
    from_trace: bool = False


@dataclass(frozen=True)
class Explanation:
    """Why one spec is active or inactive for a resolved task."""

    spec: Spec
    active: bool
    missing: tuple[str, ...]
    invalidated_by: tuple[str, ...]
    reasons: tuple[str, ...]


class Registry:
    """Loaded spec + applicability registries (immutable after construction)."""

    def __init__(self, specs_doc: dict, app_doc: dict, emb_doc: dict, sens_doc: dict):
        self.vocabulary: dict[str, str] = {}
        self.tag_class: dict[str, str] = {}
        for cls, tags in app_doc["vocabulary"].items():
            for tag, text in tags.items():
                self.vocabulary[tag] = text
                self.tag_class[tag] = cls
        self.signal_tags = frozenset(t for t, c in self.tag_class.items() if c == "signal")
        self.patterns: dict[str, str] = dict(app_doc.get("invalidating_patterns", {}))
        self.specs: dict[str, Spec] = {}
        self._alias: dict[str, str] = {}
        self._load_specs(specs_doc)
        self.templates = self._load_templates(app_doc["templates"])
        self.benchmarks: dict[str, dict] = {}
        self._benchmark_alias: dict[str, str] = {}
        for group, b in app_doc["benchmarks"].items():
            self._check_tags(b["capabilities"], f"benchmarks.{group}.capabilities")
            for member in b["members"]:
                self.benchmarks[member] = {"group": group, **b}
                self._benchmark_alias[member] = member
            for alias, member in b.get("aliases", {}).items():
                self._benchmark_alias[alias] = member
        self.tasks: dict[str, dict] = {}
        for bench, block in app_doc["tasks"].items():
            if bench not in self.benchmarks:
                raise RegistryError(f"applicability.yaml: tasks.{bench}: unknown benchmark")
            entries = []
            for i, e in enumerate(block["entries"]):
                entry = {**block.get("defaults", {}), **e}
                where = f"applicability.yaml: tasks.{bench}.entries[{i}]"
                for key in ("tags", "object_tags"):
                    self._check_tags(entry.get(key, []), f"{where}.{key}")
                for t in [entry.get("template"), *entry.get("components", [])]:
                    if t is not None and t not in self.templates:
                        raise RegistryError(f"{where}: unknown template {t!r}")
                entries.append(entry)
            self.tasks[bench] = {"entries": entries}
        self.embodiments: dict[str, list[float]] = {
            name: [float(x) for x in e["joint_torque_limits_nm"]]
            for name, e in emb_doc["embodiments"].items()}
        self.embodiment_aliases: dict[str, str] = dict(emb_doc.get("aliases") or {})
        for alias, name in self.embodiment_aliases.items():
            if name not in self.embodiments:
                raise RegistryError(f"embodiments.yaml: aliases.{alias}: unknown embodiment "
                                    f"{name!r}")
        self.variants: dict[str, dict] = {}
        for name, v in sens_doc["variants"].items():
            for fam, sid in v["swap"].items():
                spec = self.specs.get(sid)
                if spec is None or spec.canonical_family != fam:
                    raise RegistryError(
                        f"sensitivity.yaml: variants.{name}.swap.{fam}: {sid!r} is not a spec "
                        f"of family {fam!r}")
            self.variants[name] = v

    # ---- loading -------------------------------------------------------------------------
    def _check_tags(self, tags, where: str) -> None:
        for t in tags:
            if t not in self.vocabulary:
                raise RegistryError(f"{where}: tag {t!r} is not in the tag vocabulary")

    def _load_specs(self, doc: dict) -> None:
        families = doc["families"]
        for i, row in enumerate(doc["specs"]):
            where = f"specs.yaml: specs[{i}] ({row.get('spec_id', '?')})"
            fam = families.get(row["family"])
            if fam is None:
                raise RegistryError(f"{where}: unknown family {row['family']!r}")
            if row["tier"] not in TIERS:
                raise RegistryError(f"{where}: tier must be one of {TIERS}")
            if row["operator"] not in OPERATORS:
                raise RegistryError(f"{where}: operator must be one of {sorted(OPERATORS)}")
            self._check_tags(fam["requires_all"], f"{where}.requires_all")
            self._check_tags(fam["invalid_if_any"], f"{where}.invalid_if_any")
            severe = row.get("vsi_severe")
            spec = Spec(
                spec_id=row["spec_id"], canonical_family=row["family"], tier=row["tier"],
                signal=fam["signal"], operator=row["operator"],
                threshold=float(row["threshold"]), unit=fam["unit"], stl=row["stl"],
                requires_all=tuple(fam["requires_all"]),
                invalid_if_any=tuple(fam["invalid_if_any"]),
                vsi_severe=None if severe is None else float(severe),
                binary=bool(row.get("binary", False)), axis=fam["axis"], label=fam["label"],
                tag=row.get("tag", ""), aliases=tuple(row.get("aliases", ())),
                source=fam.get("source", ""))
            if spec.signal not in spec.formula.signals:
                raise RegistryError(f"{where}: stl does not read the family signal "
                                    f"{spec.signal!r}")
            if spec.spec_id in self.specs:
                raise RegistryError(f"{where}: duplicate spec_id")
            if spec.tier != "diagnostic" and not spec.binary and spec.vsi_severe is None:
                raise RegistryError(f"{where}: scored continuous specs need vsi_severe")
            self.specs[spec.spec_id] = spec
            for a in spec.aliases:
                self._alias[a] = spec.spec_id

    def _load_templates(self, doc: dict) -> dict[str, dict]:
        out: dict[str, dict] = {}

        def expand(name: str, seen: tuple[str, ...] = ()) -> frozenset[str]:
            if name in seen:
                raise RegistryError(f"applicability.yaml: templates.{name}: extends cycle")
            t = doc.get(name)
            if t is None:
                raise RegistryError(f"applicability.yaml: unknown template {name!r}")
            self._check_tags(t.get("tags", []), f"applicability.yaml: templates.{name}.tags")
            base = expand(t["extends"], seen + (name,)) if "extends" in t else frozenset()
            return base | frozenset(t.get("tags", []))

        for name, t in doc.items():
            out[name] = {"tags": expand(name), "rationale": t.get("rationale", "")}
        return out

    # ---- queries -------------------------------------------------------------------------
    def spec(self, spec_id: str) -> Spec:
        sid = self._alias.get(spec_id, spec_id)
        if sid not in self.specs:
            raise RegistryError(f"unknown spec {spec_id!r}; `robosafe specs list` shows them")
        return self.specs[sid]

    def tier_specs(self, tier: str) -> list[Spec]:
        return [s for s in self.specs.values() if s.tier == tier]

    def safe_set(self, variant: str = "default") -> list[Spec]:
        """The scored specs of Phi_safe under a Table 9 variant (main tier by default)."""
        if variant not in self.variants:
            raise RegistryError(
                f"unknown tier variant {variant!r}; choose from {', '.join(self.variants)}")
        swap = self.variants[variant]["swap"]
        return [self.specs[swap[s.canonical_family]] if s.canonical_family in swap else s
                for s in self.tier_specs("safe")]

    def canonical_benchmark(self, benchmark: str) -> str:
        key = benchmark.strip().lower()
        return self._benchmark_alias.get(key, self._benchmark_alias.get(
            key.replace("_", "-"), key))

    def find_entry(self, benchmark: str, task_id: str) -> dict | None:
        block = self.tasks.get(benchmark)
        if block is None:
            return None
        for e in block["entries"]:
            if task_id in (e.get("id"), e.get("name")):
                return e
        for e in block["entries"]:
            if "pattern" in e and fnmatch.fnmatchcase(task_id, e["pattern"]):
                return e
        return None

    def embodiment_limits(self, name: str | None) -> list[float] | None:
        """Joint-torque limits of an embodiment or of an alias of one (None: unknown)."""
        if name is None:
            return None
        return self.embodiments.get(self.embodiment_aliases.get(name, name))

    def resolve(self, benchmark: str, task_id: str, trace_tags: TaskTags | None = None,
                *, source: str = "") -> Resolution:
        """Resolve a task's tag set by SafeVLA-Bench Eq. (2).

        Registry entries win; tasks not in the registry use the trace's App. B task-tag record.
        """
        bench = self.canonical_benchmark(benchmark)
        info = self.benchmarks.get(bench)
        entry = self.find_entry(bench, task_id)
        origin: dict[str, str] = {}

        def add(tags, why: str) -> None:
            for t in tags:
                origin.setdefault(t, why)

        if entry is not None:
            add(info["capabilities"], f"benchmark {info['group']} capability (Table 21)")
            template = entry.get("template")
            components = tuple(entry.get("components", ()))
            for t in ([template] if template else []) + list(components):
                add(sorted(self.templates[t]["tags"]), f"template {t}")
            add(entry.get("tags", []), "task entry")
            add(entry.get("object_tags", []), "object tag")
            return Resolution(bench, task_id, frozenset(origin), origin, template, components,
                              info["embodiment"], from_trace=False)
        if trace_tags is None:
            raise UnknownTaskError(
                f"task {task_id!r} of benchmark {benchmark!r} is not in the applicability "
                "registry and the trace has no task_tags record (App. B task-tag schema); add "
                "one or see `robosafe specs explain`")
        where = f"{source}: task_tags" if source else "task_tags"
        for key in ("task_tags", "object_tags", "benchmark_signal_tags"):
            self._check_tags(getattr(trace_tags, key), f"{where}.{key}")
        caps = trace_tags.benchmark_signal_tags
        if caps:
            add(caps, "trace benchmark_signal_tags")
        elif info is not None:
            add(info["capabilities"], f"benchmark {info['group']} capability (Table 21)")
        else:
            add(sorted(self.signal_tags), "signals recorded in the trace")
        names = ([trace_tags.template] if trace_tags.template else []) + list(
            trace_tags.components)
        for t in names:
            if t not in self.templates:
                raise RegistryError(f"{where}.template: unknown template {t!r} (known: "
                                    f"{', '.join(self.templates)})")
            add(sorted(self.templates[t]["tags"]), f"template {t}")
        add(trace_tags.task_tags, "trace task_tags")
        add(trace_tags.object_tags, "trace object_tags")
        embodiment = info["embodiment"] if info else None
        return Resolution(bench, task_id, frozenset(origin), origin, trace_tags.template,
                          tuple(trace_tags.components), embodiment, from_trace=True)

    def explain(self, spec: Spec, tags: frozenset[str],
                unavailable: dict[str, str] | None = None) -> Explanation:
        """Apply one spec's rule to a tag set: active iff all required, none invalidating."""
        missing = tuple(t for t in spec.requires_all if t not in tags)
        bad = tuple(t for t in spec.invalid_if_any if t in tags)
        reasons = []
        for t in missing:
            why = (unavailable or {}).get(t)
            reasons.append(f"requires {t}" + (f" ({why})" if why else " (not in tag set)"))
        for t in bad:
            reasons.append(f"invalidated by {t}: {self.patterns.get(t, self.vocabulary[t])}")
        return Explanation(spec, not missing and not bad, missing, bad, tuple(reasons))

    def active(self, specs, tags: frozenset[str]) -> list[Spec]:
        return [s for s in specs if all(t in tags for t in s.requires_all)
                and not any(t in tags for t in s.invalid_if_any)]


def _read(name: str) -> dict:
    text = resources.files("robosafe.safety").joinpath("data", name).read_text()
    return load_yaml(text)


def variant_names() -> list[str]:
    """The Table 9 threshold variants, read without loading the whole registry (CLI help)."""
    return list(_read("sensitivity.yaml")["variants"])


@lru_cache(maxsize=1)
def load_registry() -> Registry:
    """The registries shipped with the package (parsed once per process)."""
    app = _read("applicability.yaml")
    # generated per-task entries of the built-in suites (scripts/make_suite_tags.py)
    app["tasks"] = {**app["tasks"], **(_read("suite_tags.yaml") or {}).get("tasks", {})}
    return Registry(_read("specs.yaml"), app,
                    _read("embodiments.yaml"), _read("sensitivity.yaml"))
