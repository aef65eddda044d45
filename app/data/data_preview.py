"""What the model will actually be trained on: the first samples rendered through its chat template,
with the masked tokens (system, user and tool turns, template markers) drawn differently from the
trained ones (assistant turns); the detected format, the column mapping in effect, the fields the
format ignores; and the length and padding statistics.

Both come from the engine's own functions (`tokenize_records`, `load_splits`), so the preview shows
exactly the token ids and loss labels the worker will use, not a re-implementation of them.
"""
from __future__ import annotations

import html
import threading
from collections import OrderedDict
from pathlib import Path

from core.spec.config import DataSettings
from core.spec.messages import Message
from core.data.pipeline import IGNORE_INDEX, DataStats, data_sources, load_splits, source_files, tokenize_records
from core.data.formats import FORMAT_FIELDS, TAG_DEFAULTS, Columns, ignored_fields
from core.data.files import DataError, DataFile, read_data_file
from core.data.catalog import read_catalog
from core.data.files import file_names, is_catalog, split_path
from core.spec.errors import said_of
from core.data.preference import PreferenceStats, load_preference_splits, preference_sources
from core.data.pairs import file_kind
from core.data.prompts import load_prompt_splits, prompt_sources, read_prompts, tokenize_prompts
from core.spec.stats import PromptStats
from core.data.tokenizer import Tokenizer, TokenizerError
from core.spec.objectives import spec_of

from app.i18n import TEXTS, place_text, problem_text, text
from app.paths import absolute
from app.data.preference_preview import pair_preview_html
from app.data.sample_html import legend, runs_html, token_runs

PREVIEW_SAMPLES = 3
CACHE_DIR = Path(".mindtune-cache") / "data"  # the worker's cache: a preview warms it for the run
STATS_MEMORY = 16  # DataStats kept in memory, keyed by the files' sizes and times and the settings


def _file_fields(data: DataFile) -> list[str]:
    if data.columns is not None:
        return list(data.columns)
    return list(dict.fromkeys(k for r in data.records[:200] for k in r.fields))


def mapping_html(data: DataFile, fmt: str, columns: Columns, lang: str = "en") -> str:
    """The mapping in effect: each field of the format and the dataset column it is read from
    (marked when data.columns maps it, or when no record has it), and the dataset's own fields."""
    present = set(_file_fields(data))
    required, optional = FORMAT_FIELDS[fmt]
    first = data.records[0].fields
    rows = []
    for name in (*required, *optional):
        source = columns.source(name, first)
        note = (text("dp.mapped", lang) if name in columns.mapping
                else "" if source in present else text("dp.absent", lang))
        rows.append(f"<tr><td><code>{name}</code></td><td>←</td><td><code>{html.escape(source)}</code></td>"
                    f"<td class='mt-note'>{note}</td></tr>")
    if fmt == "sharegpt":
        for tag in TAG_DEFAULTS:
            mapped = tag in columns.mapping
            rows.append(f"<tr><td><code>{tag}</code></td><td>=</td><td><code>{html.escape(columns.tag(tag))}</code>"
                        f"</td><td class='mt-note'>{text('dp.mapped', lang) if mapped else ''}</td></tr>")
    fields = ", ".join(f"<code>{html.escape(str(f))}</code>" for f in _file_fields(data))
    return (f'<table class="mt-mapping">{"".join(rows)}</table>'
            f'<div class="mt-note">{text("dp.fields", lang)} {fields}</div>')


def warnings_html(ignored: dict[str, int], total: int, fmt: str, lang: str = "en") -> str:
    """One line per field the format does not read: nothing is dropped without a word."""
    if not ignored:
        return ""
    items = "".join("<li>" + text("dp.ignored", lang).format(name=f"<code>{html.escape(name)}</code>", count=count,
                                                             total=total) + "</li>"
                    for name, count in ignored.items())
    return (f'<div class="mt-warning" id="data-warnings">{text("dp.ignored_head", lang).format(fmt=fmt)}'
            f'<ul>{items}</ul></div>')


def preview_html(model_dir: str, settings: DataSettings, samples: int = PREVIEW_SAMPLES, lang: str = "en") -> str:
    """The first `samples` records of the training data as the worker will see them, as HTML:
    the detected format, the mapping in effect, ignored fields, then each rendered sample with
    its trained tokens highlighted. Problems (unreadable file, bad record, a template that cannot
    render tools...) come back as a readable error block naming the file, record and field."""
    columns = Columns(dict(settings.columns))
    try:
        tokenizer = Tokenizer.from_dir(absolute(model_dir))
        first = file_names(settings.train_file)[0]
        if not isinstance(settings.train_file, list) and not is_catalog(absolute(split_path(first)[0])):
            raw = read_data_file(_absolute_name(settings.train_file), role="train", text_split=settings.text_split)
            kind = file_kind(raw, columns)
            if kind is not None:  # preference pairs or KTO answers: side by side (app.data.preference_preview)
                return pair_preview_html(raw, kind, tokenizer, settings.max_seq_len, samples, columns, lang,
                                         settings.overlong)
        elif _catalog_preference(settings):  # a catalogue's preference dataset (ranking: true or a kto_tag)
            source = preference_sources(_resolved(settings), "train")[0]
            return pair_preview_html(source.data, file_kind(source.data, source.columns), tokenizer,
                                     settings.max_seq_len, samples, source.columns, lang, settings.overlong)
        source = data_sources(_resolved(settings), "train")[0]  # a catalogue: the first dataset chosen
        data, resolved, columns = source.data, source.fmt, source.columns
        records = data.records[:samples]
        tokenized = tokenize_records(records, resolved, tokenizer, settings.max_seq_len, settings.mask_prompt,
                                     columns=columns, train_on=settings.train_on, overlong=settings.overlong,
                                     media=settings.media)
        ignored = ignored_fields(data.records, resolved, columns)
    except (DataError, TokenizerError, OSError) as err:
        return error_html(said_of(err), lang)
    catalog = is_catalog(absolute(split_path(file_names(settings.train_file)[0])[0]))
    how = text("dp.auto" if settings.format == "auto" and not catalog else "dp.as_set", lang)
    split = text("dp.split", lang).format(split=html.escape(data.split)) if data.split else ""
    line = text("dp.format", lang).format(fmt=f"<b>{html.escape(resolved)}</b>", how=how, split=split,
                                          n=len(records), total=len(data.records),
                                          trained=trained_text(resolved, settings, lang))
    blocks = [legend(lang), f'<div class="mt-note" id="data-format">{line}</div>',
              mapping_html(data, resolved, columns, lang), warnings_html(ignored, len(data.records), resolved, lang)]
    for index, (record, full) in enumerate(zip(records, tokenized.full_lengths)):
        where = place_text(record.where, lang)
        kept = [s for s, k in zip(tokenized.samples, tokenized.sources) if k == index]
        if not kept:
            skipped = text("dp.skipped_sample", lang).format(where=where, full=full)
            blocks.append(f'<div class="mt-note">{html.escape(skipped)}</div>')
        for sample in kept[:1]:  # a chunked text record: its first chunk
            trained = int((sample.labels != IGNORE_INDEX).sum())
            key = "dp.truncated_sample" if full > len(sample) and resolved != "text" else "dp.sample"
            about = text(key, lang).format(where=where, full=full, trained=trained, kept=len(sample))
            blocks.append(f'<div class="mt-note">{html.escape(about)}</div>')
            runs = token_runs(tokenizer, sample.input_ids.tolist(), sample.labels.tolist())
            blocks.append(runs_html(runs, dropped_tokens=full - len(sample), lang=lang))
    return "\n".join(b for b in blocks if b)


def _catalog_preference(settings: DataSettings) -> bool:
    """Whether the first dataset data.dataset picks of a catalogue is preference data."""
    if isinstance(settings.train_file, list) or not settings.dataset:
        return False
    folder = absolute(split_path(settings.train_file)[0])
    if not is_catalog(folder):
        return False
    entry = next((e for e in read_catalog(folder) if e.name == settings.dataset[0]), None)
    return entry is not None and entry.preference is not None


def trained_text(fmt: str, settings: DataSettings, lang: str = "en") -> str:
    """What the preview's format line says is trained: every token of raw text (and how .txt
    files were split), or the assistant turns that carry loss."""
    if fmt == "text":
        return text("dp.text_trained", lang).format(split=text(f"dp.split.{settings.text_split}", lang),
                                                    max=settings.max_seq_len)
    return text("dp.every_token" if not settings.mask_prompt else f"dp.{settings.train_on}", lang)


def error_html(message: str | BaseException, lang: str = "en") -> str:
    """A problem (a DataError's message, an error that keeps a core message by id, ...) in `lang`,
    as an error block."""
    return f'<div class="mt-error">{html.escape(problem_text(message, lang))}</div>'


def _absolute_name(name: str | list[str]) -> str | list[str]:
    """A data path (maybe 'folder#split', or a list of them) with the path part made absolute."""
    if isinstance(name, list):
        return [_absolute_name(item) for item in name]
    path, split = split_path(name)
    return str(absolute(path)) + (f"#{split}" if split else "")


def _resolved(settings: DataSettings) -> DataSettings:
    """`settings` with every data path made absolute."""
    return DataSettings.from_dict({**settings.to_dict(), **{k: _absolute_name(getattr(settings, k)) for k in
                                                            ("train_file", "validation_file", "test_file")
                                                            if getattr(settings, k)}})


class _StatsMemory:
    """The last few DataStats by what they depend on, cheaply checked (file sizes and modification
    times, the tokenizer files, the settings), so the form's many refreshes tokenize once."""

    def __init__(self, size: int):
        self.size, self.items, self.lock = size, OrderedDict(), threading.Lock()

    @staticmethod
    def key(model_dir: Path, settings: DataSettings, seed: int) -> tuple:
        files = []
        for role, split in (("train_file", "train"), ("validation_file", "validation"), ("test_file", "test")):
            name = getattr(settings, role)
            for path in (source_files(settings, name, split) if name else []):
                stat = path.stat()
                files.append((str(path), stat.st_size, stat.st_mtime_ns))
        tokenizer = [(p.name, p.stat().st_mtime_ns) for p in sorted(model_dir.glob("*.json*")) if p.is_file()]
        return (str(model_dir), tuple(tokenizer), tuple(files), repr(sorted(settings.to_dict().items())),
                None if settings.validation_file else seed)

    def get(self, key: tuple) -> DataStats | None:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        return None

    def put(self, key: tuple, stats: DataStats) -> None:
        with self.lock:
            self.items[key] = stats
            while len(self.items) > self.size:
                self.items.popitem(last=False)


_MEMORY = _StatsMemory(STATS_MEMORY)


def data_stats(model_dir: str, settings: DataSettings, seed: int, objective: str = "sft",
               max_prompt_len: int = 192) -> DataStats | PreferenceStats | PromptStats:
    """Length histograms, truncation counts, ignored fields, padding efficiency and the
    train/validation overlap for `settings` (tokenizes every file once; the result is kept in
    memory and cached on disk where the worker looks for it). For a preference objective
    (train.objective dpo, simpo, orpo, kto) the pairs' statistics instead, read as the worker reads
    them (core.data.preference.load_preference_splits); for grpo the prompts' (core.data.prompts, cut
    at `max_prompt_len`: grpo.max_prompt_len), with the columns every record hands the rewards."""
    folder = absolute(model_dir)
    resolved = _resolved(settings)
    try:
        key = (*_MEMORY.key(folder, resolved, seed), objective, max_prompt_len if spec_of(objective).data == "prompts" else None)
    except OSError as err:
        raise DataError(Message("data.files_unreadable", os_error=str(err))) from None
    stats = _MEMORY.get(key)
    if stats is None:
        tokenizer = Tokenizer.from_dir(folder)
        if spec_of(objective).data == "prompts":
            stats = load_prompt_splits(resolved, tokenizer, seed, max_prompt_len).stats
        elif spec_of(objective).data != "supervised":
            stats = load_preference_splits(resolved, tokenizer, seed, objective).stats
        else:
            stats = load_splits(resolved, tokenizer, seed, cache_dir=absolute(CACHE_DIR)).stats
        _MEMORY.put(key, stats)
    return stats


def prompt_preview_html(model_dir: str, settings: DataSettings, max_prompt_len: int, samples: int = PREVIEW_SAMPLES,
                        lang: str = "en") -> str:
    """grpo: the first `samples` training prompts as the rollouts get them (the chat template with the
    generation prompt, cut at grpo.max_prompt_len as data.overlong says) and the columns each hands
    the reward functions (core.data.prompts); problems as an error block."""
    try:
        tokenizer = Tokenizer.from_dir(absolute(model_dir))
        source = prompt_sources(_resolved(settings), "train")[0]
        first = DataFile(source.data.path, source.data.records[:samples], source.data.columns, source.data.split)
        convs = read_prompts([type(source)(first, source.columns, source.fmt)], getattr(settings, "media", "refuse"))
        prompts, _ = tokenize_prompts(convs, tokenizer, max_prompt_len, settings.overlong)
    except (DataError, TokenizerError, OSError) as err:
        return error_html(said_of(err), lang)
    kept = {p.where: p for p in prompts}
    head = text("dp.prompts", lang).format(n=len(convs), total=len(source.data.records), max=max_prompt_len)
    blocks = [f'<div class="mt-note" id="data-format">{head}</div>']
    for conv in convs:
        prompt = kept.get(conv.where)
        where = html.escape(place_text(conv.where, lang))
        if prompt is None:
            blocks.append(f'<div class="mt-note">{where} · {html.escape(text("dp.prompt_skipped", lang))}</div>')
            continue
        cut = prompt.full_length - len(prompt)
        about = text("dp.prompt_about", lang).format(tokens=len(prompt), cut=cut)
        columns = "".join(f"<tr><td><code>{html.escape(str(name))}</code></td><td>{html.escape(_shown_value(value))}"
                          f"</td></tr>" for name, value in prompt.columns.items())
        blocks.append(f'<div class="mt-prompt-sample"><div class="mt-note">{where} · {html.escape(about)}</div>'
                      f'<pre class="mt-prompt-text">{html.escape(tokenizer.decode(prompt.ids.tolist(), skip_special_tokens=False))}</pre>'
                      f'<div class="mt-note">{html.escape(text("dp.prompt_columns", lang))}</div>'
                      f'<table class="mt-mapping mt-reward-columns">{columns}</table></div>')
    return "\n".join(blocks)


def _shown_value(value, limit: int = 200) -> str:
    shown = value if isinstance(value, str) else repr(value)
    return shown if len(shown) <= limit else shown[:limit] + "…"


def prompt_stats_markdown(stats: PromptStats, lang: str = "en") -> str:
    """grpo: the prompts of each split, their lengths, those over grpo.max_prompt_len, and the columns
    every record hands the reward functions."""
    lines = []
    for name, split in (("train", stats.train), ("validation", stats.validation)):
        lines.append(text("dp.prompt_split", lang).format(
            split=text(f"dp.pst_split.{name}", lang), n=split.prompts, records=split.records, lo=split.min_length,
            mean=f"{split.mean_length:g}", hi=split.max_length, cut=split.truncated, skipped=split.skipped))
    lines.append(text("dp.prompt_reward_columns", lang).format(
        columns=", ".join(f"`{c}`" for c in stats.columns) or "–"))
    lines += [f"- ⚠ {problem_text(w, lang)}" for w in stats.warnings()]
    return "\n".join(lines)


def preference_stats_markdown(stats: PreferenceStats, max_seq_len: int, objective: str, lang: str = "en") -> str:
    """The figures of a preference objective's data: pairs (or KTO answers, desirable and not), the
    lengths of both sides, identical pairs dropped, answers cut, and the rows each pair costs."""
    kto = stats.train.kind == "kto"
    lines = []
    for name, split in (("train", stats.train), ("validation", stats.validation)):
        key = ("dp.pst_kto" if kto else "dp.pst_pairs") + ("_one" if split.pairs == 1 else "")
        lines.append(text(key, lang).format(
            split=text(f"dp.pst_split.{name}", lang), n=split.pairs, good=split.desirable,
            bad=split.pairs - split.desirable, c_mean=f"{split.chosen_mean_length:g}", c_max=split.chosen_max_length,
            r_mean=f"{split.rejected_mean_length:g}", r_max=split.rejected_max_length))
    if not kto:
        lines.append(text("dp.pst_dropped", lang).format(train=stats.train.identical_dropped,
                                                         validation=stats.validation.identical_dropped))
    lines.append(text("dp.pst_truncated", lang).format(max=max_seq_len, policy=stats.train.overlong_policy,
                                                       train=stats.train.overlong_records,
                                                       validation=stats.validation.overlong_records))
    lines.append(text("dp.pst_rows_kto", lang).format(seq=stats.seq_len) if kto else
                 text("dp.pst_rows", lang).format(rows=2, seq=stats.seq_len, objective=objective))
    lines += [f"- ⚠ {problem_text(w, lang)}" for w in stats.warnings()]
    return "\n".join(lines)


def histogram_html(stats: DataStats, max_seq_len: int, lang: str = "en") -> str:
    """The training split's token lengths as bars; bins beyond max_seq_len are drawn as truncated."""
    split = stats.train
    top = max(split.histogram_counts) or 1
    bars = []
    for lo, hi, count in zip(split.histogram_edges, split.histogram_edges[1:], split.histogram_counts):
        height = round(100 * count / top)
        css = "mt-bar mt-bar-cut" if hi - 1 > max_seq_len else "mt-bar"
        hover = html.escape(text("dp.bin", lang).format(lo=lo, hi=hi - 1, count=count))
        bars.append(f'<div class="{css}" style="height:{height}%" title="{hover}"></div>')
    axis = (f'<div class="mt-hist-axis"><span>{split.min_length}</span>'
            f'<span>{text("dp.axis", lang)}</span><span>{split.max_length}</span></div>')
    return f'<div class="mt-hist">{"".join(bars)}</div>{axis}'


def _percent(x: float) -> str:
    return f"{100 * x:.0f}%"


def stats_markdown(stats: DataStats, max_seq_len: int, lang: str = "en") -> str:
    """The figures a user checks before training: sizes, lengths, truncation, padding, overlap,
    and the fields the format ignores."""
    t, v = stats.train, stats.validation
    share = f"{100 * t.truncated / t.samples:.1f}%" if t.samples else "0%"
    overlap = stats.validation_in_train
    gain = t.packed_efficiency / t.padding_efficiency if t.padding_efficiency else 0.0
    source = stats.validation_source
    gain_text = text("dp.st_gain", lang).format(gain=f"{gain:.1f}") if gain > 1.05 else ""
    lines = [
        text("dp.st_train", lang).format(n=t.samples, fmt=t.format, tokens=t.labelled_tokens, lo=t.min_length,
                                         hi=t.max_length, mean=f"{t.mean_length:g}"),
        text("dp.st_validation", lang).format(source=text(f"dp.source.{source}", lang) if f"dp.source.{source}" in TEXTS
                                              else source, n=v.samples, lo=v.min_length, hi=v.max_length),
        text("dp.st_truncated", lang).format(max=max_seq_len, train=t.truncated, share=share, validation=v.truncated),
        text("dp.st_padding", lang).format(one=_percent(t.padding_efficiency), seq=stats.seq_len,
                                           packed=_percent(t.packed_efficiency), packed_seq=stats.packed_seq_len)
        + gain_text,
        text("dp.st_overlap", lang).format(overlap=overlap, n=v.samples)
        + (text("dp.st_overlap_warn", lang) if overlap else ""),
        text("dp.st_test", lang).format(n=stats.test_records),
    ]
    lines += [f"- ⚠ {problem_text(w, lang)}" for w in stats.warnings()]
    return "\n".join(lines)
