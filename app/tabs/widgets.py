"""Widgets for config fields, made from the field's description (kind, choices, help).

One widget per dotted key, with a stable `elem_id` (`cfg-train-learning-rate`) so a browser test
or a stylesheet can find it, and its label registered for the language toggle.
"""
from __future__ import annotations

from typing import Any

import gradio as gr

from core.spec.config import FieldInfo

from app.i18n import Labels, text

ERROR_CLASS = "mt-field-error"


def elem_id(key: str) -> str:
    """'train.learning_rate' -> 'cfg-train-learning-rate'."""
    return "cfg-" + key.replace(".", "-").replace("_", "-")


def field_widget(key: str, info: FieldInfo | None, value: Any, labels: Labels, help_line: bool = True,
                 **options: Any) -> gr.components.Component:
    """The widget for one config field: dropdown for choices, checkbox for booleans, number or text
    (with the field's help line under it unless `help_line` is False)."""
    # the help line follows the language through the form's own refresh (train_tab), which also
    # writes errors into it: a language switch binding of its own would overwrite a shown error
    shown = text(f"help.{key}", labels.lang) if info and info.help and help_line else None
    common = {"elem_id": options.pop("elem_id", elem_id(key)), "info": shown, **options}
    kind = info.kind if info else "str"
    if kind == "choice":
        widget = gr.Dropdown(choices=list(info.choices), value=value, **common)
    elif kind == "bool":
        widget = gr.Checkbox(value=bool(value), **common)
    elif kind == "checks":
        widget = gr.CheckboxGroup(choices=list(info.choices), value=list(value or []), **common)
    elif kind in ("int", "float"):
        widget = gr.Number(value=value, precision=0 if kind == "int" else None, **common)
    elif kind == "yaml":  # a list of mappings (grpo.rewards): one item a line, in YAML's flow style
        widget = gr.Textbox(value=value if value is not None else "", lines=3, max_lines=12, **common)
    else:
        widget = gr.Textbox(value=value if value is not None else "", max_lines=1, **common)
    return labels.bind(widget, label=f"field.{key}")


CHANGED_CLASS = "mt-changed"


def error_update(message: str | None, help_text: str | None, was: str | None = None) -> dict:
    """A widget's info line and highlight: its error in red; else, when the value differs from the
    run the form was made from, highlighted with the old value ("was 8"); else its help again."""
    if message:
        return gr.update(info=f"⚠ {message}", elem_classes=[ERROR_CLASS] + ([CHANGED_CLASS] if was is not None else []))
    if was is not None:
        return gr.update(info=f"{was} · {help_text}" if help_text else was, elem_classes=[CHANGED_CLASS])
    return gr.update(info=help_text, elem_classes=[])
