"""Datasets the console can offer: shipped folders under the data roots, loose files, Hugging Face
dataset folders, and uploads.

A dataset folder holds `train.<ext>` and optionally `validation.<ext>` (or val/valid/dev) and
`test.<ext>`; a Hugging Face dataset folder (`save_to_disk`, a DatasetDict, Parquet shards) serves
each role its split; a loose data file is a dataset on its own (validation is then split off it).
Uploads are size-checked and kept in the uploads folder, itself a data root, under a name derived
from their content: uploading the same file again finds the copy already there instead of adding
another. A `.zip` upload holding a dataset folder is unpacked (safely) into a folder of its own.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from core.run.atomic import atomic_folder
from core.data.files import DATA_EXTENSIONS as CORE_DATA_EXTENSIONS
from core.data.catalog import read_catalog
from core.data.files import (DATASET_DICT_FILE, SPLIT_SEPARATOR, STATE_FILE, DataError, data_extension,
                             dataset_splits, is_catalog, role_split)
from core.spec.errors import said_of

from app.paths import for_config

DATA_EXTENSIONS = tuple(CORE_DATA_EXTENSIONS)  # .jsonl .json .csv .parquet .arrow .txt and .gz of the text ones
UPLOAD_EXTENSIONS = (*DATA_EXTENSIONS, ".zip")
_SPLIT_NAMES = {"train": ("train",), "validation": ("validation", "valid", "val", "dev"), "test": ("test",)}
MAX_ZIP_MEMBERS = 10_000
HASH_CHARS = 8


class UploadError(ValueError):
    """An upload the console refuses (too large, wrong type); the message says what is accepted. It
    is one of the console's own answers (app.i18n.Said, keys upload.*): `said` renders it in the
    page's language."""

    @property
    def said(self) -> Any:
        return self.args[0] if self.args else ""


CATALOG_KEY = " :: "  # between a catalogue folder and a dataset's name in the picker's value


@dataclass(frozen=True)
class Dataset:
    """Files of one dataset as they go into a config (paths relative to the repo root if inside);
    a dataset of a catalogue (dataset_info.json) also has its name there (`dataset`), its
    formatting and size, or the reason it cannot load."""
    name: str
    train_file: str
    validation_file: str | None = None
    test_file: str | None = None
    dataset: str | None = None
    formatting: str = ""
    size_bytes: int = 0
    num_samples: int | None = None
    reason: str | None = None

    @property
    def key(self) -> str:
        """The picker's value: the training file, with the dataset's name for a catalogue entry."""
        return picker_key(self.train_file, self.dataset)

    @property
    def label(self) -> str:
        return self.label_in("en")

    def label_in(self, lang: str) -> str:
        from app.i18n import problem_text, text

        if self.dataset is not None:
            if self.reason:  # without the catalogue's path and the entry's name, which the label has
                said = getattr(self.reason, "params", {}).get("reason") if getattr(self.reason, "key", "") == \
                    "data.at_entry" else None
                reason = problem_text(said, lang) if said else \
                    problem_text(self.reason, lang).split(f"dataset {self.dataset!r}: ", 1)[-1]
                return text("data.catalog_broken", lang).format(name=self.name, reason=reason)
            size = human_size(self.size_bytes) + (", " + text("data.catalog_samples", lang).format(n=self.num_samples)
                                                  if self.num_samples else "")
            return text("data.catalog_entry", lang).format(name=self.name, formatting=self.formatting, size=size)
        parts = ["train"] + (["validation"] if self.validation_file else []) + (["test"] if self.test_file else [])
        return text("data.files_label", lang).format(name=self.name,
                                                     parts=" + ".join(text(f"data.part.{p}", lang) for p in parts))


def picker_key(train_file: str | None, dataset: str | list[str] | None) -> str:
    """'data/catalog :: alpaca_demo' for one catalogue dataset, else the training file."""
    names = [dataset] if isinstance(dataset, str) else list(dataset or [])
    return f"{train_file}{CATALOG_KEY}{names[0]}" if len(names) == 1 else str(train_file or "")


def human_size(size: int) -> str:
    """'840 B', '12.3 kB', '4.1 MB'."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def catalog_datasets(folder: Path, root: Path) -> list[Dataset]:
    """Every dataset of a catalogue folder, by name; a catalogue that cannot be read is one
    entry with the reason."""
    prefix = str(folder.relative_to(root)) if folder != root else folder.name
    config_path = for_config(folder)
    try:
        entries = read_catalog(folder)
    except DataError as err:
        return [Dataset(f"{prefix}/dataset_info.json", config_path, dataset="", reason=said_of(err))]
    return [Dataset(f"{prefix}/{e.name}", config_path, dataset=e.name, formatting=e.formatting,
                    size_bytes=e.size_bytes, num_samples=e.num_samples, reason=e.problem) for e in entries]


def _split_file(folder: Path, split: str) -> Path | None:
    for stem in _SPLIT_NAMES[split]:
        for ext in DATA_EXTENSIONS:
            if (folder / f"{stem}{ext}").is_file():
                return folder / f"{stem}{ext}"
    return None


def is_hf_dataset_folder(folder: Path) -> bool:
    """A folder `datasets` wrote (save_to_disk, DatasetDict) or a folder of Arrow/Parquet shards."""
    if (folder / STATE_FILE).is_file() or (folder / DATASET_DICT_FILE).is_file():
        return True
    return _has_shards(folder, depth=3)


def _has_shards(folder: Path, depth: int) -> bool:
    """Whether Parquet or Arrow files lie within `depth` levels (hidden folders skipped)."""
    try:
        children = list(folder.iterdir())
    except OSError:
        return False
    for child in children:
        if child.name.startswith((".", "__")):
            continue
        if child.is_file() and data_extension(child) in (".parquet", ".arrow"):
            return True
        if child.is_dir() and depth > 1 and _has_shards(child, depth - 1):
            return True
    return False


def _hf_dataset(folder: Path, root: Path) -> Dataset | None:
    """A Hugging Face dataset folder as a Dataset: each role names the folder (or folder#split)."""
    try:
        splits = dataset_splits(folder)
    except DataError:
        return None  # a broken folder is shown when picked by path, not offered
    if not splits:
        return None
    name = str(folder.relative_to(root)) if folder != root else folder.name
    config_path = for_config(folder)

    def named(role: str) -> str | None:
        split = role_split(splits, role)
        if split is None:
            return None
        return config_path if split in (role, *_SPLIT_NAMES[role]) else f"{config_path}{SPLIT_SEPARATOR}{split}"

    train = named("train") or (config_path if len(splits) == 1 else f"{config_path}{SPLIT_SEPARATOR}{splits[0]}")
    return Dataset(name, train, named("validation"), named("test"))


def _folder_dataset(folder: Path, root: Path) -> Dataset | None:
    train = _split_file(folder, "train")
    if train is None:
        return None
    validation, test = _split_file(folder, "validation"), _split_file(folder, "test")
    name = str(folder.relative_to(root)) if folder != root else folder.name
    return Dataset(name, for_config(train), validation and for_config(validation), test and for_config(test))


def scan_datasets(roots: Iterable[Path], depth: int = 2) -> list[Dataset]:
    """Dataset folders first (by name), then loose data files, from every root. A Hugging Face
    dataset folder is one dataset: its split folders and shards are not listed again."""
    folders, files = [], []
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        for folder in [root, *_subfolders(root, depth)]:
            if is_catalog(folder):
                folders += catalog_datasets(folder, root)
                continue
            if folder != root and is_hf_dataset_folder(folder):
                dataset = _hf_dataset(folder, root)
                if dataset:
                    folders.append(dataset)
                continue
            dataset = _folder_dataset(folder, root)
            if dataset:
                folders.append(dataset)
            elif folder.parent == root or folder == root:
                files += [Dataset(str(p.relative_to(root)), for_config(p)) for p in sorted(folder.iterdir())
                          if p.is_file() and data_extension(p) in DATA_EXTENSIONS]
    unique = {d.key: d for d in folders + files}
    return list(unique.values())


def _subfolders(root: Path, depth: int) -> list[Path]:
    """Sub-folders to look at, not descending into a Hugging Face dataset folder."""
    out = []
    for child in sorted(root.iterdir()):
        if child.is_dir() and not child.name.startswith((".", "__")):
            out.append(child)
            if depth > 1 and not is_hf_dataset_folder(child) and not is_catalog(child):
                out += _subfolders(child, depth - 1)
    return out


def find_by_train_file(datasets: Iterable[Dataset], train_file: str | None) -> Dataset | None:
    """The dataset whose picker value (`Dataset.key`) or training file is `train_file`."""
    datasets = list(datasets)
    return next((d for d in datasets if d.key == train_file), None) or next(
        (d for d in datasets if d.train_file == train_file and d.dataset is None), None)


def safe_name(name: str) -> str:
    """A file name reduced to letters, digits, '.', '_' and '-' (no folders, no hidden files)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name).strip("._") or "upload"
    return stem[:100]


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _same_content(a: Path, b: Path) -> bool:
    return a.is_file() and b.is_file() and a.stat().st_size == b.stat().st_size and _digest(a) == _digest(b)


def _said(key: str, **params: Any) -> str:
    from app.i18n import Said  # as label_in: app.i18n is imported when it is needed

    return Said(key, **params)


def save_upload(temp_path: str | Path, original_name: str, uploads_dir: Path, max_bytes: int) -> Path:
    """Keep an uploaded file in `uploads_dir`: as `name.ext`, or when another file holds that name,
    as `name-<first 8 hex digits of its SHA-256>.ext`. The same content uploaded again returns the
    file already there, so repeated uploads never pile up copies. A `.zip` is unpacked into a folder
    (see `extract_zip`); returns the new (or existing) path."""
    source = Path(temp_path)
    ext = data_extension(Path(original_name.lower())) or Path(original_name).suffix.lower()
    if ext not in UPLOAD_EXTENSIONS:
        raise UploadError(_said("upload.unsupported", file=original_name, ext=ext or _said("upload.no_extension"),
                                accepted=", ".join(UPLOAD_EXTENSIONS)))
    size = source.stat().st_size
    if size > max_bytes:
        raise UploadError(_said("upload.too_big", file=original_name, mb=f"{size / 2**20:.1f}",
                                limit=f"{max_bytes / 2**20:.0f}"))
    uploads_dir.mkdir(parents=True, exist_ok=True)
    stem = safe_name(Path(original_name).name[:len(Path(original_name).name) - len(ext)])
    if ext == ".zip":
        return extract_zip(source, uploads_dir, stem, max_bytes)
    target = uploads_dir / f"{stem}{ext}"
    if target.exists() and not _same_content(source, target):
        target = uploads_dir / f"{stem}-{_digest(source)[:HASH_CHARS]}{ext}"
    if not _same_content(source, target):
        shutil.copyfile(source, target)
    return target


def extract_zip(source: Path, uploads_dir: Path, stem: str, max_bytes: int) -> Path:
    """Unpack a zipped dataset folder into `uploads_dir/<stem>` (or `<stem>-<hash>` when that
    holds another upload). Members with absolute paths or `..`, links, and archives that unpack to
    more than the upload limit are refused; a single top folder inside the archive is dropped."""
    try:
        archive = zipfile.ZipFile(source)
    except zipfile.BadZipFile as err:
        known = _said("upload.zip.not_zip")
        raise UploadError(_said("upload.not_zip", file=f"{stem}.zip",
                                zip_says=known if str(err) == known else str(err))) from None
    with archive:
        members = [m for m in archive.infolist() if not m.is_dir()]
        if len(members) > MAX_ZIP_MEMBERS:
            raise UploadError(_said("upload.too_many_files", file=f"{stem}.zip", n=len(members), limit=MAX_ZIP_MEMBERS))
        total = sum(m.file_size for m in members)
        if total > max_bytes:
            raise UploadError(_said("upload.unpacks_too_big", file=f"{stem}.zip", mb=f"{total / 2**20:.1f}",
                                    limit=f"{max_bytes / 2**20:.0f}"))
        names = []
        for member in members:
            parts = Path(member.filename).parts
            if member.filename.startswith("/") or ".." in parts or (member.external_attr >> 16) & 0o170000 == 0o120000:
                raise UploadError(_said("upload.refused_member", file=f"{stem}.zip", member=repr(member.filename)))
            names.append(parts)
        top = {p[0] for p in names}
        strip = 1 if len(top) == 1 and all(len(p) > 1 for p in names) else 0
        digest = _digest(source)[:HASH_CHARS]
        target, done = _unpack_target(uploads_dir, stem, digest)
        if done:
            return target
        with atomic_folder(target) as partial:  # a stale folder there (no or another marker) is replaced
            for member, parts in zip(members, names):
                path = partial.joinpath(*parts[strip:])
                path.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as src, path.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
            (partial / ZIP_MARKER).write_text(digest)
    return target


ZIP_MARKER = ".upload-sha256"  # inside an unpacked upload: the archive it came from


def _unpack_target(uploads_dir: Path, stem: str, digest: str) -> tuple[Path, bool]:
    """Where an archive unpacks, and whether the same archive is already unpacked there."""
    for candidate in (uploads_dir / stem, uploads_dir / f"{stem}-{digest}"):
        marker = candidate / ZIP_MARKER
        if marker.is_file() and marker.read_text().strip() == digest:
            return candidate, True
        if not candidate.exists():
            return candidate, False
    return uploads_dir / f"{stem}-{digest}", False


def upload_dataset(saved: Path) -> Dataset:
    """The dataset an upload makes: a data file on its own, or an unpacked folder (its splits, or
    its train/validation/test files)."""
    if saved.is_dir() and is_catalog(saved):
        return catalog_datasets(saved, saved.parent)[0]
    if saved.is_dir():
        root = saved.parent
        dataset = _hf_dataset(saved, root) if is_hf_dataset_folder(saved) else _folder_dataset(saved, root)
        if dataset is None:
            raise UploadError(_said("upload.no_dataset", file=f"{saved.name}.zip"))
        return dataset
    return Dataset(saved.name, for_config(saved))
