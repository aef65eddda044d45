"""The model catalog: every model folder under the model roots, described without loading weights.

A folder is listed when it looks like a model (a config.json, weight files, or a tokenizer). Those
that mindtune cannot train are listed too, with the reason, so a user sees why a download does
not show up as a choice. Only safetensors headers are read (a few KB), never the tensors.
"""
from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from core.spec.messages import Message
from core.spec.model_args import INDEX_NAME, read_model_args, weight_files
from core.spec.families import PROJECTION_NAMES
from core.spec.errors import CheckpointError

from app.paths import absolute, for_config

MODEL_HINTS = ("config.json", "tokenizer.json", "*.safetensors", "*.bin", "*.pt", "*.pth", "*.ckpt")
_LAYER_MODULE = re.compile(r"layers\.\d+\.(?:self_attn|mlp|attention|feed_forward)\.(\w+)\.weight$")
_HEADER_LIMIT = 64 * 1024 * 1024  # a safetensors header larger than this is not trusted


@dataclass(frozen=True)
class ModelEntry:
    """One model folder: its description, or the reason it cannot be used."""
    path: Path
    name: str                      # as written into a config: relative to the repo root if inside
    reason: str | None = None      # None when loadable
    architecture: str = ""
    family: str = ""
    num_parameters: int = 0
    stored_dtype: str = ""
    context_length: int = 0
    vocab_size: int = 0
    projection_names: tuple[str, ...] = field(default=PROJECTION_NAMES)
    default_targets: tuple[str, ...] = field(default=PROJECTION_NAMES)  # the family's LoRA defaults ("all-linear")
    active_parameters: int = 0  # per token: below num_parameters for a mixture of experts

    @property
    def loadable(self) -> bool:
        return self.reason is None

    @property
    def label(self) -> str:
        """What the model picker shows: name and the figures that matter when choosing."""
        return self.label_in("en")

    def label_in(self, lang: str) -> str:
        """`label` in `lang`."""
        from app.i18n import text

        if not self.loadable:
            return text("model.not_loadable", lang).format(name=self.path.name)
        return text("model.label", lang).format(name=self.path.name, arch=self.architecture,
                                                params=self.parameters_text(lang), dtype=self.stored_dtype or "?",
                                                ctx=self.context_length)

    def parameters_text(self, lang: str = "en") -> str:
        """'1.5B', or '3.3B active of 30.5B' for a mixture of experts."""
        from app.i18n import text

        total = human_count(self.num_parameters)
        if self.active_parameters and self.active_parameters < self.num_parameters:
            return text("model.active", lang).format(active=human_count(self.active_parameters), total=total)
        return total

    def row(self, lang: str = "en") -> list:
        """A row of the catalog table (see ROW_HEADERS); a loader's reason in `lang`."""
        from app.i18n import problem_text, text

        return [self.name, self.architecture or "-", self.parameters_text(lang) if self.loadable else "-",
                self.stored_dtype or "-", self.context_length or "-", self.vocab_size or "-",
                text("model.ok", lang) if self.loadable else problem_text(self.reason, lang)]


ROW_HEADERS = ["folder", "architecture", "parameters", "stored dtype", "context", "vocab", "status"]


def human_count(n: int) -> str:
    """3_200_000 -> '3.2M'."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def describe(folder: Path) -> ModelEntry:
    """A folder's entry; never raises for a bad folder (the reason is recorded instead)."""
    name = for_config(folder)
    try:
        args = read_model_args(folder)
        files = weight_files(folder)
    except CheckpointError as err:
        return ModelEntry(folder, name, reason=_short_reason(err.message, folder))
    if not (folder / "tokenizer.json").is_file():
        return ModelEntry(folder, name, reason=Message("model.no_tokenizer"),
                          architecture=args.architecture, family=args.family)
    try:
        names = projection_names(files, folder, args.spec.projections + PROJECTION_NAMES,
                                 ignored=args.spec.key_map.is_ignored)
    except (OSError, ValueError) as err:
        said = err.args[0] if len(err.args) == 1 and isinstance(err.args[0], Message) else str(err)
        return ModelEntry(folder, name, reason=Message("model.unreadable_weights", reason=said),
                          architecture=args.architecture)
    names = names or args.spec.projections
    if args.moe is not None:  # the router is no LoRA target; the expert stacks are (core/spec/moe_args.py)
        names = args.lora_target_names()
    defaults = tuple(n for n in args.spec.default_lora_targets if n in names) or names
    return ModelEntry(folder, name, None, args.architecture, args.family, args.num_parameters(),
                      args.stored_dtype or _dtype_from_header(files[0]), args.max_position_embeddings,
                      args.vocab_size, names, defaults, args.active_parameters())


def _short_reason(message: str, folder: Path) -> str:
    """Core messages start with the path; the table already shows the folder. A core message by id
    (model.at: where, then why) keeps only its reason, so it stays one."""
    if isinstance(message, Message):
        if message.key == "model.at" and message.params["where"] in (str(folder / "config.json"), str(folder)):
            return message.params["reason"]
        return message
    for prefix in (f"{folder / 'config.json'}: ", f"{folder}: "):
        message = message.removeprefix(prefix)
    return message


def safetensors_header(path: Path) -> dict:
    """The JSON header of a safetensors file (tensor names, dtypes, shapes) without reading tensors."""
    with open(path, "rb") as handle:
        raw = handle.read(8)
        if len(raw) != 8:
            raise ValueError(Message("model.short_weights", file=path.name))
        (length,) = struct.unpack("<Q", raw)
        if length > _HEADER_LIMIT:
            raise ValueError(Message("model.huge_header", file=path.name, size=length))
        return json.loads(handle.read(length))


def projection_names(files: list[Path], folder: Path, order: tuple[str, ...] = PROJECTION_NAMES,
                     ignored=lambda name: False) -> tuple[str, ...]:
    """The linear layers inside the transformer blocks (q_proj, ..., down_proj): what LoRA can target.
    Read from the tensor names, so it is what this checkpoint really has; the names in `order` (the
    family's, attention then MLP) come in that order, any others after them. `ignored(name)`:
    tensors that are not the language model's (the family's key map: Gemma 3's vision tower has
    layers too)."""
    index = folder / INDEX_NAME
    if index.is_file():
        keys: Iterable[str] = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
    else:
        keys = [k for f in files for k in safetensors_header(f) if k != "__metadata__"]
    found = {m.group(1) for k in keys if not ignored(k) and (m := _LAYER_MODULE.search(k))
             and not m.group(1).endswith("norm")}  # QK-norm weights (self_attn.q_norm) are no projections
    known = [n for n in dict.fromkeys(order) if n in found]
    return tuple(known + sorted(found - set(known)))


def _dtype_from_header(path: Path) -> str:
    names = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}
    try:
        header = safetensors_header(path)
    except (OSError, ValueError):
        return ""
    dtypes = {v.get("dtype") for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)}
    return "/".join(sorted(names.get(d, str(d)) for d in dtypes))


def _looks_like_model(folder: Path) -> bool:
    return any(next(folder.glob(pattern), None) is not None for pattern in MODEL_HINTS)


def candidate_folders(root: Path, depth: int = 2) -> list[Path]:
    """Folders under `root` that look like models, searched `depth` levels down (org/name layouts);
    hidden folders and caches are skipped."""
    found: list[Path] = []
    if not root.is_dir():
        return found
    if _looks_like_model(root):
        return [root]
    for child in sorted(root.iterdir()):
        if not child.is_dir() or child.name.startswith((".", "__")):
            continue
        if _looks_like_model(child):
            found.append(child)
        elif depth > 1:
            found += candidate_folders(child, depth - 1)
    return found


def scan_models(roots: Iterable[Path]) -> list[ModelEntry]:
    """Every model folder under `roots`: loadable ones first (by name), then the others."""
    seen: set[Path] = set()
    entries = []
    for root in roots:
        for folder in candidate_folders(Path(root)):
            real = folder.resolve()
            if real not in seen:
                seen.add(real)
                entries.append(describe(folder))
    return sorted(entries, key=lambda e: (not e.loadable, e.name))


def find(entries: Iterable[ModelEntry], name: str | None) -> ModelEntry | None:
    """The entry whose config name (or resolved path) is `name`."""
    if not name:
        return None
    wanted = absolute(name).resolve()
    return next((e for e in entries if e.name == name or e.path.resolve() == wanted), None)
