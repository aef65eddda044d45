"""Dataset callbacks of the Train tab: choosing, uploading, previewing and measuring a dataset, and
the data problems that keep Start from launching."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from core.spec.config import Config, ConfigError, DataSettings, GrpoSettings
from core.data.files import DataError, read_data_file
from core.data.formats import resolve_format
from core.data.files import file_names, split_path
from core.data.pairs import file_kind
from core.spec.errors import said_of
from core.data.tokenizer import TokenizerError
from core.spec.objectives import spec_of

from app.data import catalog
from app.context import Console
from app.data.data_preview import (data_stats, error_html, histogram_html, preference_stats_markdown, preview_html,
                              prompt_preview_html, prompt_stats_markdown, stats_markdown)
from app.data.datasets import Dataset, UploadError, save_upload, upload_dataset
from app.i18n import Said, problem_text, text
from app.paths import OutsideRootsError, absolute, inside_roots

DATA_FILE_KEYS = ("data.train_file", "data.validation_file", "data.test_file")


def dataset_choices(console: Console, lang: str = "en") -> list[tuple[str, str]]:
    """(label, value) pairs for the dataset picker, scanned now (uploads included): the value is
    the training file, or for a dataset of a catalogue the folder and the dataset's name."""
    return [(d.label_in(lang), d.key) for d in console.datasets()]


@dataclass
class Upload:
    """An upload kept in the uploads folder: the dataset it makes and the format found in it
    (None with `problem` when its first record fits no format)."""
    dataset: Dataset
    detected_format: str | None
    problem: str | None = None
    preference: str | None = None  # "pairs" or "kto": preference data (core.data.pairs), as the preview shows it
    records: int = 0

    @property
    def note(self) -> str:
        return self.note_in("en")

    def note_in(self, lang: str) -> str:
        if self.preference:
            found = text(f"dp.detected_{self.preference}", lang).format(n=self.records)
        elif self.detected_format:
            found = text("dp.detected", lang).format(fmt=self.detected_format)
        else:
            found = f"⚠ {problem_text(self.problem, lang)}"
        return text("dp.saved", lang).format(file=self.dataset.train_file, found=found)


def upload(temp_path: str, original_name: str, console: Console) -> Upload:
    """Keep an uploaded data file (or zipped dataset folder) in the uploads folder and detect its
    format; the same content uploaded again is the same dataset."""
    settings = console.settings
    saved = save_upload(temp_path, original_name, settings.uploads_dir, settings.max_upload_bytes)
    dataset = upload_dataset(saved)
    if dataset.dataset is not None:  # a zipped catalogue: its first dataset, in its own formatting
        return Upload(dataset, dataset.formatting or None, dataset.reason)
    try:
        data = read_data_file(absolute(split_path(dataset.train_file)[0]), split_path(dataset.train_file)[1])
        kind = file_kind(data)  # pairs or KTO answers have no SFT format: the preview shows them as such
        if kind is not None:
            return Upload(dataset, None, preference=kind, records=len(data.records))
        detected = resolve_format(data)
    except DataError as err:
        return Upload(dataset, None, said_of(err))
    return Upload(dataset, detected)


@dataclass
class DataView:
    """The dataset section's read-outs: sample preview, length histogram and statistics."""
    preview: str
    histogram: str
    stats: str


def _model(values: Mapping[str, Any], console: Console):
    model = catalog.find(console.models(), values.get("model.path"))
    return model if model is not None and model.loadable else None


def preview_view(values: Mapping[str, Any], console: Console, lang: str = "en") -> str:
    """The sample preview alone (the first records only: fast enough to answer every keystroke)."""
    model = _model(values, console)
    if model is None:
        return error_html(text("dp.no_model", lang))
    try:
        settings = data_settings(values, console)
    except (ConfigError, OutsideRootsError) as err:
        return error_html(err, lang)
    if spec_of(values.get("train.objective")).data == "prompts":  # the prompts the rollouts get and the rewards' columns
        return prompt_preview_html(str(model.path), settings, _prompt_len(values), lang=lang)
    return preview_html(str(model.path), settings, lang=lang)


def _prompt_len(values: Mapping[str, Any]) -> int:
    """grpo.max_prompt_len of the form (its default while the field is empty or not a number)."""
    value = values.get("grpo.max_prompt_len")
    return int(value) if isinstance(value, (int, float)) and value >= 1 else GrpoSettings().max_prompt_len


def stats_view(values: Mapping[str, Any], console: Console, lang: str = "en") -> tuple[str, str]:
    """(histogram, statistics) of every file (tokenizes them all once; then kept in memory). With a
    preference objective (train.objective), the pairs' statistics and no histogram."""
    model = _model(values, console)
    if model is None:
        return "", ""
    objective = values.get("train.objective") or "sft"
    try:
        settings = data_settings(values, console)
        stats = data_stats(str(model.path), settings, int(values.get("run.seed") or 0), objective, _prompt_len(values))
    except (ConfigError, OutsideRootsError):
        return "", ""
    except (DataError, TokenizerError, OSError) as err:
        return "", text("dp.stats_unavailable", lang).format(err=problem_text(err, lang))
    if spec_of(objective).data == "prompts":
        return "", prompt_stats_markdown(stats, lang)
    if spec_of(objective).data != "supervised":
        return "", preference_stats_markdown(stats, settings.max_seq_len, objective, lang)
    return histogram_html(stats, settings.max_seq_len, lang), stats_markdown(stats, settings.max_seq_len, lang)


def data_view(values: Mapping[str, Any], console: Console) -> DataView:
    """Preview and statistics for the model and data settings in the form. Files outside the data
    roots are never opened; problems are shown in place of the preview."""
    preview = preview_view(values, console)
    histogram, stats = stats_view(values, console)
    return DataView(preview, histogram, stats)


def data_settings(values: Mapping[str, Any], console: Console) -> DataSettings:
    """DataSettings from the form, every named file checked to lie inside the data roots."""
    raw = {key.split(".", 1)[1]: value for key, value in values.items() if key.startswith("data.")}
    for key in ("validation_file", "test_file"):
        raw[key] = (raw.get(key) or "").strip() or None
    if isinstance(raw.get("max_seq_len"), float) and raw["max_seq_len"].is_integer():
        raw["max_seq_len"] = int(raw["max_seq_len"])
    settings = DataSettings.from_dict(raw)
    for key in ("train_file", "validation_file", "test_file"):
        name = getattr(settings, key)
        for item in file_names(name) if name else []:
            inside_roots(split_path(item)[0], console.settings.all_data_dirs)
    return settings


def _widget_of(message: str, config: Config) -> str:
    """The form field a data problem belongs to: the file it names, or the column mapping."""
    if message.startswith("data.columns") or "data.columns maps" in message:
        return "data.columns"
    if message.startswith("data.format is"):
        return "data.format"
    if message.startswith("data.dataset") or "dataset_info.json: dataset" in message or "data.dataset (" in message:
        return "data.dataset"
    for key in DATA_FILE_KEYS[1:]:
        name = config.to_flat()[key]
        if name and any(str(split_path(item)[0]) in message for item in file_names(name)):
            return key
    return "data.train_file"


def data_problems(config: Config, console: Console) -> dict[str, str]:
    """What the worker would fail on in the data (a malformed line, a record its format cannot
    read, a template that cannot render it), by form field; empty when the data is usable. The
    same reading the statistics do, so it costs nothing more once they are computed."""
    model = catalog.find(console.models(), config.model.path)
    if model is None or not model.loadable:
        return {}
    try:
        data_stats(str(model.path), config.data, config.run.seed, config.train.objective, config.grpo.max_prompt_len)
    except (DataError, TokenizerError) as err:  # each keeps its message by id
        return {_widget_of(str(err), config): said_of(err)}
    except OSError as err:
        return {"data.train_file": Said("check.cannot_read_data", problem=str(err))}
    return {}


def prompt_columns(config: Config, console: Console) -> list[str] | None:
    """grpo: the columns every train and validation record hands the reward functions, from the data
    statistics (read once, then kept in memory); None when the data cannot be read (data_problems
    says why) or the model is not loadable."""
    model = catalog.find(console.models(), config.model.path)
    if model is None or not model.loadable:
        return None
    try:
        stats = data_stats(str(model.path), config.data, config.run.seed, config.train.objective,
                           config.grpo.max_prompt_len)
    except (DataError, TokenizerError, OSError):
        return None
    return stats.columns


__all__ = ["DataView", "Upload", "UploadError", "data_problems", "data_settings", "data_view", "dataset_choices",
           "preview_view", "prompt_columns", "stats_view", "upload"]
