"""Train tab layout and wiring: widgets only; every decision is in `train_callbacks` / `data_callbacks`.

The form is on the left, section by section; on the right, what will run (errors, global batch,
memory estimate, YAML, command) and the Start button, visible while the form is edited.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr

from core.spec.config import Config
from core.spec.objectives import spec_of

from app.data import catalog
from app.tabs import data_callbacks, form, form_sync
from app.runs import devices
from app.runs.cluster import where_choices, where_note
from app.tabs import train_callbacks as cb
from app.context import Console
from app.data.datasets import UploadError, picker_key
from app.tabs.changes import show
from app.i18n import TEXTS, Labels, Said, action_text, problem_text, text
from app.tabs.widgets import error_update, field_widget

UPLOAD_TYPES = [".jsonl", ".json", ".csv", ".parquet", ".arrow", ".txt", ".gz", ".zip"]
# the data preview folds itself on page loads after a browser's first look (see _data_section)
PREVIEW_FOLD_JS = Path(__file__).with_name("data_preview_fold.js").read_text(encoding="utf-8")
# what an upload or a picked dataset sets (and so must be able to refresh)
PICKED_KEYS = ("data.train_file", "data.dataset", "data.validation_file", "data.test_file", "data.validation_fraction",
               "data.format", "data.columns")
# the help line of a widget whose text is not its config field's own help (app.i18n "help.<key>")
HELP_KEYS = {"model.path": "help.model.picker", form.LENGTH: "help.train.length",
             form.TARGET_NAMES: "help.lora.targets", form.TARGET_REGEX: "help.lora.target_regex",
             "parallel.data_parallel": "help.parallel.workers", form.WHERE: "help.where"}
# the Slurm job's fields, row by row, in the fold under "Where to run" (the partition is in that choice)
# GRPO's settings, row by row (grpo.rewards, a YAML list, on its own below them)
GRPO_ROWS = (("grpo.num_generations", "grpo.max_prompt_len", "grpo.max_new_tokens"),
             ("grpo.temperature", "grpo.top_p", "grpo.top_k", "grpo.eval_temperature"),
             ("grpo.beta", "grpo.epsilon", "grpo.epsilon_high", "grpo.num_iterations"),
             ("grpo.loss_type", "grpo.scale_rewards", "grpo.importance_sampling_level"),
             ("grpo.mask_truncated_completions", "grpo.reward_timeout_s"))
SLURM_ROWS = (("launch.nodes", "launch.workers_per_node", "launch.time_limit"), ("launch.account",),
              ("launch.sbatch_options",), ("launch.env",))


def help_key(key: str) -> str | None:
    """The app.i18n key of the help line under the form widget `key` (None: it has none)."""
    if key in HELP_KEYS:
        return HELP_KEYS[key]
    return f"help.{key}" if f"help.{key}" in TEXTS else None


@dataclass
class TrainTab:
    """The tab's widgets, by form key, plus the read-outs other tabs and the server wire to."""
    fields: dict[str, Any] = field(default_factory=dict)
    out: dict[str, Any] = field(default_factory=dict)
    lang: Any = None  # the language toggle (an input of the callbacks that write text)

    def values(self, data: dict) -> dict[str, Any]:
        """Form values by key from Gradio's {component: value} input dict."""
        return {key: data[widget] for key, widget in self.fields.items() if widget in data}


def build(console: Console, labels: Labels, initial: Config) -> TrainTab:
    """Lay out the tab (inside an open gr.Tab) and wire its own events."""
    assert labels.toggle is not None, "create the lang-toggle before the tabs"
    tab = TrainTab(lang=labels.toggle)
    values = form.to_values(initial)
    info = form.fields()
    tab.out["reference"] = gr.State(None)  # the run this form was filled from (Reference.to_state())
    with gr.Row(visible=False, elem_id="reference-row") as reference_row:
        tab.out["reference_banner"] = gr.HTML(elem_id="reference-banner")
        tab.out["reference_clear"] = labels.bind(gr.Button(size="sm", scale=0, min_width=180, elem_id="reference-clear"),
                                                 value="ref.clear")
    tab.out["reference_row"] = reference_row
    with gr.Row():
        with gr.Column(scale=3):
            _essentials(tab, console, labels, values, info)
            _data_section(tab, labels, values, info)
            _model_details(tab, console, labels, values, info)
            _precision_section(tab, labels, values, info)
            _objective_section(tab, labels, values, info)
            _training_section(tab, labels, values, info)
            _eval_section(tab, labels, values, info)
            _tracking_section(tab, labels, values, info)
        with gr.Column(scale=2):
            _where_section(tab, console, labels, values, info)
            _launch_section(tab, labels)
            _config_io_section(tab, console, labels)
    _wire(tab, console, labels)
    return tab


# ---- layout ----------------------------------------------------------------------------------

def _widget(tab: TrainTab, key: str, values: dict, info: dict, labels: Labels, **options) -> Any:
    tab.fields[key] = field_widget(key, info.get(key), values.get(key), labels, **options)
    return tab.fields[key]


def _accordion(labels: Labels, key: str, open: bool = False, **options) -> gr.Accordion:
    """A labelled fold of the form (its label follows the language toggle)."""
    return labels.bind(gr.Accordion(labels(key), open=open, **options), label=key)


def _essentials(tab: TrainTab, console: Console, labels: Labels, values: dict, info: dict) -> None:
    """What a run needs and a person changes most, in view without scrolling (issue 20 bug 11):
    model, method, LoRA rank and alpha, dataset, length and learning rate. The rest is folded below."""
    models = console.models()
    with gr.Row():
        tab.fields["model.path"] = labels.bind(gr.Dropdown(
            choices=[(m.label_in(labels.lang), m.name) for m in models], value=values["model.path"], elem_id="model-picker",
            allow_custom_value=True, scale=4, info=labels(HELP_KEYS["model.path"])), label="field.model.path")
        tab.out["rescan"] = labels.bind(gr.Button(size="sm", scale=0, min_width=110, elem_id="model-rescan"),
                                        value="model.refresh")
        _widget(tab, "method", values, info, labels, elem_id="method", scale=2)
    with gr.Row(visible=values["method"] == "lora") as lora_group:
        for key in ("lora.rank", "lora.alpha"):
            _widget(tab, key, values, info, labels)
    tab.out["lora_group"] = lora_group
    with gr.Row():
        tab.out["dataset_picker"] = labels.bind(gr.Dropdown(
            choices=data_callbacks.dataset_choices(console, labels.lang),
            value=picker_key(values["data.train_file"], values.get("data.dataset")),
            allow_custom_value=True, elem_id="dataset-picker", scale=3), label="data.picker")
        tab.out["upload"] = labels.bind(gr.File(
            file_types=UPLOAD_TYPES, type="filepath", elem_id="dataset-upload", scale=2, height=110),
            label="data.upload")
    tab.out["upload_note"] = gr.Markdown(elem_id="dataset-upload-note")
    with gr.Row():
        units = [("unit.steps", "steps"), ("unit.epochs", "epochs")]
        tab.fields[form.LENGTH_UNIT] = labels.bind(gr.Radio(
            choices=[(labels(key), unit) for key, unit in units], value=values[form.LENGTH_UNIT],
            elem_id="train-length-unit"), label=f"field.{form.LENGTH_UNIT}", choices=units)
        tab.fields[form.LENGTH] = labels.bind(gr.Number(value=values[form.LENGTH], elem_id="train-length",
                                                        info=labels(HELP_KEYS[form.LENGTH])),
                                              label=f"field.{form.LENGTH}")
        _widget(tab, "train.learning_rate", values, info, labels)


def _model_details(tab: TrainTab, console: Console, labels: Labels, values: dict, info: dict) -> None:
    """The model folders found, and the LoRA settings besides rank and alpha."""
    with _accordion(labels, "sec.model_table", elem_id="sec-model-table"):
        tab.out["model_table"] = labels.bind(gr.Dataframe(
            value=[m.row(labels.lang) for m in console.models()], interactive=False, wrap=True,
            elem_id="model-table", max_height=240), label="model.table",
            headers=[f"model.col.{h}" for h in catalog.ROW_HEADERS])
    with _accordion(labels, "sec.lora", visible=values["method"] == "lora", elem_id="sec-lora") as lora_more:
        _widget(tab, "lora.dropout", values, info, labels)
        names = cb.target_choices(values["model.path"], console)
        checked = ([n for n in values[form.TARGET_NAMES] if n in names]
                   or cb.target_defaults(values["model.path"], console))
        tab.fields[form.TARGET_NAMES] = labels.bind(gr.CheckboxGroup(
            choices=names, value=checked,
            elem_id="lora-targets", info=labels(HELP_KEYS[form.TARGET_NAMES])), label=f"field.{form.TARGET_NAMES}")
        tab.fields[form.TARGET_REGEX] = labels.bind(gr.Textbox(
            value=values[form.TARGET_REGEX], max_lines=1, elem_id="lora-target-regex",
            info=labels(HELP_KEYS[form.TARGET_REGEX])), label=f"field.{form.TARGET_REGEX}")
    tab.out["lora_more"] = lora_more


def _precision_section(tab: TrainTab, labels: Labels, values: dict, info: dict) -> None:
    with _accordion(labels, "sec.precision", elem_id="sec-precision"):
        _precision_fields(tab, labels, values, info)


def _precision_fields(tab: TrainTab, labels: Labels, values: dict, info: dict) -> None:
    device = values["parallel.device"]
    with gr.Row():
        _widget(tab, "parallel.device", values, info, labels)
        tab.fields["parallel.device"].choices = devices.device_choices(labels.lang)
        _widget(tab, "precision.amp_level", values, info, labels)
        _widget(tab, "precision.compute_dtype", values, info, labels)
        tab.fields["precision.compute_dtype"].choices = devices.dtype_choices(device, labels.lang)
    with gr.Row():
        _widget(tab, "model.dtype", values, info, labels)
        _widget(tab, "precision.loss_scale", values, info, labels)
        _widget(tab, "precision.initial_loss_scale", values, info, labels)
    tab.out["device_note"] = gr.Markdown(cb.device_notes(device, labels.lang), elem_id="device-note")
    with gr.Row():
        _widget(tab, "recompute.policy", values, info, labels)
        _widget(tab, "recompute.layer_fraction", values, info, labels)
    with gr.Row():
        tab.fields["parallel.data_parallel"] = labels.bind(gr.Slider(
            minimum=1, maximum=max(devices.max_workers(device), values["parallel.data_parallel"]), step=1,
            value=values["parallel.data_parallel"], elem_id="data-parallel",
            info=labels(HELP_KEYS["parallel.data_parallel"])), label="field.parallel.data_parallel")
        _widget(tab, "parallel.optimizer_shard", values, info, labels)
    tab.out["global_batch_inline"] = gr.Markdown(elem_id="global-batch-inline")


def _objective_section(tab: TrainTab, labels: Labels, values: dict, info: dict) -> None:
    """train.objective and the preference: settings (core.engine.preference), open when not SFT."""
    with _accordion(labels, "sec.objective", open=spec_of(values["train.objective"]).kind != "sft",
                    elem_id="sec-objective"):
        rows = (("train.objective", "preference.reference", "preference.beta"),
                ("preference.loss_type", "preference.label_smoothing", "preference.simpo_gamma"),
                ("preference.orpo_lambda", "preference.kto_desirable_weight", "preference.kto_undesirable_weight"))
        for row in rows:
            with gr.Row():
                for key in row:
                    _widget(tab, key, values, info, labels)
        # GRPO's settings (core.spec.config GrpoSettings), shown while the objective is grpo
        with gr.Column(visible="grpo." in spec_of(values["train.objective"]).settings,
                       elem_id="grpo-settings") as grpo_box:
            for row in GRPO_ROWS:
                with gr.Row():
                    for key in row:
                        _widget(tab, key, values, info, labels)
            _widget(tab, "grpo.rewards", values, info, labels)
            tab.fields["grpo.rewards"].placeholder = "- {function: exact_match, column: answer}"
        tab.out["grpo_box"] = grpo_box
        # where a run of this objective usually starts: the newest finished SFT run of the model, offered
        with gr.Row(equal_height=True):
            tab.out["start_point"] = gr.Markdown(elem_id="objective-start-point", visible=True)
            tab.out["start_point_fork"] = labels.bind(gr.Button(size="sm", scale=0, min_width=280, visible=False,
                                                                elem_id="objective-fork"), value="obj.fork")
        tab.out["start_point_run"] = gr.State(None)


def _training_section(tab: TrainTab, labels: Labels, values: dict, info: dict) -> None:
    """Batch, schedule, logging and checkpoints (length and learning rate are in the essentials)."""
    rows = (("train.micro_batch_size", "train.grad_accum_steps", "train.schedule"),
            ("train.warmup_steps", "train.min_lr_ratio", "train.weight_decay"),
            ("train.max_grad_norm", "train.log_every", "train.eval_every"),
            ("train.save_every", "train.keep_last_n", "run.seed"), ("run.name", "train.profile_steps"))
    with _accordion(labels, "sec.training", elem_id="sec-training"):
        for row in rows:
            with gr.Row():
                for key in row:
                    _widget(tab, key, values, info, labels)
        tab.fields["train.profile_steps"].placeholder = "3,5"


def _data_section(tab: TrainTab, labels: Labels, values: dict, info: dict) -> None:
    """The dataset's preview, then its files, split, length and statistics (folded). The picker and
    the upload are in the essentials. The preview is open at a browser's first look; later page
    loads show it folded (app/tabs/data_preview_fold.js), and a pick or an upload opens it again: it
    answers them."""
    with gr.Accordion(labels("data.preview"), open=True, elem_id="data-preview-box") as preview_box:
        with gr.Row():
            with gr.Column(scale=1, min_width=260):  # what decides the rendering, next to it
                for key in ("data.format", "data.columns", "data.train_on", "data.mask_prompt"):
                    _widget(tab, key, values, info, labels)
                tab.fields["data.columns"].placeholder = "instruction: question, output: answer"
            with gr.Column(scale=3):
                tab.out["data_preview"] = gr.HTML(elem_id="data-preview", js_on_load=PREVIEW_FOLD_JS)
    labels.bind(preview_box, label="data.preview")
    tab.out["preview_box"] = preview_box
    with _accordion(labels, "sec.data", elem_id="sec-data"):
        with gr.Row():
            for key in ("data.train_file", "data.dataset", "data.validation_file", "data.test_file"):
                _widget(tab, key, values, info, labels)
        with gr.Row():
            for key in ("data.validation_fraction", "data.max_seq_len", "data.packing", "data.group_by_length"):
                _widget(tab, key, values, info, labels)
        with gr.Row():
            for key in ("data.overlong", "data.text_split", "data.media"):
                _widget(tab, key, values, info, labels)
        with gr.Row():
            with gr.Column():
                labels.bind(gr.Markdown(), value="data.histogram")
                tab.out["data_histogram"] = gr.HTML(elem_id="data-histogram")
            with gr.Column():
                labels.bind(gr.Markdown(), value="data.stats")
                tab.out["data_stats"] = gr.Markdown(elem_id="data-stats")


def _eval_section(tab: TrainTab, labels: Labels, values: dict, info: dict) -> None:
    with _accordion(labels, "sec.eval", elem_id="sec-eval"):
        with gr.Row():
            for key in ("eval.downstream", "eval.max_new_tokens", "eval.max_eval_samples", "eval.ema_alpha"):
                _widget(tab, key, values, info, labels)
        with gr.Row():
            for key in ("eval.baseline", "eval.baseline_max_tokens", "eval.downstream_every_eval"):
                _widget(tab, key, values, info, labels)
        with gr.Row():
            for key in ("early_stopping.enabled", "early_stopping.monitor", "early_stopping.patience",
                        "early_stopping.min_delta"):
                _widget(tab, key, values, info, labels)


def _tracking_section(tab: TrainTab, labels: Labels, values: dict, info: dict) -> None:
    """Experiment trackers the worker mirrors the metrics to (core.run.tracking), off by default."""
    with _accordion(labels, "sec.tracking", elem_id="sec-tracking"):
        with gr.Row():
            _widget(tab, "tracking", values, info, labels)
        with gr.Row():
            for key in ("mlflow.tracking_uri", "mlflow.experiment", "swanlab.mode", "swanlab.project"):
                _widget(tab, key, values, info, labels)


def _where_section(tab: TrainTab, console: Console, labels: Labels, values: dict, info: dict) -> None:
    """"Where to run": this machine or a Slurm partition (offered only when Slurm answers and the
    runs folder is under --cluster-shared-dir; else the note says why), and the Slurm job's
    settings, folded, shown while a partition is chosen."""
    offer = console.cluster_offer()
    where = values[form.WHERE]
    tab.fields[form.WHERE] = labels.bind(gr.Radio(
        choices=where_choices(offer, labels.lang, where), value=where, elem_id="where-to-run",
        info=labels(HELP_KEYS[form.WHERE])), label="where")
    tab.out["where_note"] = gr.Markdown(where_note(offer, labels.lang) if offer.refusal else "", elem_id="where-note")
    with _accordion(labels, "sec.slurm", visible=where != form.LOCAL, elem_id="sec-slurm") as box:
        for row in SLURM_ROWS:
            with gr.Row():
                for key in row:
                    _widget(tab, key, values, info, labels)
        tab.fields["launch.sbatch_options"].placeholder = "--mem=4G --qos=normal"
        tab.fields["launch.env"].placeholder = "HF_HOME: /shared/hf, OMP_NUM_THREADS: 4"
    tab.out["slurm_box"] = box


def _launch_section(tab: TrainTab, labels: Labels) -> None:
    labels.bind(gr.Markdown(), value="sec.launch")
    tab.out["errors"] = gr.HTML(elem_id="config-errors")
    tab.out["global_batch"] = gr.Markdown(elem_id="global-batch")
    tab.out["start"] = labels.bind(gr.Button(variant="primary", size="lg", elem_id="start-button"), value="start")
    tab.out["start_anyway"] = labels.bind(gr.Button(variant="stop", visible=False, elem_id="start-anyway"),
                                          value="start.anyway")
    tab.out["start_message"] = gr.Markdown(elem_id="start-message")
    tab.out["changes"] = gr.HTML(elem_id="reference-changes")
    labels.bind(gr.Markdown(), value="launch.memory")
    tab.out["memory"] = gr.HTML(elem_id="memory-estimate")
    with gr.Row(equal_height=True):
        tab.out["dry_run"] = labels.bind(gr.Button(size="sm", scale=0, min_width=220, elem_id="dry-run-button"),
                                         value="dry_run.button")
        tab.out["dry_run_result"] = gr.HTML(elem_id="dry-run")
    tab.out["command"] = labels.bind(gr.Code(language="shell", lines=2, interactive=False,
                                             elem_id="command-preview"), label="launch.command")
    tab.out["yaml"] = labels.bind(gr.Code(language="yaml", lines=12, max_lines=30, interactive=False,
                                          elem_id="config-yaml"), label="launch.yaml")
    with gr.Accordion(labels("launch.multihost"), open=False) as box:
        with gr.Row():
            tab.out["nodes"] = labels.bind(gr.Number(value=1, precision=0, minimum=1, elem_id="mh-nodes"),
                                           label="launch.nodes")
            tab.out["master_addr"] = labels.bind(gr.Textbox(value="", placeholder="10.0.0.1", max_lines=1,
                                                            elem_id="mh-master-addr"), label="launch.master_addr")
            tab.out["master_port"] = labels.bind(gr.Number(value=29500, precision=0, elem_id="mh-master-port"),
                                                 label="launch.master_port")
        tab.out["multihost"] = gr.Code(language="shell", lines=3, interactive=False, elem_id="multihost-commands")
    labels.bind(box, label="launch.multihost")


def _config_io_section(tab: TrainTab, console: Console, labels: Labels) -> None:
    with gr.Accordion(labels("sec.config_io"), open=False) as box:
        with gr.Row():
            tab.out["shipped"] = labels.bind(gr.Dropdown(choices=cb.shipped_configs(console), value=None,
                                                         elem_id="shipped-config"), label="config.load_shipped")
            tab.out["config_upload"] = labels.bind(gr.File(file_types=[".yaml", ".yml"], type="filepath",
                                                           elem_id="config-upload", height=110),
                                                   label="config.upload")
        tab.out["save"] = labels.bind(gr.Button(elem_id="config-save"), value="config.save")
        tab.out["saved_file"] = labels.bind(gr.File(interactive=False, elem_id="config-saved-file", visible=False),
                                            label="config.saved_file")
        tab.out["config_message"] = gr.Markdown(elem_id="config-message")
    labels.bind(box, label="sec.config_io")


# ---- wiring ----------------------------------------------------------------------------------

def _wire(tab: TrainTab, console: Console, labels: Labels) -> None:
    fields = tab.fields
    widgets = set(fields.values())
    previous_errors = gr.State({})
    help_keys = {k: help_key(k) for k in fields}
    fast_outputs = [tab.out[k] for k in ("yaml", "command", "global_batch", "global_batch_inline", "multihost",
                                          "data_preview")]
    slow_outputs = [tab.out[k] for k in ("memory", "errors", "data_histogram", "data_stats")]
    mh_inputs = [tab.out["nodes"], tab.out["master_addr"], tab.out["master_port"]]
    lang = labels.toggle

    reference_state, start_message = tab.out["reference"], tab.out["start_message"]
    # the newest event's answer only: one upload fires a refresh per field it sets (form_sync)
    stamp, latest = form_sync.stamp_box(), form_sync.Latest()

    def refresh(data: dict) -> list:
        """What answers at once: the YAML, the command, field errors (and, for a run made from
        another one, the settings that differ, highlighted), and the sample preview."""
        if not latest.admit("refresh", data[stamp]):
            return [gr.skip()] * len(fast)
        values = tab.values(data)
        language = data[lang]
        reference = cb.Reference.from_state(data[reference_state])
        result = cb.preview(values, console, data=False)
        batch = cb.global_batch_text(values, language)
        multihost = (cb.multi_host_text(result.check.config, data[mh_inputs[0]], data[mh_inputs[1]], data[mh_inputs[2]])
                     if result.check.config else "# fix the config first")
        errors = dict(result.check.errors)
        if result.check.config is not None:
            errors.update(cb.fork_errors(result.check.config, reference))
        found = cb.form_changes(result.check.config, reference)
        shown_yaml = cb.launch_config(result.check.config, reference).to_yaml() if result.check.config else result.yaml_text
        was = {k: f"{text('ref.was', language)} {show(v)}" for k, v in cb.changed_widgets(found).items()}
        shown = {k: [errors.get(k), was.get(k)] for k in fields if errors.get(k) or was.get(k)}
        old = data[previous_errors] or {}
        switched = old.get("lang", language) != language  # every help line into the new language
        updates = [error_update(problem_text(errors.get(k), language), help_keys[k] and text(help_keys[k], language), was.get(k))
                   if switched or shown.get(k) != old.get(k) else gr.skip() for k in fields]
        shown["lang"] = language
        if not latest.current("refresh", data[stamp]):  # a newer one started meanwhile: it answers
            return [gr.skip()] * len(fast)
        return [shown_yaml, result.command, batch, batch, multihost,
                data_callbacks.preview_view(values, console, language), shown, *updates,
                cb.changes_html(found, reference, language)]

    def details(data: dict) -> list:
        """What reads every data file (once; then kept in memory): the data problems that block
        Start, the memory estimate at the run's sequence length, the histogram and statistics; a
        "not started" warning goes once the form it was about is fixed."""
        if not latest.admit("details", data[stamp]):
            return [gr.skip()] * len(slow)
        values = tab.values(data)
        reference = cb.Reference.from_state(data[reference_state])
        result = cb.preview(values, console, lang=data[lang])
        errors = dict(result.check.errors)
        if result.check.config is not None:
            errors.update(cb.fork_errors(result.check.config, reference))
        message = data[start_message] or ""
        stale = "" if message.startswith("⚠") and not errors else gr.skip()
        if not latest.current("details", data[stamp]):
            return [gr.skip()] * len(slow)
        return [result.memory, cb.errors_html(errors, data[lang]), *data_callbacks.stats_view(values, console, data[lang]), stale]

    # One change-triggered event, then the slow part chained to it. Two "always_last" change events
    # where one outputs a field the other reads re-trigger each other forever in Gradio 6.31 (a
    # 30-line repro looped 20 times in 8 s), which kept the data preview dimmed for minutes.
    inputs = widgets | set(mh_inputs) | {previous_errors, lang, reference_state, start_message, stamp}
    triggers = [w.change for w in widgets] + [w.change for w in mh_inputs] + [lang.change, reference_state.change]
    quiet = {"show_progress": "hidden", "api_visibility": "private"}
    fast = [*fast_outputs, previous_errors, *fields.values(), tab.out["changes"]]
    slow = [*slow_outputs, start_message]
    # one at a time: answers leave in the order they are computed, so the newest is shown last
    gr.on(triggers, refresh, inputs=inputs, outputs=fast, trigger_mode="always_last", js=form_sync.STAMP_JS,
          concurrency_limit=1, concurrency_id="form-refresh", **quiet).then(
        details, inputs=inputs, outputs=slow, trigger_mode="always_last", js=form_sync.STAMP_JS,
        concurrency_limit=1, concurrency_id="form-details", **quiet)
    tab.out["refresh"] = (refresh, inputs, fast)
    tab.out["details"] = (details, inputs, slow)

    def clear_reference():
        """"Start fresh instead": the form the console opens with (not the run's values), and no
        message of a previous launch."""
        fresh = form.to_values(cb.starter_config(console))
        return None, gr.update(visible=False), "", "", *[fresh.get(k, gr.skip()) for k in fields]

    tab.out["reference_clear"].click(clear_reference, None, [reference_state, tab.out["reference_row"],
                                                             tab.out["reference_banner"], start_message,
                                                             *fields.values()], **quiet)

    def check_memory(data: dict, progress=gr.Progress()):
        """Two training steps of the form's run in a subprocess: the measured peak beside the estimate."""
        language = data[lang]
        _, shown = cb.dry_run(tab.values(data), console,
                              on_wait=lambda s: progress(None, desc=f"{text('dry_run.running', language)}: {s:.0f} s"),
                              lang=language)
        return shown

    tab.out["dry_run"].click(check_memory, widgets | {lang}, tab.out["dry_run_result"], concurrency_limit=1,
                             api_visibility="private")

    _wire_model(tab, console, lang)
    _wire_where(tab, console, lang)
    _wire_start_point(tab, console, lang)
    _wire_device_and_method(tab, lang)
    _wire_data(tab, console)
    _wire_config_io(tab, console)


def _wire_model(tab: TrainTab, console: Console, lang: Any) -> None:
    picker, targets = tab.fields["model.path"], tab.fields[form.TARGET_NAMES]

    def on_model(name: str, checked: list[str]):
        names = cb.target_choices(name, console)
        kept = [n for n in checked or [] if n in names]
        # a choice the new model lacks (Llama's gate_proj on GLM-4): its family's defaults instead
        return gr.update(choices=names, value=kept if kept and len(kept) == len(checked) else
                         cb.target_defaults(name, console))

    picker.change(on_model, [picker, targets], targets, show_progress="hidden", api_visibility="private")

    def table(language: str, refresh: bool = False) -> dict:
        return {"headers": [text(f"model.col.{h}", language) for h in catalog.ROW_HEADERS],
                "data": [m.row(language) for m in console.models(refresh=refresh)]}

    def rescan(current: str, language: str, refresh: bool = True):
        found = table(language, refresh=refresh)
        return gr.update(choices=[(m.label_in(language), m.name) for m in console.models()], value=current), found

    tab.out["rescan"].click(rescan, [picker, lang], [picker, tab.out["model_table"]], api_visibility="private")
    lang.change(lambda current, language: rescan(current, language, refresh=False), [picker, lang],
                [picker, tab.out["model_table"]], show_progress="hidden", api_visibility="private")


def _wire_where(tab: TrainTab, console: Console, lang: Any) -> None:
    """The Slurm fold shows while a partition is chosen; the choices (Slurm's partitions, asked
    again at most every 30 s) and the note follow the language."""
    where = tab.fields[form.WHERE]
    quiet = {"show_progress": "hidden", "api_visibility": "private"}
    where.change(lambda value: gr.update(visible=(value or form.LOCAL) != form.LOCAL), where, tab.out["slurm_box"],
                 **quiet)
    slider = tab.fields["parallel.data_parallel"]
    width_inputs = [where, tab.fields["launch.nodes"], tab.fields["launch.workers_per_node"], slider,
                    tab.fields["parallel.device"]]
    for source in width_inputs[:3]:  # a cluster job's width is nodes x workers per node, as the YAML says
        source.change(lambda *args: gr.update(**cb.workers_field(*args)), width_inputs, slider, **quiet)

    def offered(value: str, language: str):
        offer = console.cluster_offer()
        return (gr.update(choices=where_choices(offer, language, value)),
                where_note(offer, language) if offer.refusal else "")

    lang.change(offered, [where, lang], [where, tab.out["where_note"]], **quiet)
    tab.out["where_choices"] = (offered, [where, lang], [where, tab.out["where_note"]])


def _wire_device_and_method(tab: TrainTab, lang: Any) -> None:
    device = tab.fields["parallel.device"]
    dtype, slider = tab.fields["precision.compute_dtype"], tab.fields["parallel.data_parallel"]

    def on_device(name: str, workers: float, language: str, where: str, nodes: float, per_node: float):
        return (gr.update(choices=devices.dtype_choices(name, language)),
                gr.update(**cb.workers_field(where, nodes, per_node, workers, name)),
                cb.device_notes(name, language))

    device.change(on_device, [device, slider, lang, tab.fields[form.WHERE], tab.fields["launch.nodes"],
                              tab.fields["launch.workers_per_node"]], [dtype, slider, tab.out["device_note"]],
                  show_progress="hidden", api_visibility="private")

    def in_language(name: str, language: str):
        return (gr.update(choices=devices.device_choices(language)),
                gr.update(choices=devices.dtype_choices(name, language)), cb.device_notes(name, language))

    lang.change(in_language, [device, lang], [device, dtype, tab.out["device_note"]], show_progress="hidden",
                api_visibility="private")
    objective, monitor = tab.fields["train.objective"], tab.fields["early_stopping.monitor"]

    def on_objective(name: str, watched: str):
        """GRPO's settings show for grpo; a monitor the objective does not log becomes its default."""
        return gr.update(visible="grpo." in spec_of(name).settings), cb.monitor_for(name, watched)

    objective.change(on_objective, [objective, monitor], [tab.out["grpo_box"], monitor], show_progress="hidden",
                     api_visibility="private")
    tab.out["on_objective"] = on_objective
    method = tab.fields["method"]
    method.change(lambda m: (gr.update(visible=m == "lora"),) * 2, method,
                  [tab.out["lora_group"], tab.out["lora_more"]], show_progress="hidden", api_visibility="private")


def _names(text: str | list[str] | None) -> list[str]:
    """data.dataset as the form holds it ('a, b') as a list of names."""
    if isinstance(text, list):
        return text
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def _wire_data(tab: TrainTab, console: Console) -> None:
    """Picking and uploading a dataset; its preview and statistics follow the form's own refresh
    (`_wire`). An upload answers with the preview itself, without dimming anything."""
    preview = tab.out["data_preview"]
    picked = [tab.fields[k] for k in PICKED_KEYS]
    quiet = {"show_progress": "hidden", "api_visibility": "private"}
    picker = tab.out["dataset_picker"]
    tab.out["dataset_choices"] = (lambda current, language: gr.update(
        choices=data_callbacks.dataset_choices(console, language), value=current), [picker, tab.lang], picker)
    tab.lang.change(*tab.out["dataset_choices"], **quiet)

    def pick(train_file: str, current: str, current_dataset: str):
        """Another dataset: its files, format auto and no column mapping. The one the form already
        trains on: nothing changes (the dropdown also sends an input when it merely loses focus,
        which wiped a column mapping typed after an upload)."""
        if train_file == picker_key(current, _names(current_dataset)):
            return [gr.skip()] * (len(PICKED_KEYS) + 1)
        chosen = cb.dataset_fields(train_file, console)
        # and the preview opens (folded on a later page load): it answers the pick
        return [*[chosen.get(k, gr.skip()) for k in PICKED_KEYS], gr.update(open=True)]

    picker.input(pick, [picker, tab.fields["data.train_file"], tab.fields["data.dataset"]],
                 [*picked, tab.out["preview_box"]], trigger_mode="always_last", **quiet)

    def upload(data: dict):
        """Keep the file, pick it, show its preview; the upload box empties for the next one."""
        path = data[tab.out["upload"]]
        if not path:
            return gr.skip(), "", *[gr.skip()] * len(PICKED_KEYS), gr.skip(), gr.skip(), gr.skip()
        try:
            result = data_callbacks.upload(path, path, console)
        except UploadError as err:
            return (gr.skip(), f"⚠ {action_text(err.said, data[tab.lang])}", *[gr.skip()] * len(PICKED_KEYS),
                    gr.skip(), None, gr.skip())
        chosen = cb.dataset_fields(result.dataset.key, console)
        values = {**tab.values(data), **chosen}
        language = data[tab.lang]
        return (gr.update(choices=data_callbacks.dataset_choices(console, data[tab.lang]), value=result.dataset.key),
                result.note_in(language), *[chosen.get(k, gr.skip()) for k in PICKED_KEYS],
                data_callbacks.preview_view(values, console, language), None, gr.update(open=True))

    tab.out["upload"].upload(upload, set(tab.fields.values()) | {tab.out["upload"], tab.lang},
                             [picker, tab.out["upload_note"], *picked, preview, tab.out["upload"],
                              tab.out["preview_box"]], **quiet)


def _wire_config_io(tab: TrainTab, console: Console) -> None:
    keys = list(tab.fields)
    outputs = [tab.fields[k] for k in keys] + [tab.out["config_message"]]

    def apply(loader, source: str | None, language: str):
        if not source:
            return [gr.skip()] * len(outputs)
        values, message = cb.load_config_values(loader, source, console, language)
        return [values.get(k, gr.skip()) for k in keys] + [message]

    tab.out["shipped"].input(lambda name, language: apply(cb.load_shipped, name, language),
                             [tab.out["shipped"], tab.lang], outputs, trigger_mode="always_last",
                             api_visibility="private")
    # the upload box empties for the next file (a file shown in it hides the drop zone)
    tab.out["config_upload"].upload(lambda path, language: [*apply(cb.load_yaml, path, language), None],
                                    [tab.out["config_upload"], tab.lang], [*outputs, tab.out["config_upload"]],
                                    api_visibility="private")

    def save(data: dict):
        path, message = cb.save_config(tab.values(data), console, data[tab.lang])
        return (gr.update(value=str(path), visible=True) if path else gr.update(visible=False)), message

    tab.out["save"].click(save, set(tab.fields.values()) | {tab.lang},
                          [tab.out["saved_file"], tab.out["config_message"]], api_visibility="private")


def _wire_start_point(tab: TrainTab, console: Console, lang) -> None:
    """The Objective section's note on where the run starts, and its offer: fork the newest finished SFT
    run of the model (its best checkpoint), keeping the rest of the form."""
    fields, reference_state = tab.fields, tab.out["reference"]
    note, button, offered = tab.out["start_point"], tab.out["start_point_fork"], tab.out["start_point_run"]
    watched = [fields["model.path"], fields["train.objective"], reference_state, lang]

    def said(model: str | None, objective: str, reference: dict | None, language: str, request: gr.Request):
        shown, point = cb.starting_point_note(console, {"model.path": model, "train.objective": objective},
                                              cb.Reference.from_state(reference), console.viewer(request), language)
        return shown, gr.update(visible=point is not None), point.run_id if point else None

    quiet = {"show_progress": "hidden", "api_visibility": "private"}
    for trigger in (fields["model.path"].change, fields["train.objective"].change, reference_state.change, lang.change):
        trigger(said, watched, [note, button, offered], **quiet)
    tab.out["start_point_said"] = (said, watched, [note, button, offered])
    keys = list(fields)

    def fork(data: dict, request: gr.Request):
        language, run_id = data[lang], data[offered]
        if not run_id:
            return [gr.skip()] * (len(keys) + 4)
        try:
            changed, reference = cb.fork_starting_point(console, tab.values(data), run_id, console.viewer(request))
        except (ValueError, OSError) as err:
            return [gr.skip()] * (len(keys) + 3) + [action_text(Said("check.warn", problem=err), language)]
        return [reference.to_state(), gr.update(visible=True), cb.reference_html(reference, language),
                *[changed.get(k, gr.skip()) for k in keys], ""]

    button.click(fork, {offered} | set(fields.values()) | {lang},
                 [reference_state, tab.out["reference_row"], tab.out["reference_banner"], *fields.values(),
                  tab.out["start_message"]], **quiet)
