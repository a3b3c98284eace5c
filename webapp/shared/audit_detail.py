"""An audit row's detail (audit_log.detail, the parameters an action was called with) in words and links:
job ids, a workflow, a batch and a queue lead to their pages; lists, maps and flags read as text, not as the
Python or JSON they were stored as."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from flask import url_for

# detail keys whose values are job ids, and the page each kind of id leads to
_JOB_KEYS = frozenset({"ids", "id", "job", "job_id"})
IDS_SHOWN = 20  # per row; the rest are counted ("and 30 more")


@dataclass(frozen=True)
class Part:
    """A piece of a value: text, and the page it leads to when it names something."""

    text: str
    href: str | None = None


@dataclass(frozen=True)
class Field:
    """One parameter of an action: its name in words, and its value as parts."""

    label: str
    parts: list[Part]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "\u2013"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict) and all(isinstance(v, str | int | float | bool) or v is None for v in value.values()):
        return "; ".join(f"{k.replace('_', ' ')}: {_text(v)}" for k, v in value.items())
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)  # nested: compact JSON


def _link(key: str, value: Any) -> str | None:
    """The page a detail value names, if any."""
    if key in _JOB_KEYS and isinstance(value, int):
        return url_for("jobs.show", job_id=value)
    if key == "workflow" and isinstance(value, int):
        return url_for("workflows.show", job_id=value)
    if key == "batch" and isinstance(value, int):
        return url_for("batches.show", batch_id=value)
    if key == "queue" and isinstance(value, str):
        return url_for("queues.show", name=value)
    return None


def fields(detail: dict[str, Any] | None) -> list[Field]:
    """The detail's parameters, by name, each as text and links."""
    out = []
    for key, value in sorted((detail or {}).items()):
        label = key.replace("_", " ")
        if key in _JOB_KEYS and isinstance(value, list) and all(isinstance(v, int) for v in value):
            parts = [Part(str(v), _link(key, v)) for v in value[:IDS_SHOWN]]
            if len(value) > IDS_SHOWN:
                parts.append(Part(f"and {len(value) - IDS_SHOWN} more"))
            out.append(Field("job" if len(value) == 1 else "jobs", parts))
            continue
        out.append(Field(label, [Part(_text(value), _link(key, value))]))
    return out
