"""Dataset callbacks of the Train tab: choosing, uploading, previewing and measuring a dataset."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from core.config import ConfigError, DataSettings
from core.data import DataError
from core.tokenizer import TokenizerError

from app import catalog
from app.context import Console
from app.data_preview import data_stats, error_html, histogram_html, preview_html, stats_markdown
from app.datasets import Dataset, save_upload
from app.paths import OutsideRootsError, for_config, inside_roots


def dataset_choices(console: Console) -> list[tuple[str, str]]:
    """(label, training file) pairs for the dataset picker."""
    return [(d.label, d.train_file) for d in console.datasets()]


def upload(temp_path: str, original_name: str, console: Console) -> Dataset:
    """Keep an uploaded data file in the uploads folder; it becomes a one-file dataset."""
    saved = save_upload(temp_path, original_name, console.settings.uploads_dir, console.settings.max_upload_bytes)
    return Dataset(saved.name, for_config(saved))


@dataclass
class DataView:
    """The dataset section's read-outs: sample preview, length histogram and statistics."""
    preview: str
    histogram: str
    stats: str


def data_view(values: Mapping[str, Any], console: Console) -> DataView:
    """Preview and statistics for the model and data settings in the form. Files outside the data
    roots are never opened; problems are shown in place of the preview."""
    model = catalog.find(console.models(), values.get("model.path"))
    if model is None or not model.loadable:
        return DataView(error_html("pick a loadable base model to preview the data with its tokenizer"), "", "")
    try:
        settings = _data_settings(values, console)
    except (ConfigError, OutsideRootsError) as err:
        return DataView(error_html(str(err)), "", "")
    preview = preview_html(str(model.path), settings.train_file, settings.format, settings.max_seq_len,
                           settings.mask_prompt)
    try:
        stats = data_stats(str(model.path), settings, int(values.get("run.seed") or 0))
    except (DataError, TokenizerError, ConfigError, OSError) as err:
        return DataView(preview, "", f"statistics unavailable: {err}")
    return DataView(preview, histogram_html(stats, settings.max_seq_len), stats_markdown(stats, settings.max_seq_len))


def _data_settings(values: Mapping[str, Any], console: Console) -> DataSettings:
    """DataSettings from the form, every named file checked to lie inside the data roots."""
    raw = {k.split(".", 1)[1]: values.get(k) for k in
           ("data.train_file", "data.validation_file", "data.test_file", "data.format",
            "data.validation_fraction", "data.max_seq_len", "data.mask_prompt")}
    for key in ("validation_file", "test_file"):
        raw[key] = (raw[key] or "").strip() or None
    if isinstance(raw["max_seq_len"], float) and raw["max_seq_len"].is_integer():
        raw["max_seq_len"] = int(raw["max_seq_len"])
    settings = DataSettings.from_dict(raw)
    for key in ("train_file", "validation_file", "test_file"):
        name = getattr(settings, key)
        if name:
            inside_roots(name, console.settings.all_data_dirs)
    return settings

