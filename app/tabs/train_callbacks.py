"""Train tab callbacks: form values in, plain values out (configs, errors, YAML, commands, messages).

`check_form` is the single gate: the config it returns is what the preview shows and what Start
launches, so an invalid config can neither be previewed as valid nor launched.
"""
from __future__ import annotations

import functools
import html
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import core.run.accelerators as accelerators
import core.run.launcher as launcher
import core.run.tracking as tracking
from core.spec.config import Config, ConfigError, deep_merge, joined, load_config, read_config_file
from core.spec.messages import Message
from core.spec.objectives import spec_of
from core.eval.rewards import check_rewards
from core.data.pipeline import run_seq_len
from core.data.files import DataError
from core.data.files import file_names, split_path
from core.spec.model_args import check_run_settings, read_model_args
from core.spec.errors import CheckpointError
from core.run.rundir import RunDir
from core.data.tokenizer import TokenizerError

from app.data import catalog, data_preview
from app.runs import devices
from app.tabs import form
from app.auth.access import SINGLE_USER, Viewer
from app.background import run_with_ticks
from app.runs.cluster import cluster_errors
from app.tabs.changes import Change, applies, changes, changes_text, flatten, same, show
from app.context import Console
from app.charts.figures import compared_name, figure_label, figure_value, final_value, run_spec
from app.i18n import Said, memory_note, problem_text, text
from core.spec.errors import RECORDS_ENV, error_on, said_of
from app.paths import OutsideRootsError, inside_roots

PREVIEW_MASTER_PORT = 29500  # shown in previews; a free port is chosen at launch
STARTER_CONFIG = "lora_demo.yaml"


class _SaidConfigError(ConfigError):
    """A config the console refuses in its own words (app.i18n.Said), kept as `said` for the page."""

    def __init__(self, said: Said):
        super().__init__(str(said))
        self._said = said

    @property
    def said(self) -> list[str]:
        return [self._said]


@dataclass
class FormCheck:
    """The config a form describes (None when invalid) and the errors by widget key."""
    config: Config | None
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.config is not None and not self.errors


# ---- the form <-> config --------------------------------------------------------------------

def starter_config(console: Console) -> Config:
    """What the form opens with: the demo LoRA config when it is shipped, with this console's runs
    folder, and the first loadable model or dataset when the demo ones are missing."""
    path = console.settings.configs_dir / STARTER_CONFIG
    try:
        config = load_config(path) if path.is_file() else Config()
    except ConfigError:
        config = Config()
    # no run name: the shipped config's ("demo-lora") would end up in the id of a full fine-tune
    # once the method is switched; the id already names the model, method, precision and workers
    updates: dict[str, Any] = {"run.runs_dir": console.runs_dir_for_config, "run.name": None}
    models = [m for m in console.models() if m.loadable]
    if models and catalog.find(models, config.model.path) is None:
        updates["model.path"] = models[0].name
    if _data_file_error(config.data.train_file, console):
        datasets = console.datasets()
        if datasets:
            updates.update(dataset_fields(datasets[0].key, console))
    return config.with_updates(updates)


def check_form(values: Mapping[str, Any], console: Console, data: bool = True) -> FormCheck:
    """Validate the form: the config's own rules, then what this console can read and run; with
    `data`, also whether the worker can read the data (every file tokenized once, then kept in
    memory)."""
    config, errors = form.to_config(values, console.runs_dir_for_config)
    if config is None:
        return FormCheck(None, errors)
    errors = console_errors(config, console, data)
    return FormCheck(config if not errors else None, errors)


def console_errors(config: Config, console: Console, data: bool = True) -> dict[str, str]:
    """Rules beyond the config's: the model is listed and loadable, data files lie inside the data
    roots and exist (and with `data`, parse in their format), and the machine has the workers
    asked for."""
    errors: dict[str, str] = {}
    entry = catalog.find(console.models(), config.model.path)
    if entry is None:
        errors["model.path"] = Said("check.not_model_folder", path=config.model.path,
                                    roots=", ".join(str(r) for r in console.settings.models_dirs))
    elif not entry.loadable:
        errors["model.path"] = Said("check.not_loadable", name=entry.name, problem=entry.reason)
    else:
        try:
            check_run_settings(config.with_updates({"model.path": str(entry.path)}))
        except ConfigError as err:  # data.max_seq_len above the context, LoRA targets the model lacks
            errors.update(form.errors_by_widget(err.errors))
        except CheckpointError as err:
            errors["model.path"] = err.message  # a core message by id where it has one (core.spec.errors)
    for key in ("data.train_file", "data.validation_file", "data.test_file"):
        name = config.to_flat()[key]
        if name:
            message = _data_file_error(name, console)
            if message:
                errors[key] = message
    if data and not errors:  # the files are there: can the worker read them? (a malformed line blocks Start)
        from app.tabs.data_callbacks import data_problems
        errors.update(data_problems(config, console))
    if spec_of(config.train.objective).rewards:
        problems = reward_problems(config, console, data=data and not errors)
        if problems:
            errors["grpo.rewards"] = functools.reduce(joined, problems)
    if config.launch.backend != form.LOCAL:  # its workers are on the cluster's nodes, not here
        offer = console.cluster_offer()
        errors.update(form.errors_by_widget(cluster_errors(config, offer, ask_slurm=data,
                                                           check_submission=console.cluster.check_submission)))
        return errors
    try:
        launcher.check_workers_available(config.parallel.data_parallel, config.parallel.device)
    except ConfigError as err:
        errors.update(form.errors_by_widget(err.errors))
    missing = [said_of(err) for err in map(_tracker_missing, config.tracking) if err]
    if missing:  # the worker would only report it and go on: said here, before the run starts
        errors["tracking"] = functools.reduce(joined, missing)
    return errors


def reward_problems(config: Config, console: Console, data: bool = True) -> list:
    """What keeps a grpo config's rewards from running here (core.eval.rewards.check_rewards): a column
    the data lacks (with `data`: the prompts are read, the statistics' reading, kept in memory), a reward
    file missing or outside the console's --rewards-dir folders, a reward_model run that is not a
    finished reward run. Each a message by id."""
    columns = None
    if data:
        from app.tabs.data_callbacks import prompt_columns
        columns = prompt_columns(config, console)
    return [problem.reason for problem in check_rewards(config, columns, allowed_dirs=console.settings.rewards_dirs)]


def file_reward_refused(config: Config, console: Console, viewer: Viewer) -> Said | None:
    """With logins (--auth), a reward function read from a file runs its code in the worker: only an
    administrator may start such a run (None: allowed)."""
    if not console.settings.auth or viewer.admin or not spec_of(config.train.objective).rewards:
        return None
    files = [spec.get("path", "") for spec in config.grpo.rewards if spec.get("function") == "file"]
    return Said("check.reward_file_admin", user=viewer.user or "?", files=", ".join(files)) if files else None


def _tracker_missing(name: str) -> tracking.TrackerUnavailable | None:
    try:
        tracking.check_installed(name)
    except tracking.TrackerUnavailable as err:
        return err
    return None


def _data_file_error(name: str, console: Console) -> str | None:
    """Why a data path cannot be used (outside the data roots, missing), or None. A path may be a
    file, a dataset folder, or 'folder#split'."""
    for item in file_names(name):  # data.train_file may be a list of files (set in YAML or an override)
        try:
            path = inside_roots(split_path(item)[0], console.settings.all_data_dirs)
        except OutsideRootsError as err:
            return said_of(err)
        if not path.exists():
            return Message("data.file_not_found", file=item)
    return None


def dataset_fields(train_file: str, console: Console) -> dict[str, Any]:
    """The data.* values for a dataset picked by its training file; a dataset without a validation
    file gets a tenth of train held out."""
    from app.data.datasets import find_by_train_file

    dataset = find_by_train_file(console.datasets(), train_file)
    if dataset is None:
        return {"data.train_file": train_file, "data.dataset": ""}
    fraction = 0.0 if dataset.validation_file else 0.1
    # another dataset: its format is detected afresh and the previous one's column mapping dropped
    # (a catalogue's dataset brings its own formatting and columns)
    return {"data.train_file": dataset.train_file, "data.dataset": dataset.dataset or "",
            "data.validation_file": dataset.validation_file, "data.test_file": dataset.test_file,
            "data.validation_fraction": fraction, "data.format": "auto", "data.columns": ""}


# ---- what will run --------------------------------------------------------------------------

def preview_run_dir(config: Config, console: Console) -> RunDir:
    """The folder a Start now would create (the timestamp in its id is fixed at Start)."""
    return RunDir(console.runs_dir / launcher.run_id_for(config))


def command_argv(config: Config, console: Console) -> list[str]:
    """The worker's argv, from the launcher's own builder."""
    dp = config.parallel.data_parallel
    return launcher.build_argv(preview_run_dir(config, console), dp,
                               master_port=PREVIEW_MASTER_PORT if dp > 1 else None)


def command_text(config: Config, console: Console) -> str:
    """What Start will run: the worker's command, or for a cluster run the batch script that will
    be written into the run folder and submitted."""
    if config.launch.backend != form.LOCAL:
        return sbatch_text(config, console)
    return launcher.command_preview(command_argv(config, console))


def sbatch_text(config: Config, console: Console) -> str:
    """The sbatch script of a cluster run, from core.run.slurm's own writer (the port is chosen at Start)."""
    import core.run.slurm as slurm

    try:
        return slurm.build_script(preview_run_dir(config, console), config, master_port=PREVIEW_MASTER_PORT)
    except (launcher.LaunchError, ConfigError, OSError) as err:
        return f"# no batch script: {err}"


def multi_host_text(config: Config, nodes: int, master_addr: str, port: int) -> str:
    """msrun commands for `nodes` machines with data_parallel workers each (display only)."""
    if not nodes or nodes < 2:
        return "# a single machine: the command above is all there is"
    try:
        commands = launcher.multi_host_commands(config.parallel.data_parallel, int(nodes),
                                                master_addr or "<node-0-address>", int(port or 0))
    except launcher.LaunchError as err:
        return f"# {err}"
    lines = [f"# node {rank}\n{cmd}" for rank, cmd in enumerate(commands)]
    return "\n".join(lines) + "\n# the run folder must be on storage every node shares"


def workers_field(where: str | None, nodes: Any, per_node: Any, workers: Any, device: str) -> dict[str, Any]:
    """The data-parallel slider's settings for "Where to run": on a Slurm partition it shows the
    job's width, nodes x workers per node (what the config gets), and is not edited by hand; on
    this machine it is the user's again, up to this device's workers."""
    def whole(value: Any) -> int:
        return int(value) if isinstance(value, (int, float)) and value >= 1 else 1

    top = devices.max_workers(device)
    if (where or form.LOCAL) != form.LOCAL:
        width = whole(nodes) * whole(per_node)
        return {"value": width, "maximum": max(top, width), "interactive": False}
    return {"value": min(whole(workers), top), "maximum": top, "interactive": True}


def global_batch_text(values: Mapping[str, Any], lang: str) -> str:
    """'Global batch 16 = micro 8 × accumulation 2 × workers 1', from whatever the form holds."""
    def number(key: str) -> int | None:
        value = values.get(key)
        return int(value) if isinstance(value, (int, float)) and value >= 1 else None

    micro, accum = number("train.micro_batch_size"), number("train.grad_accum_steps")
    workers = number("parallel.data_parallel")
    if None in (micro, accum, workers):
        return f"**{text('global_batch', lang)}**: -"
    parts = text("batch.parts", lang).format(micro=micro, accum=accum, workers=workers)
    return f"**{text('global_batch', lang)} {micro * accum * workers}** {parts}"


def memory_estimate(config: Config, console: Console, lang: str = "en") -> tuple[Any | None, str]:
    """core.spec.memory's estimate for `config` (None when there is none) and the sequence-length note,
    or the reason there is no estimate."""
    entry = catalog.find(console.models(), config.model.path)
    if entry is None or not entry.loadable:
        return None, text("mem.pick_model", lang)
    try:
        import core.spec.memory as memory  # written separately; the console works without it
        args = read_model_args(entry.path)
        found = accelerators.ask(config.parallel.device)  # GPU/Ascend: nvidia-smi / npu-smi
        device_mb = memory.device_memory_mb("cpu") if found.device == "cpu" else found.memory_mb
        seq_len, seq_note = batch_seq_len(config, lang)
        return memory.estimate_memory(config, args, seq_len, device_memory_mb=device_mb, soc=found.soc,
                                      unknown_why=found.why), seq_note
    except (ImportError, AttributeError) as err:
        return None, f"{type(err).__name__}: core.spec.memory"
    except (CheckpointError, ValueError, TypeError) as err:
        return None, problem_text(err, lang)


def memory_html(config: Config, console: Console, lang: str = "en") -> str:
    """The memory estimate per worker against the device's memory, or why there is none."""
    estimate, note = memory_estimate(config, console, lang)
    if estimate is None:
        return f'<div class="mt-note">{text("mem.unavailable", lang)}: {html.escape(note)}</div>'
    return estimate_table(estimate, note, lang)


# What the console suggests when a run does not fit: each change with its own estimate.
def fit_suggestions(config: Config, console: Console, lang: str = "en") -> list[tuple[str, float, bool]]:
    """(what to change, in `lang`; estimated MB per worker after it; fits) for the changes that
    lower memory most: LoRA instead of full, half the micro batch (twice the accumulation: the same
    global batch), recompute every layer, half the sequence length."""
    t, candidates = config.train, []
    if config.method == "full":
        candidates.append((text("fit.lora", lang), {"method": "lora"}))
    if t.micro_batch_size > 1:
        half = t.micro_batch_size // 2
        candidates.append((text("fit.half_batch", lang).format(micro=t.micro_batch_size, half=half,
                                                                accum=t.grad_accum_steps, accum2=t.grad_accum_steps * 2),
                           {"train.micro_batch_size": half, "train.grad_accum_steps": t.grad_accum_steps * 2}))
    if config.recompute.policy != "full" or config.recompute.layer_fraction < 1:
        candidates.append((text("fit.recompute", lang), {"recompute.policy": "full", "recompute.layer_fraction": 1.0}))
    if config.data.max_seq_len >= 64:
        half = config.data.max_seq_len // 2
        candidates.append((text("fit.seq", lang).format(seq=config.data.max_seq_len, half=half),
                           {"data.max_seq_len": half}))
    out = []
    for text_, updates in candidates:
        try:
            estimate, _ = memory_estimate(config.with_updates(updates), console)
        except ConfigError:
            continue
        if estimate is not None:
            out.append((text_, estimate.total_mb, bool(estimate.fits)))
    return out


def does_not_fit(config: Config, console: Console, lang: str = "en") -> str | None:
    """Why the run will not fit this machine's memory, with what to change, in `lang`; None when it
    fits (or when nothing is known: no estimate, or a device whose memory the console cannot read)."""
    estimate, _ = memory_estimate(config, console)
    if estimate is None or estimate.fits or estimate.device_memory_mb is None:
        return None
    workers = config.parallel.data_parallel
    if config.parallel.device != "cpu":  # each worker has a device of its own (nvidia-smi / npu-smi's figure)
        head = text("fit.more_device", lang).format(mb=f"{estimate.total_mb:,.0f}", name=config.parallel.device,
                                                    device=f"{estimate.device_memory_mb:,.0f}")
    else:
        need = text("fit.need", lang).format(mb=f"{estimate.total_mb:,.0f}") + (
            text("fit.workers", lang).format(n=workers) if workers > 1 else "")
        head = text("fit.more", lang).format(need=need, device=f"{estimate.device_memory_mb:,.0f}")
    changes_ = [text("fit.item", lang).format(change=change, mb=f"{mb:,.0f}") + (text("fit.fits", lang) if fits else "")
                for change, mb, fits in fit_suggestions(config, console, lang)]
    return head + (text("fit.to_fit", lang) + ("；" if lang == "zh" else "; ").join(changes_) if changes_ else "")


def batch_seq_len(config: Config, lang: str = "en") -> tuple[int, str]:
    """The sequence length every batch of this run will have (what the worker pads to: the longest
    sample rounded up, at most max_seq_len), and a note saying where it came from."""
    if config.data.packing:
        length = run_seq_len(config.data.max_seq_len, 0, packing=True)
        return length, text("mem.seq_packed", lang).format(seq=length, max=config.data.max_seq_len)
    try:
        stats = data_preview.data_stats(config.model.path, config.data, config.run.seed)
    except (DataError, TokenizerError, OSError, ValueError) as err:
        return config.data.max_seq_len, text("mem.seq_unreadable", lang).format(
            seq=config.data.max_seq_len, err=problem_text(err, lang))
    longest = max(stats.train.max_length, stats.validation.max_length)
    length = run_seq_len(config.data.max_seq_len, longest)
    grouped = text("mem.seq_grouped", lang) if config.data.group_by_length else ""
    return length, text("mem.seq_longest", lang).format(seq=length, longest=longest, max=config.data.max_seq_len) + grouped


def estimate_table(estimate: Any, seq_note: str | None = None, lang: str = "en") -> str:
    """A MemoryEstimate as an HTML table (fields per worker, in MB)."""
    rows = [("mem.weights", estimate.weights_mb), ("mem.gradients", estimate.gradients_mb),
            ("mem.optimizer", estimate.optimizer_mb), ("mem.activations", estimate.activations_mb),
            ("mem.runtime", getattr(estimate, "runtime_mb", None))]
    body = "".join(f"<tr><td>{text(key, lang)}</td><td>{mb:,.1f} MB</td></tr>" for key, mb in rows if mb is not None)
    device = getattr(estimate, "device_memory_mb", None)
    fits = getattr(estimate, "fits", None)
    verdict = "" if device is None else (" " + text("mem.of", lang).format(device=f"{device:,.0f}") + " — "
                                         + text("mem.fits" if fits else "mem.no_fit", lang))
    css = "mt-fits" if fits or device is None else "mt-nofit"
    body += f'<tr class="{css}"><th>{text("mem.total", lang)}</th><th>{estimate.total_mb:,.1f} MB{verdict}</th></tr>'
    notes = getattr(estimate, "notes", None) or []
    notes = [memory_note(n, lang) for n in ([notes] if isinstance(notes, str) else notes)]
    trainable, total = getattr(estimate, "trainable_parameters", 0), getattr(estimate, "parameters", 0)
    if total:
        notes = [text("mem.trainable", lang).format(trainable=f"{trainable:,}", total=f"{total:,}",
                                                     share=percent(trainable, total)), *notes]
    if seq_note:
        notes = [seq_note, *notes]
    note_html = "".join(f"<li>{html.escape(str(n))}</li>" for n in notes)
    return f'<table class="mt-memory">{body}</table>' + (f"<ul class='mt-note'>{note_html}</ul>" if note_html else "")


def percent(part: float, whole: float) -> str:
    """A share for people: '100%', '52%', '0.52%', '0.0031%' (two significant digits below 10%,
    never an exponent)."""
    share = 100.0 * part / whole if whole else 0.0
    if share >= 10 or share == 0:
        return f"{share:.0f}%"
    digits = max(1, 1 - math.floor(math.log10(share)))
    return f"{share:.{digits}f}%"


def errors_html(errors: Mapping[str, str], lang: str = "en") -> str:
    """Every problem with its field, for the box above the Start button ('' when none), in `lang`."""
    if not errors:
        return ""
    items = "".join(f"<li><code>{html.escape(k or 'config')}</code>: {html.escape(problem_text(v, lang))}</li>"
                    for k, v in errors.items())
    return f'<div class="mt-error"><ul>{items}</ul></div>'


@dataclass
class Preview:
    """Everything the 'Before launch' section shows for the current form."""
    check: FormCheck
    yaml_text: str
    command: str
    memory: str
    errors: str


def preview(values: Mapping[str, Any], console: Console, data: bool = True, lang: str = "en") -> Preview:
    """What the form will run; without `data`, only what needs no data file read (the memory
    estimate, which needs the run's sequence length, and the data problems are then left out)."""
    check = check_form(values, console, data)
    if check.config is None:
        invalid = "# the config is not valid yet; fix the fields marked in red\n"
        return Preview(check, invalid, "-", f'<div class="mt-note">{text("mem.unavailable", lang)}: {text("mem.invalid", lang)}</div>',
                       errors_html(check.errors))
    config = check.config
    memory = memory_html(config, console, lang) if data else ""
    return Preview(check, config.to_yaml(), command_text(config, console), memory, "")


# ---- saving, loading, starting ------------------------------------------------------------------

def save_yaml(values: Mapping[str, Any], console: Console) -> Path:
    """Write the form's config under the uploads folder and return the file (for a download)."""
    check = check_form(values, console)
    if check.config is None:
        raise ConfigError("; ".join(f"{k}: {v}" for k, v in check.errors.items()))
    folder = console.settings.uploads_dir / "configs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{launcher.run_id_for(check.config)}.yaml"
    path.write_text(check.config.to_yaml(comments=True), encoding="utf-8")
    return path


def save_config(values: Mapping[str, Any], console: Console, lang: str = "en") -> tuple[Path | None, str]:
    """Save the form's config (`save_yaml`): the file, or None, and the message that answers the
    click in `lang` (every field problem when the form is invalid)."""
    try:
        path = save_yaml(values, console)
    except ValueError as err:
        errors = check_form(values, console).errors
        why = "; ".join(f"{k}: {problem_text(v, lang)}" for k, v in errors.items()) or problem_text(err, lang)
        return None, text("config.not_saved", lang).format(why=why)
    return path, text("config.saved", lang).format(file=path.name)


def load_config_values(loader, source: str, console: Console, lang: str = "en") -> tuple[dict[str, Any], str]:
    """The widget values `loader` (`load_yaml`, `load_shipped`) reads from `source`, and the message
    in `lang`; no values and the problem when the file cannot be used."""
    try:
        values = loader(source, console)
    except (ValueError, OSError) as err:
        return {}, f"⚠ {problem_text(err, lang)}"
    return values, text("config.loaded", lang).format(file=str(source).rsplit("/", 1)[-1])


def load_yaml(path: str | Path, console: Console) -> dict[str, Any]:
    """Widget values of an uploaded YAML config (validated; its runs folder replaced by this
    console's). Its `base:` files may only be configs shipped in the configs folder, so an upload
    cannot make the console read files outside the folders it serves."""
    data = read_config_file(Path(path))
    if not data:
        raise ConfigError(Message("config.empty_file", file=Path(path).name))
    bases = data.pop("base", None)
    merged: dict[str, Any] = {}
    for base in [bases] if isinstance(bases, str) else bases or []:
        try:
            base_path = inside_roots(console.settings.configs_dir / str(base), [console.settings.configs_dir])
        except OutsideRootsError as err:
            raise _SaidConfigError(Said("check.in_base", problem=said_of(err))) from None
        merged = deep_merge(merged, load_config(base_path).to_dict())
    config = Config.from_dict(deep_merge(merged, data))
    return form.to_values(config.with_updates({"run.runs_dir": console.runs_dir_for_config, "run.resume": None}))


def _load_shipped_file(path: Path, console: Console) -> dict[str, Any]:
    config = load_config(path).with_updates({"run.runs_dir": console.runs_dir_for_config, "run.resume": None})
    return form.to_values(config)


def shipped_configs(console: Console) -> list[str]:
    folder = console.settings.configs_dir
    return sorted(p.name for p in folder.glob("*.yaml")) if folder.is_dir() else []


def load_shipped(name: str, console: Console) -> dict[str, Any]:
    """Widget values of a config shipped in the configs folder (its bases resolve as usual)."""
    return _load_shipped_file(console.settings.configs_dir / Path(name).name, console)


# ---- a run made from another one: new run from this, fork from a checkpoint -----------------------

@dataclass(frozen=True)
class Reference:
    """The run the form was filled from: its id, its config (flat, for the differences) and, for a
    fork, the checkpoint step and folder the new run starts from."""
    run_id: str
    flat: dict[str, Any]
    step: int | None = None
    checkpoint: str | None = None

    @property
    def is_fork(self) -> bool:
        return self.checkpoint is not None

    def to_state(self) -> dict[str, Any]:
        """For a gr.State (plain data)."""
        return {"run_id": self.run_id, "flat": self.flat, "step": self.step, "checkpoint": self.checkpoint}

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None) -> Reference | None:
        return cls(state["run_id"], dict(state["flat"]), state.get("step"), state.get("checkpoint")) if state else None


def launch_config(config: Config, reference: Reference | None) -> Config:
    """What Start launches from the form's config: a fork's also names its checkpoint (the YAML
    preview shows this one, so it never says `fork_from: null` under a fork's banner)."""
    return config.with_updates({"run.fork_from": reference.checkpoint}) if reference and reference.is_fork else config


# settings a fork must keep from its parent: the checkpoint holds weights of exactly these
FORK_KEEPS = ("model.path", "method", "lora.rank", "lora.target_modules")


def new_from_run(console: Console, run_id: str, viewer: Viewer = SINGLE_USER,
                 step: int | None = None) -> tuple[dict[str, Any], Reference]:
    """The form values of a run's exact config (this console's runs folder) and the Reference to
    compare the edits with; with `step`, a fork from that checkpoint (train.length raised past the
    step when the parent ended there, since a fork counts on from it)."""
    run = console.jobs.run_dir(run_id, viewer)
    config = load_config(run.config_path).with_updates(
        {"run.runs_dir": console.runs_dir_for_config, "run.resume": None, "run.fork_from": None})
    checkpoint = None
    if step is not None:
        folder = run.checkpoint(int(step))
        if not folder.is_dir():
            kept = ", ".join(f"step-{n}" for n in run.checkpoint_steps()) or Said("check.none")
            raise _SaidConfigError(Said("check.no_fork_checkpoint", run=run_id, step=step, kept=kept))
        checkpoint = str(folder)
    reference = Reference(run_id, flatten(config.to_dict()), step, checkpoint)
    if step is not None and config.train.max_steps is not None and config.train.max_steps <= step:
        config = config.with_updates({"train.max_steps": step + max(config.train.max_steps, 1)})
    return form.to_values(config), reference


def form_changes(config: Config | None, reference: Reference | None) -> list[Change]:
    """What the form's config changes from the reference run's (none without a valid config)."""
    if config is None or reference is None:
        return []
    return changes(reference.flat, flatten(config.to_dict()))


def changed_widgets(found: list[Change]) -> dict[str, Any]:
    """Widget key -> the reference's value, for the widgets whose value differs."""
    out: dict[str, Any] = {}
    for change in found:
        widget = form.widget_for_error(change.key)
        if widget:
            out[widget] = change.old
    return out


def fork_errors(config: Config, reference: Reference | None) -> dict[str, str]:
    """What a fork cannot change (by widget), and a step count that must pass the checkpoint's."""
    if reference is None or not reference.is_fork:
        return {}
    flat, errors = flatten(config.to_dict()), {}
    for key in FORK_KEEPS:
        if applies(flat, key) and not same(flat.get(key), reference.flat.get(key)):
            errors[form.widget_for_error(key) or key] = Said(
                "check.fork_keeps", setting=key, run=reference.run_id, value=show(reference.flat.get(key)))
    steps = config.train.max_steps
    if steps is not None and reference.step is not None and steps <= reference.step:
        errors[form.LENGTH] = Said("check.fork_steps", step=reference.step, example=reference.step * 2)
    return errors


def reference_html(reference: Reference | None, lang: str = "en") -> str:
    """The line above the form naming the run it was filled from ('' when none)."""
    if reference is None:
        return ""
    key = "ref.fork" if reference.is_fork else "ref.new_from"
    return (f'<div class="mt-reference">{html.escape(text(key, lang))} <code>{html.escape(reference.run_id)}</code>'
            + (f" · {text('status.step', lang)} {reference.step}" if reference.is_fork else "") + "</div>")


def changes_html(found: list[Change], reference: Reference | None, lang: str = "en") -> str:
    """Near Start: the settings that will differ from the reference run."""
    if reference is None:
        return ""
    if not found:
        return f'<div class="mt-note" id="no-changes">{html.escape(text("ref.no_changes", lang))}</div>'
    items = "".join(f"<li><code>{html.escape(c.text())}</code></li>" for c in found)
    return f'<div class="mt-changes"><b>{html.escape(text("ref.changes", lang))}</b><ul>{items}</ul></div>'


@dataclass
class StartOutcome:
    run_id: str | None
    message: str
    errors: dict[str, str] = field(default_factory=dict)
    queued: bool = False
    needs_confirmation: bool = False  # refused for memory: "Start anyway" launches it


def start(values: Mapping[str, Any], console: Console, owner: str | None = None,
          reference: Reference | None = None, confirmed: bool = False, lang: str = "en",
          viewer: Viewer = SINGLE_USER) -> StartOutcome:
    """Launch the form's config (or queue it while the devices are busy); never launches an
    invalid one. A repeat click returns the run already started. `owner` (the logged-in user) is
    recorded in the run, and so is `reference`, the run this one was made from (a fork starts
    from its checkpoint); the message then says what changed ("lora.rank 8 → 16"). A run whose
    memory estimate does not fit the machine is refused with the estimate and what to change,
    unless `confirmed` (the user pressed "Start anyway"); that refusal is written in `lang`. With
    logins, a grpo run whose rewards read a file is started only by an administrator (`viewer`)."""
    check = check_form(values, console)
    errors = check.errors if not check.ok else fork_errors(check.config, reference)
    refused = file_reward_refused(check.config, console, viewer) if check.ok else None
    if refused is not None:
        errors = {**errors, "grpo.rewards": refused}
    if errors:
        return StartOutcome(None, Said("act.not_started_fix"), errors)
    config = check.config
    if not confirmed and config.launch.backend == form.LOCAL:  # a cluster run's memory is its nodes'
        too_big = does_not_fit(config, console, lang)
        if too_big:
            return StartOutcome(None, Said("act.not_started_because", problem=too_big), needs_confirmation=True)
    parent = (reference.run_id, reference.step) if reference is not None else None
    config = launch_config(config, reference)
    try:
        result = console.jobs.start(config, owner=owner, parent=parent, workers_checked=True)  # check_form did
    except ConfigError as err:
        return StartOutcome(None, Said("act.not_started"), form.errors_by_widget(err.errors))
    except (launcher.LaunchError, OSError) as err:
        how = "act.not_submitted" if config.launch.backend != form.LOCAL else "act.could_not_start"
        return StartOutcome(None, Said(how, problem=err))
    message = result.message
    if reference is not None:
        found = form_changes(check.config, reference)
        changed = changes_text(found) or Said("act.no_change")
        origin = (Said("act.forked_from", run=reference.run_id, step=reference.step, changes=changed)
                  if reference.is_fork else Said("act.made_from", run=reference.run_id, changes=changed))
        message = Said("act.with_origin", message=message, origin=origin)
    return StartOutcome(result.run_id, tracker_said(message, config, console.runs_dir / result.run_id),
                        queued=result.queued)


def tracker_said(message: Said, config: Config, run_path) -> Said:
    """Start's answer followed by where each tracker of the run writes and the command that shows it."""
    for place in tracking.destinations(config, run_path):
        said = Said(f"track.{place.kind}", where=f"`{place.where}`", command=f"`{place.command}`" if place.command else "")
        message = Said("act.and_tracker", message=message, tracker=said)
    return message


def monitor_for(objective: str | None, monitor: str | None) -> str | None:
    """early_stopping.monitor after train.objective became `objective`: the same figure when that
    objective logs it, else the objective's default (grpo: val_reward; dpo: reward_accuracy)."""
    spec = spec_of(objective)
    return monitor if monitor in spec.monitors else spec.default_monitor


def target_choices(model_name: str | None, console: Console) -> list[str]:
    """The LoRA target checkboxes: the projection names this model's weights really have."""
    entry = catalog.find(console.models(), model_name)
    return list(entry.projection_names) if entry and entry.loadable else list(catalog.PROJECTION_NAMES)


def target_defaults(model_name: str | None, console: Console) -> list[str]:
    """The boxes checked when nothing of the model's is: its family's defaults ('all-linear';
    never an MoE router)."""
    entry = catalog.find(console.models(), model_name)
    return list(entry.default_targets) if entry and entry.loadable else list(catalog.PROJECTION_NAMES)


def device_notes(device: str, lang: str = "en") -> str:
    return devices.device_note(device, lang)



# ---- check memory by dry run ------------------------------------------------------------------

DRY_RUN_TIMEOUT_S = 900


@dataclass(frozen=True)
class DryRun:
    """What `python -m core.dry_run` measured, or why it could not."""
    peak_mem_mb: float | None = None
    seconds: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def dry_run_argv(config_path: Path, python: str = sys.executable) -> list[str]:
    return [python, "-m", "core.dry_run", "--config", str(config_path)]


def dry_run(values: Mapping[str, Any], console: Console, runner=subprocess.run,
            on_wait=None, lang: str = "en") -> tuple[DryRun, str]:
    """Run two training steps of the form's config in a subprocess; returns the measurement and its
    HTML beside the estimate, in `lang`. `on_wait(seconds)` ticks while it runs."""
    check = check_form(values, console)
    if not check.ok:
        refused = DryRun(error=Said("dry.fix_first"))
        return refused, dry_run_html(refused, None, lang=lang)
    config = check.config
    try:  # on GPU/Ascend the device a launch would get now, not device 0 (which a run may hold)
        device_env = console.jobs.dry_run_env(config.parallel.device)
    except launcher.LaunchError as err:
        refused = DryRun(error=said_of(err))
        return refused, dry_run_html(refused, None, lang=lang)
    with tempfile.TemporaryDirectory(prefix="mindtune-dry-run-config-") as folder:
        path = Path(folder) / "config.yaml"
        path.write_text(config.to_yaml(), encoding="utf-8")
        start_s = time.monotonic()
        try:
            result = run_with_ticks(lambda: runner(dry_run_argv(path), cwd=launcher.REPO_ROOT, capture_output=True,
                                                   text=True, timeout=DRY_RUN_TIMEOUT_S,
                                                   env={**os.environ, "GLOG_v": "3", RECORDS_ENV: "1", **device_env}),
                                     on_wait)
        except subprocess.TimeoutExpired:
            measured = DryRun(error=Said("dry.timeout", s=DRY_RUN_TIMEOUT_S))
        except OSError as err:
            measured = DryRun(error=str(err))
        else:
            measured = _parse_dry_run(result.stdout, result.stderr, result.returncode, time.monotonic() - start_s)
    estimate, _ = memory_estimate(config, console)
    return measured, dry_run_html(measured, estimate, config.parallel.data_parallel, lang)


def _parse_dry_run(stdout: str, stderr: str, code: int, seconds: float) -> DryRun:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
                return DryRun(float(data["peak_mem_mb"]), seconds, data)
            except (ValueError, KeyError, TypeError):
                break
    # the dry run's error by its record (core.spec.errors.report), said by its id where the page shows
    # it; without one (a crash) its last error line as it is
    return DryRun(error=error_on(stderr) or Said("dry.exited", code=code))


def dry_run_html(measured: DryRun, estimate: Any | None, workers: int = 1, lang: str = "en") -> str:
    """'measured 693 MB per worker (2 training steps and one evaluation batch, 31 s) · estimate 702 MB (-1.3%)'."""
    if measured.error:
        why = problem_text(measured.error, lang)  # a Said, a core message, or a line as it is
        return f'<div class="mt-error" id="dry-run-result">{html.escape(text("dry.failed", lang).format(error=why))}</div>'
    mb = f'<b data-mb="{measured.peak_mem_mb:.1f}">{measured.peak_mem_mb:,.0f} MB</b>'
    parts = [text("dry.measured", lang).format(mb=mb, steps=measured.detail.get("steps", 2), s=f"{measured.seconds:.0f}")]
    reference = measured.detail.get("reference")
    if reference in ("frozen_copy", "adapter_off"):  # a preference run's reference, counted in the peak
        parts.append(text(f"dry.reference.{reference}", lang).format(
            objective=measured.detail.get("objective"), mb=f"{measured.detail.get('reference_mb', 0):,.1f}"))
    device = measured.detail.get("device", "cpu")
    if estimate is not None:
        gap = 100 * (estimate.total_mb - measured.peak_mem_mb) / measured.peak_mem_mb
        parts.append(text("dry.estimate", lang).format(mb=f"{estimate.total_mb:,.0f}", gap=f"{gap:+.1f}"))
    if device != "cpu":  # the device's own figure, read by the dry run once its device ran (each rank its own)
        total = measured.detail.get("device_memory_mb")
        if total:
            parts.append(text("dry.device", lang).format(device=device, mb=f"{total:,.0f}")
                         + text("mem.fits" if measured.peak_mem_mb <= total else "mem.no_fit", lang))
        else:
            parts.append(text("dry.device_unknown", lang).format(device=device))
    elif estimate is not None and estimate.device_memory_mb is not None:
        fits = measured.peak_mem_mb * workers <= estimate.device_memory_mb  # CPU workers share the RAM
        parts.append(text("dry.machine", lang).format(mb=f"{estimate.device_memory_mb:,.0f}")
                     + text("mem.fits" if fits else "mem.no_fit", lang))
    return f'<div class="mt-dry-run" id="dry-run-result">{" · ".join(parts)}</div>'


# ---- the Objective section: where a preference (or GRPO, reward) run usually starts ----------------

@dataclass(frozen=True)
class StartingPoint:
    """The newest finished SFT run of the form's model with a best checkpoint: what a run of another
    objective usually starts from (a fork of that checkpoint)."""
    run_id: str
    step: int
    checkpoint: str
    figure: str = ""  # its headline figure ('ppl 3.05'), '' when it has none


def starting_point(console: Console, model_name: str | None, viewer: Viewer = SINGLE_USER,
                   lang: str = "en") -> StartingPoint | None:
    """The newest finished (or early-stopped) run of the SFT kind (core.spec.objectives) that trained
    the model `model_name` and kept a best checkpoint; None when there is none."""
    entry = catalog.find(console.models(), model_name)
    if entry is None:
        return None
    for summary in console.jobs.runs(viewer):  # newest first
        if summary.state not in ("finished", "early_stopped"):
            continue
        spec = run_spec(summary.path)
        if not spec.comparable(spec_of("sft")):
            continue
        best = summary.run.checkpoint("best")
        step = summary.run.checkpoint_step("best")
        try:
            trained = load_config(summary.run.config_path).model.path
        except (ConfigError, OSError):
            continue
        if step is None or not best.is_dir() or catalog.find([entry], trained) is None:
            continue
        value = final_value(summary.status.final, compared_name(spec.headline))
        figure = (f"{figure_label(spec.headline, lang)} {figure_value(spec.headline, value)}"
                  if figure_value(spec.headline, value) != "-" else "")
        return StartingPoint(summary.run_id, step, str(best), figure)
    return None


def starting_point_note(console: Console, values: Mapping[str, Any], reference: Reference | None,
                        viewer: Viewer = SINGLE_USER, lang: str = "en") -> tuple[str, StartingPoint | None]:
    """What the Objective section says of where the run starts, and the SFT run it offers to fork
    ('' and None for an SFT run, or a form that is already a fork)."""
    spec = spec_of(values.get("train.objective"))
    if spec.comparable(spec_of("sft")):
        return "", None
    if reference is not None and reference.is_fork:
        return text("obj.forked", lang).format(objective=spec.name, run=f"`{reference.run_id}`",
                                               step=reference.step), None
    point = starting_point(console, values.get("model.path"), viewer, lang)
    if point is None:
        return text("obj.no_sft_run", lang).format(objective=spec.name), None
    said = text("obj.offer", lang).format(objective=spec.name, run=f"`{point.run_id}`", step=point.step,
                                          figure=f" ({point.figure})" if point.figure else "")
    return said, point


def fork_starting_point(console: Console, values: Mapping[str, Any], run_id: str,
                        viewer: Viewer = SINGLE_USER) -> tuple[dict[str, Any], Reference]:
    """The form as it is, made a fork of run `run_id`'s best checkpoint: the settings its weights need
    (model, method, LoRA rank and targets) taken from that run, the length raised past its step
    when it does not reach beyond it; everything else (objective, data, preference settings) kept."""
    run = console.jobs.run_dir(run_id, viewer)
    step = run.checkpoint_step("best")
    parent, reference = new_from_run(console, run_id, viewer, step=step)
    keep = [form.widget_for_error(key) or key for key in FORK_KEEPS] + [form.TARGET_REGEX, "lora.alpha"]
    changed = {key: parent[key] for key in keep if key in parent}
    length = values.get(form.LENGTH)
    if values.get(form.LENGTH_UNIT) != "epochs" and isinstance(length, (int, float)) and length <= (step or 0):
        changed[form.LENGTH] = (step or 0) + int(length)
    return changed, reference
