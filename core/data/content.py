"""Message content as it comes from the field: content-part lists and media.

- A message's `content` may be a list of parts (the OpenAI layout): `{"type": "text", "text": ...}`
  parts are joined in order, with nothing between them (as chat templates that iterate over parts
  render them). Image, audio and video parts are media.
- Media (parts, or an `images`/`audios`/`videos` column as LLaMA-Factory's datasets carry them):
  with `data.media: refuse` (the default) the record is refused by name, since this console
  trains text-only models; with `data.media: drop` the media are dropped, their placeholders
  (`<image>`, `<audio>`, `<video>`) removed from the text, and the records counted.
Imports core.data.files only.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from core.data.files import DataError, Record, at, json_type
from core.spec.messages import Message

MEDIA_MODES = ("refuse", "drop")
TEXT_PART_TYPES = ("text", "input_text", "output_text")
MEDIA_PART_TYPES = {"image": "image", "image_url": "image", "input_image": "image", "audio": "audio",
                    "input_audio": "audio", "audio_url": "audio", "video": "video", "video_url": "video"}
# columns that hold a record's media: the mapping key and the names it has unmapped
MEDIA_COLUMNS = {"images": ("images", "image"), "audios": ("audios", "audio"), "videos": ("videos", "video")}
_KIND = {"images": "image", "audios": "audio", "videos": "video"}
PLACEHOLDERS = re.compile(r"<(image|audio|video)>")


def _refusal(where: str, what: Message) -> DataError:
    return DataError(at(where, Message("data.media_refused", reason=what)))


def content_text(record: Record, name: str, value: Any, media: str) -> tuple[Any, int]:
    """(text, media parts dropped) of a message's `content`: a string as it is, a list of parts
    joined (text parts in order); anything else is returned as it is for the caller to judge."""
    if not isinstance(value, list):
        return value, 0
    texts, dropped = [], 0
    for index, part in enumerate(value):
        field = f"{name}[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in TEXT_PART_TYPES and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in MEDIA_PART_TYPES:
            if media != "drop":
                article = "an" if MEDIA_PART_TYPES[kind][0] in "aeiou" else "a"
                raise _refusal(record.where, Message("data.media_part", field=f"'{field}'", article=article,
                                                     media=MEDIA_PART_TYPES[kind]))
            dropped += 1
        elif isinstance(part, str):
            texts.append(part)
        else:
            shown = repr(kind) if isinstance(part, dict) else json_type(part)
            raise DataError(at(record.where, Message("data.bad_part", field=f"'{field}'", part_type=shown)))
    return "".join(texts), dropped


def media_columns(record: Record, mapping: Mapping[str, str], media: str) -> int:
    """How many media the record's `images`/`audios`/`videos` columns hold (refused unless
    `media` is "drop")."""
    count = 0
    for key, names in MEDIA_COLUMNS.items():
        for source in ((mapping[key],) if key in mapping else names):
            value = record.fields.get(source)
            items = value if isinstance(value, list) else [value] if value not in (None, "") else []
            if not items:
                continue
            if media != "drop":
                kind = _KIND[key] + ("s" if len(items) != 1 else "")
                raise _refusal(record.where, Message("data.media_column", field=f"'{source}'", count=len(items),
                                                     media=kind))
            count += len(items)
    return count


def media_fields(record: Mapping, mapping: Mapping[str, str]) -> set[str]:
    """The record's fields that hold media (never reported as ignored: they are counted apart)."""
    return {source for key, names in MEDIA_COLUMNS.items()
            for source in ((mapping[key],) if key in mapping else names) if source in record}


def strip_placeholders(text: str) -> str:
    """The text without `<image>`, `<audio>` and `<video>` placeholders (and the blank they leave
    at the start or end)."""
    return PLACEHOLDERS.sub("", text).strip("\n") if PLACEHOLDERS.search(text) else text
