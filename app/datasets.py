"""Datasets the console can offer: shipped folders under the data roots, loose files, and uploads.

A dataset folder holds `train.<ext>` and optionally `validation.<ext>` (or val/valid/dev) and
`test.<ext>`; a loose data file is a dataset on its own (validation is then split off it).
Uploads are size-checked and copied into the uploads folder, itself a data root.
"""
from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from core.data import READERS

from app.paths import for_config

DATA_EXTENSIONS = tuple(READERS)  # .jsonl .json .csv .parquet .txt
_SPLIT_NAMES = {"train": ("train",), "validation": ("validation", "valid", "val", "dev"), "test": ("test",)}


class UploadError(ValueError):
    """An upload the console refuses (too large, wrong type); the message says what is accepted."""


@dataclass(frozen=True)
class Dataset:
    """Files of one dataset as they go into a config (paths relative to the repo root if inside)."""
    name: str
    train_file: str
    validation_file: str | None = None
    test_file: str | None = None

    @property
    def label(self) -> str:
        parts = ["train"] + (["validation"] if self.validation_file else []) + (["test"] if self.test_file else [])
        return f"{self.name} ({' + '.join(parts)})"


def _split_file(folder: Path, split: str) -> Path | None:
    for stem in _SPLIT_NAMES[split]:
        for ext in DATA_EXTENSIONS:
            if (folder / f"{stem}{ext}").is_file():
                return folder / f"{stem}{ext}"
    return None


def _folder_dataset(folder: Path, root: Path) -> Dataset | None:
    train = _split_file(folder, "train")
    if train is None:
        return None
    validation, test = _split_file(folder, "validation"), _split_file(folder, "test")
    name = str(folder.relative_to(root)) if folder != root else folder.name
    return Dataset(name, for_config(train), validation and for_config(validation), test and for_config(test))


def scan_datasets(roots: Iterable[Path], depth: int = 2) -> list[Dataset]:
    """Dataset folders first (by name), then loose data files, from every root."""
    folders, files = [], []
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        for folder in [root, *_subfolders(root, depth)]:
            dataset = _folder_dataset(folder, root)
            if dataset:
                folders.append(dataset)
            elif folder.parent == root or folder == root:
                files += [Dataset(str(p.relative_to(root)), for_config(p)) for p in sorted(folder.iterdir())
                          if p.is_file() and p.suffix.lower() in DATA_EXTENSIONS]
    unique = {d.train_file: d for d in folders + files}
    return list(unique.values())


def _subfolders(root: Path, depth: int) -> list[Path]:
    out = []
    for child in sorted(root.iterdir()):
        if child.is_dir() and not child.name.startswith((".", "__")):
            out.append(child)
            if depth > 1:
                out += _subfolders(child, depth - 1)
    return out


def find_by_train_file(datasets: Iterable[Dataset], train_file: str | None) -> Dataset | None:
    return next((d for d in datasets if d.train_file == train_file), None)


def safe_name(name: str) -> str:
    """A file name reduced to letters, digits, '.', '_' and '-' (no folders, no hidden files)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name).strip("._") or "upload"
    return stem[:100]


def save_upload(temp_path: str | Path, original_name: str, uploads_dir: Path, max_bytes: int) -> Path:
    """Copy an uploaded file into `uploads_dir` under a unique, safe name; returns the new path."""
    source = Path(temp_path)
    suffix = Path(original_name).suffix.lower()
    if suffix not in DATA_EXTENSIONS:
        raise UploadError(f"{original_name}: unsupported file type {suffix or '(none)'}; "
                          f"upload one of {', '.join(DATA_EXTENSIONS)}")
    size = source.stat().st_size
    if size > max_bytes:
        raise UploadError(f"{original_name}: {size / 2**20:.1f} MB is over the upload limit of "
                          f"{max_bytes / 2**20:.0f} MB (start the console with --max-upload-mb to change it)")
    uploads_dir.mkdir(parents=True, exist_ok=True)
    stem = safe_name(Path(original_name).stem)
    target = uploads_dir / f"{stem}{suffix}"
    if target.exists():
        target = uploads_dir / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}{suffix}"
    shutil.copyfile(source, target)
    return target
