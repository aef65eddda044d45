"""Core's messages by id (issue 29 item 2): each has its English template here; the CLI and the logs
print that English, and the console renders the same id in the page's language from its own table
(app.i18n.MESSAGES_ZH), never by re-reading the English.

A message is a `Message`: a str (its English) that also carries `key` and `params`, so every caller
that prints, logs, joins or compares it keeps working. A parameter may itself be a Message (it is
rendered in the same language). `RunDir.write_status(reason=Message(...))` records the id and the
parameters beside the English (`Status.reason_id`, `reason_params`).

A message crosses a process as its record (`Message.to_json`: {"id", "params"}): status.json's
`reason_message`, and the line an entry point prints on stderr for the console (core.spec.errors
`report`, `read_report`). Nothing reads the English back: a run folder written before the ids holds
only the English, which the console shows as it is. Stdlib only.

The catalogue holds why a run ended (run.*, rank.*, slurm.*), the memory estimate's notes (memory.*,
path.*), a config's rules and files (config.*, field.*), core.run's checks before a launch
(run.check.*), the data's errors (data.*), the model folder's (model.*, moe.*, tokenizer.*), Slurm's
refusals (slurm.*), the trackers' (tracking.*), the msrun commands' (launch.*), a family key map's
(family.*), a device's rules (device.*), and
where a problem is (problem.*, data.at*, model.at*). A library's own
words inside a message (PyYAML's, Python's json and re, jinja2's, the OS's) are parameters of their
own (`yaml_says`, `json_says`, ...), which the console says through that library's table.
"""
from __future__ import annotations

import string
from typing import Any

__all__ = ["CATALOGUE", "MESSAGE_PARAMS", "LIST_PARAMS", "LINE_PARAMS", "Message", "ids_of", "placeholders"]

CATALOGUE: dict[str, str] = {
    # why a run ended: the worker's own account (core.train)
    "run.reached_steps": "reached {steps} steps",
    "run.no_improvement": "{monitor} did not improve by {min_delta} for {patience} evaluations (best {best} at step {step})",
    "run.stopped_by_user": "stopped by the user",
    "run.stopped_forced": "stopped by the user (forced)",
    # ... the console's or a rank supervisor's, when the worker could not say it (core.run.launcher, ranks)
    "run.cancelled": "cancelled before it started",
    "run.stop_timed_out": "stopped by the user: the graceful stop timed out after {seconds} s and the worker was terminated",
    "run.stopped_before_status": "stopped by the user (the worker ended before writing its status)",
    "run.with_note": "{reason}; {note}",
    "run.resumable": "newest resumable checkpoint: {checkpoint}",
    "run.no_resumable": "no checkpoint to resume from",
    # ... or why it failed, when the worker could not say it (core.run.ranks, launcher)
    "run.crash": "worker exited without a final status (crashed or killed); see train.log",
    "run.crash_lines": "{reason}; last error lines:\n{lines}",
    "rank.rank": "rank {rank}",
    "rank.worker": "the worker",
    "rank.on_node": "{who} on node {node}",
    "rank.oom_killed": "out of memory: {who} was killed by {signal}, by the kernel's out-of-memory killer ({evidence}). {advice}",
    "rank.killed": "{who} was killed by {signal}",
    "rank.killed_no_oom": "{who} was killed by {signal} (no sign of the out-of-memory killer)",
    "rank.exited": "{who} exited with code {code} without a final status",
    "rank.gone": "{who} is gone and left no exit status (its supervisor was killed too)",
    "rank.hung": ("{who} stopped making progress: no step for {age} s (parallel.hang_timeout_s = {timeout}); its last "
                  "step was {step} ({phase}), process state: {state}. The run was ended so it does not wait forever"),
    "rank.stopped_by_slurm": "{who} was stopped by {signal} from Slurm (job {job_id})",
    # ... Slurm's, for a job it ended (core.run.slurm)
    "slurm.cancelled_pending": "{reason}: {job} was cancelled while pending (scancel)",
    "slurm.cancelled_outside": "{job} was cancelled outside the console (scancel); the run did not crash",
    "slurm.preempted": "{job} was preempted by Slurm (a higher-priority job took its nodes)",
    "slurm.timeout": "{job} reached its time limit and Slurm ended it (launch.time_limit)",
    "slurm.node_fail": "{job}: a node failed (NODE_FAIL) and Slurm ended the job",
    "slurm.out_of_memory": "out of memory: Slurm ended {job} (OUT_OF_MEMORY). {advice}",
    "slurm.ended": "{job} ended ({state}, exit code {code}) without the run's final status; see slurm.out and logs/",
    "slurm.job": "Slurm job {id}",
    "slurm.job_on": "Slurm job {id} on {nodes}",
    # which attention a device runs (core.spec.device_paths), said in the memory estimate's notes
    "path.cpu_kernel": "the CPU's fused kernel where it compiles (core.engine.fused)",
    "path.gpu_composed": "GPU: MindSpore 2.10 has no fused attention for GPU (FlashAttentionScore is Ascend-only)",
    "path.ascend_dtype": ("Ascend: FlashAttentionScore takes float16/bfloat16 and attention computes in {dtype} (use "
                          "precision.amp_level O2 for the fused kernel)"),
    "path.ascend_unsupported": "Ascend: FlashAttentionScore is not given {needs} here",
    "path.ascend_packed": "Ascend: packed batches need per-sample segments, which the causal mode does not take",
    "path.ascend_flash": "Ascend: ops.flash_attention_score, causal (sparse_mode 2), no mask tensor",
    # the memory estimate's notes (core.spec.memory)
    "memory.cpu_rss": "CPU: the peak is the worker's resident set size; the compiled train and eval graphs share one "
                      "memory pool",
    "memory.cpu_fused": "CPU: attention, norms, MLP gates and loss run as fused kernels (no score tensors kept)",
    "memory.cpu_composed": ("CPU: attention, norms, MLP gates and loss run as composed MindSpore ops (the fused kernels "
                            "need float32, no AMP and a C++ compiler), which keep score tensors"),
    "memory.cpu_recompute": ("CPU: recompute moves the peak of a compiled step a little (measured: full -8%, MLP -4%; "
                             "attention +11%, as its layers cannot share one compiled graph); it saves more on "
                             "GPU/Ascend"),
    "memory.textbook": "{device}: activations are textbook figures, not measured on such a device",
    "memory.flash": "{device} attention: FlashAttentionScore, causal mode: no score or mask tensors",
    "memory.composed_attention": ("{device} attention composed ({why}): each layer keeps its (B, H, T, T) softmax for "
                                  "the backward ({scores_mb} MB in all) and one (B, 1, T, T) float32 mask per window "
                                  "({mask_mb} MB), not broadcast to the heads"),
    "memory.head_loss": "{device} loss: LM head and cross-entropy in chunks of {tokens} tokens, no logits",
    "memory.chunked_loss": ("{device} loss: cross-entropy in chunks of {tokens} tokens on the logits (no full softmax "
                            "or one-hot)"),
    "memory.pairs": ("{objective}: train.micro_batch_size counts pairs, each micro batch runs the chosen and the "
                     "rejected answers (2 × the rows, activations counted twice)"),
    "memory.frozen_reference": ("{objective}: the frozen reference copy holds the starting weights a second time "
                                "({dtype}), counted with the weights"),
    "memory.adapter_off": ("{objective}: the reference is the base with the adapter switched off: no second copy of "
                           "the weights, one more forward pass per step"),
    "memory.parallel": "each of the {workers} workers holds all of this (the optimizer state is not sharded)",
    "memory.amp": ("AMP {level}: parameters are cast to {dtype} at every call (no persistent copy); the cast copies "
                   "are counted with the weights"),
    "memory.accumulation": "gradient accumulation holds a second float32 gradient buffer (the running sum)",
    "memory.shared_ram": "CPU: the {workers} workers share this machine's RAM ({workers} × {mb} MB)",
    "memory.unknown_device": "device memory unknown: the total is not checked against a limit",
    "memory.too_big": ("needs {needed} MB, the device has {has} MB: lower train.micro_batch_size or data.max_seq_len, "
                       "or use LoRA"),
    # a config's rules across fields (core.spec.config); the key, value and file are said around them
    "config.resume_and_fork": ("set run.resume (continue this run) or run.fork_from (start a new run from a "
                               "checkpoint), not both"),
    "config.steps_or_epochs": "set exactly one of train.max_steps and train.epochs (epochs = {epochs})",
    "config.below_max_steps": "must be < train.max_steps ({steps})",
    "config.packing_and_grouping": ("packing already removes the padding; set data.packing or data.group_by_length, "
                                    "not both"),
    "config.score_needs_test": ("scores the generated test answers: needs eval.downstream true and a data.test_file "
                                "(or watch val_loss)"),
    "config.no_validation": "no validation data: set data.validation_file or data.validation_fraction in (0, 0.5]",
    "config.cpu_bf16_compute": ("bf16 compute is not supported by MindSpore's CPU kernels (amp_level {level}); use "
                                "float16 or amp_level O0 (fp32), or run on parallel.device gpu/ascend"),
    "config.cpu_bf16_full": ("full fine-tuning on the CPU trains every weight, and MindSpore's CPU kernels have no bf16 "
                             "compute, so the master weights must be float32: use model.dtype float32 (a bf16 "
                             "checkpoint loads exactly), or method lora (the frozen base weights then stay bf16)"),
    "config.bf16_full": ("full fine-tuning would keep the trained weights in bf16 (MindSpore's nn.Adam writes each "
                         "update back into a bf16 parameter, losing the small ones); keep float32 master weights with "
                         "bf16 compute: model.dtype float32 (a bf16 checkpoint loads exactly) with precision.amp_level "
                         "O2 and precision.compute_dtype bfloat16, or method lora"),
    "config.lora_16bit_amp": ("with LoRA on the CPU, model.dtype {dtype} keeps the frozen base weights in 16 bits and "
                              "computes in float32; AMP would compute in float16 instead (slower on the CPU): use "
                              "amp_level O0, or model.dtype float32 with AMP"),
    "config.optimizer_shard": ("not supported: MindSpore shards optimizer state only for Lamb/AdamWeightDecay/AdaFactor "
                               "(its parallel optimizer, Ascend data parallel), and this engine's optimizer is nn.Adam "
                               "with bias correction, which AdamWeightDecay lacks (without it fine-tunes stalled); set "
                               "it to false. To save memory use method lora, recompute.policy full or a smaller "
                               "train.micro_batch_size"),
    "config.slurm_workers": ("launch.nodes x launch.workers_per_node ({nodes} x {per_node} = {workers}) must equal "
                             "parallel.data_parallel ({data_parallel}): every worker is one data-parallel rank"),
    "config.reward_accuracy_sft": ("reward accuracy needs a preference objective (train.objective dpo, simpo, orpo or "
                                   "kto)"),
    "config.no_ppl_to_watch": ("train.objective {objective} has no perplexity to watch (its loss is not a "
                               "language-model loss): watch reward_accuracy, val_loss or val_loss_ema"),
    "config.packing_preference": ("train.objective {objective} scores whole answers; packed rows are not supported "
                                  "for preference data: set data.packing false"),
    "config.router_loss_preference": ("the router's balancing loss is not combined with train.objective {objective}: "
                                      "set it false"),
    "config.adapter_off_full": "needs method lora (full fine-tuning has no adapter to switch off): use frozen_copy or auto",
    # ... a config file that cannot be read (core.spec.config); `os_says`, `codec_says` and `yaml_says`
    # are the operating system's, Python's UTF-8 decoder's and PyYAML's own reasons
    "config.unreadable": "{file}: cannot read config file ({os_says})",
    "config.not_utf8": "{file}: cannot read config file (not UTF-8 text: {codec_says})",
    "config.invalid_yaml": "{file}: invalid YAML: {yaml_says}",
    "config.invalid_yaml_line": "{file}: line {line}: invalid YAML: {yaml_says}",
    "config.yaml_character": "{file}: line {line}: invalid YAML: the control character {character} is not allowed",
    "config.not_sections": "{file}: must be a mapping of sections (run:, model:, train:, ...), not a {py_type}",
    "config.empty_file": "{file}: empty; a config is a mapping of sections (run:, model:, train:, ...)",
    "config.bad_override": "override {text} must look like key=value, e.g. train.learning_rate=1e-4",
    "config.bad_base": "must be a file name or a list of file names",
    "config.base_cycle": "inheritance cycle: {cycle}",
    "config.base_missing": "file not found: {file}",
    # ---- area A: the data (core.data) ----
    # where in a data file (a record's line, its index in a JSON array or a table's row), around a reason
    "data.at_line": "{file} line {line}: {reason}",
    "data.at_record": "{file} record {prefix}[{index}]: {reason}",
    "data.at_row": "{file} row index {row}: {reason}",
    "data.at": "{file}: {reason}",
    # a file that cannot be read (core.data.files); `os_error` is the operating system's reason (its
    # strerror, or Python's "[Errno 2] No such file or directory: 'x'"), `codec_says` and `json_says`
    # the UTF-8 decoder's and Python's json module's own reasons, `reader_says` gzip's or pyarrow's,
    # `csv_says` Python's csv module's
    "data.file_not_found": "{file}: file not found",
    "data.unreadable": "{file}: cannot read ({os_error})",
    "data.files_unreadable": "cannot read the data files ({os_error})",
    "data.not_readable": "{file}: not a readable {file_type} file ({reader_says})",
    "data.not_utf8": "not UTF-8 text ({codec_says}); save the file as UTF-8",
    "data.invalid_json_line": "invalid JSON ({json_says} at column {column}); each line must be one JSON object",
    "data.invalid_json": "invalid JSON ({json_says} at column {column})",
    "data.invalid_json_lines": ("invalid JSON ({json_says} at column {column}); one object per line is JSON Lines: "
                                "name the file .jsonl"),
    "data.not_an_object": "expected a JSON object with named fields, got {json_type}",
    "data.not_an_array": ("{file}: expected an array of objects, or an object with a list under \"data\"; found "
                          "{json_type}"),
    "data.not_an_array_keys": ("{file}: expected an array of objects, or an object with a list under \"data\"; found "
                               "an object with keys {keys}"),
    "data.csv_values": ("{count} values but the header has {columns} columns ({header_names}); quote values that "
                        "contain commas"),
    "data.csv_malformed": "malformed CSV ({csv_says})",
    "data.csv_unnamed": "column {column} of the header has no name; name every column",
    "data.csv_duplicates": "duplicate column names {duplicates}",
    "data.unsupported_type": "{file}: unsupported file type {suffix}; supported: {supported}, or a Hugging Face dataset folder",
    "data.no_split": "{file}: no split {split}; splits: {split_names}",
    "data.no_records": ("{file}: no records (the file is empty); expected records with the fields of a format "
                        "(alpaca: instruction, output; sharegpt: conversations; chat: messages; text: text)"),
    # a setting of the data with a value it does not take (data.train_on, data.text_split, data.overlong)
    "data.not_valid": "{setting}: {value} is not valid; valid: {valid_names}",
    "data.not_a_format": "data.format: {value} is not a format; valid: {valid_names}",
    # the records' format (core.data.formats); `formats` is format_help()'s list of each format's fields
    "data.unknown_format_keys": "cannot tell the format from the keys {keys}; expected {formats}; {note}",
    "data.unknown_format_columns": "cannot tell the format from the columns {keys}; expected {formats}; {note}",
    "data.map_these": "map these columns with data.columns, e.g. data.columns={{{pairs}}}",
    "data.map_others": "map other column names with data.columns, e.g. data.columns={{instruction: question, output: answer}}",
    "data.missing_columns": ("{file}: found columns {found}; format {fmt} needs {required_names}, missing "
                             "{missing_names}. Columns by format: {formats}; {note}"),
    "data.missing_columns_optional": ("{file}: found columns {found}; format {fmt} needs {required_names} "
                                      "({optional_names} optional), missing {missing_names}. Columns by format: "
                                      "{formats}; {note}"),
    "data.column_not_used": "data.columns.{column}: format {fmt} does not use {column_shown} (it reads {read_names})",
    "data.mapped_column_missing": ("data.columns maps {column} to {source}, but no record has a field {source}; "
                                   "fields: {field_names}"),
    "data.mapped_column_missing_close": ("data.columns maps {column} to {source}, but no record has a field {source} "
                                         "(did you mean {close}?); fields: {field_names}"),
    # a record's fields (core.data.formats)
    "data.missing_field": "missing field {field}; {fmt} records need {needs_fields} (strings)",
    "data.missing_turns": "missing field {field}; {fmt} records need a list of {item} turns",
    "data.not_a_string": "field {field} must be a string, got {json_type}",
    "data.not_a_string_or_calls": "field {field} must be a string (or null with tool_calls), got {json_type}",
    "data.not_turns": "field {field} must be a list of {item} objects, got {json_type}",
    "data.not_tools": "field {field} must be a list of tool schemas (objects), got {json_type}",
    "data.not_history": "field {field} must be a list of [prompt, response] pairs, got {json_type}",
    "data.not_calls": "field {field} must be a list of objects, got {json_type}",
    "data.not_a_turn": "field {field} must be an object with {role_tag} and {content_tag}, got {json_type}",
    "data.empty_field": "field {field} is empty; nothing to learn from",
    "data.empty_conversation": "field {field} is empty; a conversation needs a user turn and an assistant turn",
    "data.assistant_first": ("field {field} is an assistant turn before any user turn; a conversation starts with a "
                             "system or user turn"),
    "data.no_assistant": "field {field} has no assistant turn; a conversation needs at least one to learn from",
    "data.bad_role": "field {field} is {role}; valid roles: {role_names}",
    "data.bad_role_tags": ("field {field} is {role}; valid roles: {role_names} (map other names with data.columns "
                           "user_tag, assistant_tag, system_tag, function_tag, observation_tag)"),
    "data.needs_pyarrow": ("{file}: reading {file_type} needs pyarrow (pip install 'pyarrow<26'); or convert the "
                           "file to JSONL ({reader_says})"),
    "data.only_blank_lines": ("{file}: no records: no text left after splitting by {text_split} (data.text_split): "
                              "the file holds only blank lines"),
    "data.catalogue_as_file": ("{file}: a dataset catalogue (dataset_info.json); choose its datasets with data.dataset "
                               "(a name or a list of names) and name the folder as data.train_file"),
    # a dataset folder (core.data.files): `datasets`' save_to_disk, its shards, its splits
    "data.state_no_files": "{file}: no '_data_files' list; is this a folder written by datasets' save_to_disk?",
    "data.state_bad_name": "{file}: '_data_files[{index}].filename' must be a file name, got {value}",
    "data.shard_missing": ("{file}: shard {shard} is missing (state.json lists {count} shards: {shard_names}); copy "
                           "the whole folder again"),
    "data.split_shard_missing": ("{file}: split {split} is missing shard {shard} ({missing} of {total} missing); copy "
                                 "the whole folder again"),
    "data.bad_dataset_dict": "{file}: expected {{\"splits\": [names]}}",
    "data.cannot_list": "{file}: cannot list ({os_error})",
    "data.which_split": ("{file}: cannot tell which split to use for {split_role} among {split_names}; name one as "
                         "{file}#<split>"),
    "data.no_role_split": "{file}: no {split_role} split (splits: {split_names}); name one as {file}#<split>",
    "data.no_validation_split": ("{file}: no validation split (splits: {split_names}); name one as {file}#<split>; or "
                                 "set data.validation_file to null and data.validation_fraction"),
    "data.no_data_files": ("{file}: no data files in this folder (looked {depth} levels deep for {supported}) and no "
                           "state.json or dataset_dict.json"),
    # a format the data contradicts; its setting said by `reason` (data.format, a catalogue's 'formatting')
    "data.looks_like": ("{reason}; the data looks like {detected} ({record_at} has the fields {field_names}, not "
                        "{lacks_names}). Set data.format to auto (or {detected})"),
    "data.format_is": "data.format is {value}",
    "data.format_set_in": "data.format is {value} (set in {origin})",
    "data.formatting_is": "{entry}: 'formatting' is {value}",
    "data.preference_column": ("data.columns.{column}: {column} is a column of preference data (chosen/rejected) or "
                               "KTO data (label), which trains with train.objective dpo, simpo, orpo or kto, never as "
                               "plain answers"),
    "data.mixed_formats": ("{file}: the records are {fmt}, but {first_file} (the first file of {setting}) is "
                           "{first_fmt}; the files of one list must share a format"),
    # a field that holds JSON text, tools and function calls (core.data.formats)
    "data.text_not_json_tools": "field {field} is text but not JSON ({json_says}); expected a JSON list of tool schemas",
    "data.text_not_json_history": ("field {field} is text but not JSON ({json_says}); expected a list of [prompt, "
                                   "response] pairs"),
    "data.text_not_json_turns": "field {field} is text but not JSON ({json_says}); expected a JSON list of {item} objects",
    "data.tool_no_name": ("field {field} has no string 'name'; a tool schema is {{\"name\", \"description\", "
                          "\"parameters\"}} or {{\"type\": \"function\", \"function\": {{...}}}}"),
    "data.bad_history_pair": "field {field} must be a [prompt, response] pair of strings, got {got_json}",
    "data.call_not_json": ("field {field} (a function_call turn) is not JSON ({json_says}); expected JSON {{\"name\": "
                           "..., \"arguments\": {{...}}}} or a list of them"),
    "data.call_shape": ("field {field} (a function_call turn) must be JSON {{\"name\": ..., \"arguments\": {{...}}}} "
                        "or a list of them"),
    # the chat template and the data (core.data.pipeline); `reason` the template's own refusal
    "data.two_assistant_turns": ("field {field}: two assistant turns in a row ({first_field} and {field}), which the "
                                 "chat template forbids ({reason}); merge them or insert the user turn between them"),
    "data.template_no_tools": ("field {field}: the chat template of {model} does not render tools (the tool {tool} "
                               "does not appear in its rendering); use a model whose template supports tools, or data "
                               "without them"),
    "data.template_no_calls": ("field {field}: the chat template of {model} does not render tool calls (the call to "
                               "{tool} does not appear in its rendering); use a model whose template supports tools"),
    "data.template_drops_turns": ("field {field}: the chat template of {model} drops {turn_role} turns (this turn's "
                                  "text does not appear in its rendering)"),
    "data.template_rewrites": ("cannot locate the assistant turn {field}: the chat template renders {note} as "
                               "text that is not a prefix of the whole conversation (it rewrites earlier turns or the "
                               "generation prompt). Use a template whose renderings only append, or set "
                               "data.mask_prompt=false to train on every token"),
    "data.turns_before": "the turns before {field} with the generation prompt",
    "data.turns_through": "the turns through {field}",
    "data.test_answer_not_text": ("field {field}: the last assistant turn of a test record must be a text answer to "
                                  "compare with (this one is a tool call or empty)"),
    "data.overlong_one": ("{count} record is longer than data.max_seq_len={max_seq_len} tokens (data.overlong: error): "
                          "{listed}. Raise data.max_seq_len, or set data.overlong to truncate (cut prompt and answer "
                          "in proportion) or skip (leave them out)"),
    "data.overlong_many": ("{count} records are longer than data.max_seq_len={max_seq_len} tokens (data.overlong: "
                           "error): {listed}. Raise data.max_seq_len, or set data.overlong to truncate (cut prompt and "
                           "answer in proportion) or skip (leave them out)"),
    # preference data (core.data.preference)
    "data.prompt_fills": ("field {field}: the prompt alone is {count} tokens, which fills data.max_seq_len="
                          "{max_seq_len}; raise data.max_seq_len or shorten the prompt"),
    "data.supervised_not_preference": ("{entry}: this dataset is supervised data (no 'ranking: true', no 'kto_tag' "
                                       "column); train.objective dpo, simpo, orpo or kto needs preference data. Choose "
                                       "a preference dataset or set train.objective sft"),
    "data.objective_needs": ("field {field}: train.objective {objective} needs {wanted}, but {held_by} holds "
                             "{held}"),
    "data.no_pairs_left": "{file}: no pairs left after dropping the identical ones",
    # a dataset catalogue (core.data.catalog: LLaMA-Factory's dataset_info.json) and its entries
    "data.at_entry": "{file}: dataset {name}: {reason}",
    "data.catalogue_not_json": "not JSON ({json_says} at column {column}); a dataset catalogue is one object of named datasets",
    "data.catalogue_not_object": "{file}: expected an object of named datasets, got {py_type}",
    "data.catalogue_choose": ("{file}: a dataset catalogue (dataset_info.json); choose its datasets with data.dataset (a "
                              "name or a list of names): {dataset_names}"),
    "data.no_such_dataset": "data.dataset: no dataset {name} in {file}; datasets: {dataset_names}",
    "data.entry_not_object": "expected an object with 'file_name', got {got_json}",
    "data.entry_on_hub": ("field {field}: {url} is on {hub_place}; this console reads local files only; download it and "
                          "name it in 'file_name'"),
    "data.entry_script": ("field 'script_url': {url} is a loading script; scripts are not run here; convert its data to a "
                          "file and name it in 'file_name'"),
    "data.entry_no_file": "no field 'file_name' (the data file inside {folder})",
    "data.entry_formatting": "field 'formatting' is {value}; valid: {valid_names}",
    "data.entry_bad_file_name": "field 'file_name' must be a file name or a list of them, got {value}",
    "data.entry_outside": "field 'file_name': {given} lies outside the catalogue folder {folder}",
    "data.entry_file_missing": "field 'file_name': {file} not found",
    "data.entry_tags_alpaca": "field 'tags' applies to sharegpt formatting only (this entry is alpaca)",
    "data.entry_num_samples": "field 'num_samples' must be a positive whole number, got {value}",
    "data.entry_not_mapping": "field {field} must be an object, got {got_json}",
    "data.entry_unknown_name": "field {field} is not a {mapping_kind} name of {fmt} formatting; valid: {valid_names}",
    "data.entry_not_column": "field {field} must name a column, got {value}",
    "data.entry_ranking": ("this is preference data, chosen/rejected pairs (ranking: true); it trains with "
                           "train.objective dpo, simpo, orpo or kto, not as supervised answers. Choose another dataset"),
    "data.entry_kto": ("this is preference data, KTO data (a {column_shown} label column); it trains with "
                       "train.objective dpo, simpo, orpo or kto, not as supervised answers. Choose another dataset"),
    "data.entry_column_missing": "field {field} names the column {column_shown}, which {files} lacks (fields: {field_names})",
    # media in a record (core.data.content): refused, `reason` saying which
    "data.media_refused": ("{reason}; this console trains text-only models. Set data.media: drop to train on the text "
                           "with the media and their <image>/<audio>/<video> placeholders removed, or use records "
                           "without media"),
    "data.media_part": "field {field} is {article} {media} part",
    "data.media_column": "field {field} holds {count} {media}",
    "data.bad_part": ("field {field} is a content part of type {part_type}; expected {{\"type\": \"text\", \"text\": "
                      "...}} (or an image, audio or video part)"),
    # preference pairs and KTO answers (core.data.pairs)
    "data.pair_not_message": "field {field}: expected a message object, got {json_type}",
    "data.pair_bad_role": "field {field}: role {role} is not system, user or assistant",
    "data.pair_content": "field {field}: the content must be a string, got {json_type}",
    "data.answer_missing": "field {field}: the answer is missing",
    "data.answer_not_last": "field {field}: a message list must end with the assistant's answer",
    "data.not_text_or_messages": "field {field}: expected a string or messages, got {json_type}",
    "data.answer_empty": "field {field}: the answer is empty",
    "data.prompt_empty": "field {field}: the prompt is empty",
    "data.no_prompt": ("no prompt: expected 'prompt', 'conversations'/'messages' or 'instruction' (map other names "
                       "with data.columns)"),
    "data.prompt_not_user": "the prompt must end with a user turn (field {field})",
    "data.prompts_differ": ("field {field}: the conversation before the answer differs from '{chosen_field}'s; a pair "
                            "shares its prompt"),
    "data.kto_label": "field {field}: a KTO label must be true or false, got {value} ({json_type})",
    "data.kto_conversation_end": "field {field}: a KTO conversation must end with a non-empty assistant answer",
    "data.kto_no_answer": ("a KTO record needs its answer: 'completion', 'output' or a conversation ending with the "
                           "assistant's turn"),
    "data.mixed_kinds": ("this record is {record_kind} but {record_at} is {first_kind}; a file holds one kind of data "
                         "(field {field})"),
    "data.no_desirable": "{file}: no desirable answer (label true) to train on with train.objective sft",
    # the samples, the split and the batches (core.data.pipeline)
    "data.nothing_of_the_answer": ("the sample is {tokens} tokens; with max_seq_len={max_seq_len} nothing of the answer "
                                   "remains — raise data.max_seq_len or shorten the prompt"),
    "data.test_raw_text": ("{file}: a test file needs prompts and reference answers (alpaca, sharegpt or chat format); "
                           "this one is raw text"),
    "data.no_validation_samples": ("{file}: data.validation_fraction={fraction} of {records} records is 0 validation "
                                   "samples; raise data.validation_fraction or set data.validation_file"),
    "data.nothing_to_train": ("{file}: data.validation_fraction={fraction} of {records} records leaves nothing to "
                              "train on; lower it or set data.validation_file"),
    "data.no_validation_data": ("data.validation_file: no validation data; set data.validation_file or "
                                "data.validation_fraction in (0, 0.5]"),
    "data.fewer_samples_than_a_batch": ("train: {count} samples are fewer than one global batch of {batch} "
                                        "(train.micro_batch_size {micro} × train.grad_accum_steps {accum} × data "
                                        "parallel {world}); lower them or add data"),
    "data.fewer_rows_than_a_batch": ("train: {count} packed rows are fewer than one global batch of {batch} "
                                     "(train.micro_batch_size {micro} × train.grad_accum_steps {accum} × data "
                                     "parallel {world}); lower them or add data"),

    # ... what the data statistics report beside the figures (core.spec.stats: warnings, never errors)
    "stats.ignored_field": "{split_role}: field `{field}` ignored in {count} of {records} records",
    "stats.overlong_truncated": ("{split_role}: {count} of {records} records are longer than max_seq_len {max_seq_len} "
                                 "tokens and were truncated (the starts of prompt and answer kept in proportion) "
                                 "(data.overlong: {policy}): {listed}"),
    "stats.overlong_skipped": ("{split_role}: {count} of {records} records are longer than max_seq_len {max_seq_len} "
                               "tokens and were skipped (data.overlong: {policy}): {listed}"),
    "stats.chunked": ("{split_role}: {count} text records longer than max_seq_len {max_seq_len} were cut into "
                      "{max_seq_len}-token chunks ({samples} samples from {records} records)"),
    "stats.media_dropped": ("{split_role}: media dropped in {count} records (data.media: drop), their "
                            "<image>/<audio>/<video> placeholders removed"),
    "stats.identical_pairs": ("{split_role}: {count} pairs with identical chosen and rejected answers dropped (no "
                              "preference to learn)"),
    "stats.pairs_as_sft": ("{file}: preference pairs trained as SFT on the {count} chosen answers only (the rejected "
                           "ones are not used); set train.objective dpo, simpo or orpo to learn the preference"),
    "stats.kto_as_sft": ("{file}: KTO data trained as SFT on the {count} desirable answers only ({skipped} undesirable "
                         "answers not used); set train.objective kto to learn from both"),
    # the first over-long records named in a statistic or an error (core.spec.stats.listing): items is a list
    "stats.listed_record": "{record_at} ({tokens} tokens)",
    "stats.listing": "{items}",
    "stats.listing_more": "{items}, and {more} more",

    # ---- area B: the model folder (core.spec.model_args, families, moe_args, core.data.tokenizer) ----
    # where a model folder's problem is: the file (a path, or a path and its 'key'), the config.json key
    "model.at": "{where}: {reason}",
    "model.at_setting": "{setting}: {reason}.",
    # a model folder's config.json (core.spec.model_args, core.spec.families); `json_says` is Python's json
    # module's own reason, `py_value` a value as Python shows it
    "model.no_config": ("not found. A model folder needs a Hugging Face config.json (supported architectures: "
                        "{architectures})."),
    "model.invalid_json": "not valid JSON ({json_says}).",
    "model.not_object": "must be a JSON object",
    "model.remote_code": ("auto_map: this checkpoint needs its own Python code (remote code: {classes}), which "
                          "mindtune never runs; supported architectures: {architectures}."),
    "model.architecture_refused": "architectures: {architecture} is not supported ({why}); supported: {architectures}.",
    "model.architecture_unknown": ("architecture {architecture} is not supported; supported: {architectures} "
                                   "(model_type {model_types})."),
    "model.mla_moe": "{name}'s multi-head latent attention (MLA) and its MoE routing are not implemented",
    "model.mla": "{name}'s multi-head latent attention (MLA) is not implemented",
    "model.chunked_nope_moe": "{name}'s chunked attention, NoPE layers and MoE are not implemented",
    "model.positive_int": "must be a positive integer, got {py_value}",
    "model.positive_int_or_null": "must be a positive integer or null, got {py_value}",
    "model.positive_or_null": "must be a positive number or null, got {py_value}",
    "model.kv_heads": "{kv_heads} must divide num_attention_heads={heads}",
    "model.text_config": "{architecture} keeps its language model's config there; expected an object, got {py_value}",
    "model.not_supported": "{py_value} is not supported; supported: {supported_names}",
    "model.rotary_factor": "must be in (0, 1], got {factor}",
    "model.rope_family": "{py_value} is not supported for {family}; supported: {supported_names}",
    "model.sliding_rope": "only 'default' is supported for sliding layers",
    "model.rope_required": "required for rope_type {rope_type}",
    "model.longrope_factors": "required for rope_type 'longrope': a list of positive numbers, got {py_value}",
    "model.longrope_original": "required for rope_type 'longrope' (an integer > 1), got {py_value}",
    "model.factor_count": ("must list one factor per rotary frequency ({half} = head_dim · partial_rotary_factor / 2), "
                           "got {count}"),
    "model.layer_types": "must list {full} or {sliding} for each of the {layers} layers",
    "model.bidirectional": ("bidirectional (encoder-style, EmbeddingGemma) attention is not supported; only causal "
                            "language models can be fine-tuned"),
    # ... what a run asks of it (core.spec.model_args.run_problems)
    "model.above_context": ("is above the model's context of {tokens} tokens ({architecture}, max_position_embeddings "
                            "in its config.json); use at most {tokens}"),
    "model.targets_unmatched": ("names {names} match no projection of this {family} model; its projections are "
                                "{projections} (or 'all-linear' for all of them)"),
    "model.targets_none": ("matches no projection of this {family} model; its projections are {projections} (or "
                           "'all-linear' for all of them)"),
    # ... its weight files (core.spec.model_args: the loader's refusals; app.data.catalog)
    "model.not_a_folder": ("not a folder. Expected a Hugging Face folder with config.json and model.safetensors (or a "
                           "sharded model.safetensors.index.json)."),
    "model.no_weights": ("no model.safetensors or model.safetensors.index.json. Expected a Hugging Face folder with "
                         "config.json and model.safetensors (or a sharded model.safetensors.index.json)."),
    "model.pickle_only": ("only pickle weights found ({files}). mindtune loads safetensors only (pickle files can run "
                          "code when loaded); convert with transformers: "
                          "`AutoModelForCausalLM.from_pretrained(dir).save_pretrained(dir, safe_serialization=True)`."),
    "model.bad_index": "not a valid safetensors index (needs a 'weight_map'): {json_says}",
    "model.shard_missing": "shard {shard} is listed but missing from {folder}.",
    "model.no_tokenizer": "no tokenizer.json (a Hugging Face fast tokenizer is needed)",
    "model.unreadable_weights": "unreadable weights: {reason}",
    "model.short_weights": "{file}: too short for a safetensors file",
    "model.huge_header": "{file}: header of {size} bytes is implausible",
    # a mixture of experts' settings (core.spec.moe_args)
    "moe.experts_missing": "missing (the number of experts per MoE layer)",
    "moe.top_k": "{top_k} exceeds the {experts} experts",
    "moe.aux_loss": "must be a number >= 0, got {py_value}",
    "moe.jitter": "{py_value} is not supported (only 0, as the hub's Mixtral checkpoints ship); set it to 0",
    "moe.qwen_window": "true is not supported for Qwen3-MoE (no hub checkpoint uses it); set it to false",
    "moe.dense_layers": "must be a list of layer indices in [0, {layers}), got {py_value}",
    # a model folder's tokenizer files and chat template (core.data.tokenizer); `serde_says` is the tokenizers
    # library's reason, `jinja_says` jinja2's, `template_says` the template's own words (raise_exception)
    "tokenizer.not_a_folder": "not a folder; expected a Hugging Face model folder with tokenizer.json",
    "tokenizer.no_file": "no tokenizer.json; a Hugging Face fast tokenizer (tokenizer.json) is required",
    "tokenizer.unreadable_json": "cannot read JSON ({json_says})",
    "tokenizer.not_object": "expected a JSON object, got {py_type}",
    "tokenizer.invalid_file": "not a valid tokenizers file ({serde_says})",
    "tokenizer.token": "a token must be a string or an object with a string 'content', got {py_value}",
    "tokenizer.added_token": "expected an object with a string 'content', got {py_value}",
    "tokenizer.eos_ids": "expected an int or a list of ints, got {py_value}",
    "tokenizer.template_entry": "expected an object with string 'name' and 'template'",
    "tokenizer.template_type": "expected a string or a list of {{name, template}} objects, got {py_type}",
    "tokenizer.no_template": ("the model has no chat template (no 'chat_template' in tokenizer_config.json and no "
                              "chat_template.jinja); use a raw-text data format or add a template"),
    "tokenizer.no_default": "several chat templates but none named 'default' (found {names})",
    "tokenizer.refused": "the chat template refused these messages: {template_says}",
    "tokenizer.failed": "chat template failed: {jinja_says}",
    "tokenizer.syntax": "chat template syntax error at line {line}: {jinja_says}",

    # ---- area C: a field's own rule (core.spec.config), core.run's checks (Slurm's shared folder, trackers, cores) ----
    # what a field accepts (core.spec.config's FieldInfo.rule), said after "must be"
    "field.rule.bool": "true or false",
    "field.rule.string": "a string",
    "field.rule.integer": "an integer",
    "field.rule.number": "a number",
    "field.rule.integer_bound": "an integer {op} {bound}",
    "field.rule.number_bound": "a number {op} {bound}",
    "field.rule.integer_in": "an integer in {range}",
    "field.rule.number_in": "a number in {range}",
    "field.rule.one_of": "one of {options}",
    "field.rule.or_null": "{reason}, or null",
    "field.rule.target_modules": "a non-empty list of module names, 'q_proj,v_proj', or one regular expression",
    "field.rule.profile_steps": "two step numbers [start, end] with 1 <= start <= end (text: '3,5')",
    "field.rule.trackers": "a list of {trackers} (each at most once), or []",
    "field.rule.columns": ("a mapping of format fields to the dataset's column names, e.g. "
                           "{{instruction: question, output: answer}}"),
    "field.rule.dataset": "a dataset name of the dataset_info.json catalogue, a list of them (text: 'a, b')",
    "field.rule.data_files": ("a file, a dataset folder, folder#split, or a list of files (text: '[a.jsonl, b.jsonl]' "
                              "or 'a.jsonl, b.jsonl')"),
    "field.rule.time_limit": "a Slurm time limit ({forms}, e.g. 30, 1:30:00, 2-12)",
    "field.rule.sbatch_options": ("a list of sbatch options, each one item '--name=value' or '--name' (long form; no "
                                  "shell characters; not the ones the launcher sets: --output, --error, --chdir, "
                                  "--nodes, ...)"),
    "field.rule.env": ("a mapping of environment variable names ([A-Za-z_][A-Za-z0-9_]*) to values, e.g. "
                       "{{HF_HOME: /data/hf}}"),
    "field.rule.slurm_name": "a Slurm name (letters, digits, '_', '.', '-')",
    # ... why a field's value is refused (`re_says`: Python's re module's own reason)
    "field.must_be": "must be {reason}",
    "field.must_be_suggest": "must be {reason} (did you mean {suggestion}?)",
    "field.not_empty": "must not be empty",
    "field.bad_regex": "is not a valid regular expression: {re_says}",
    "field.unknown_key": "unknown key; valid keys: {valid_names}",
    "field.unknown_key_suggest": "unknown key (did you mean {suggestion}?); valid keys: {valid_names}",
    "field.section_mapping": "must be a mapping of {section} settings",
    "field.unknown_tracker": "has unknown tracker {name}; must be {reason}",
    "field.unknown_tracker_suggest": "has unknown tracker {name} (did you mean {suggestion}?); must be {reason}",
    "field.tracker_twice": "names a tracker twice; must be {reason}",
    "field.unknown_column_field": "has unknown field {name}; valid fields: {valid_names}",
    "field.unknown_column_field_suggest": "has unknown field {name} (did you mean {suggestion}?); valid fields: {valid_names}",
    "field.column_not_string": "maps {name} to {column}; the column name must be a non-empty string",
    "field.data_file_items": "must be {reason}; every item a non-empty file name",
    "field.time_limit_zero": "must be a time limit above zero",
    "field.sbatch_not_text": "{item} is not an option string",
    "field.sbatch_shell": "{item} contains {characters}: no shell characters or newlines",
    "field.sbatch_form": "{item} is not one '--name=value' item (use the long form, one option per item, e.g. --mem=4G)",
    "field.sbatch_reserved": "{item} sets {option}, which the launcher sets itself",
    "field.sbatch_reserved_use": "{item} sets {option}, which the launcher sets itself; use {instead}",
    "field.env_name": "has the name {name}; a variable name is letters, digits and '_', not starting with a digit",
    "field.env_value": "gives {name} the value {py_value}; a value must be a string or a number",
    "field.env_newline": "gives {name} a value with a newline; values are one line",
    # ... as the console's form says it: a paired widget names its part ({widget}: steps, epochs, target modules,
    # where to run, partition) before the reason
    "field.named": "{widget} {reason}",
    "field.give_length": "give the number of steps or epochs",
    # core.run's checks before a launch: Slurm's shared folder, a tracker's package, this machine's cores, held devices
    "run.check.shared_needed": ("a Slurm run needs its run folder on storage every node sees: start the console with "
                                "{option} <a folder on shared storage> and a runs folder (--runs-dir) inside it"),
    "run.check.shared_missing": "{option} {folder}: no such folder",
    "run.check.shared_outside": ("the runs folder {runs} is not inside {option} {shared}: the cluster's nodes would not "
                                 "see the run's files; use a runs folder (--runs-dir) inside {shared}"),
    "run.check.tracker_missing": ("tracking: {tracker} needs the {package} package, which is not installed (pip install "
                                  "-r requirements-tracking.txt), or take {tracker} out of tracking"),
    "run.check.cores": ("this machine has {cores} CPU cores, so at most {cores} CPU workers can run (one process each); "
                        "set parallel.data_parallel to {cores} or fewer"),
    "run.check.devices_held": "every {device} device ({ids}) is held by a run ({held}); check memory when one is free",

    # ... and where a problem is: its setting (a dotted key), the value it has and the file that set it
    "problem.got": "{reason} (got {value})",
    "problem.empty": "{reason} (the field is empty)",
    "problem.and": "{reason}; {note}",
    "problem.at_key": "{setting}: {reason}",
    "problem.at_value": "{setting} = {value}: {reason}",
    "problem.at_key_in": "{setting} in {source}: {reason}",
    "problem.at_value_in": "{setting} = {value} in {source}: {reason}",
    # advice that ends a reason
    "advice.oom": ("To fit in memory, lower train.micro_batch_size (and raise train.grad_accum_steps to keep the "
                   "global batch) or data.max_seq_len, turn on recompute (recompute.policy), or train LoRA "
                   "(method=lora) instead of a full fine-tune."),
}

# ---- area D: the engine and the weights (core.engine, core.weights, core.export, core.generate) ----
# `py_value` is a value as Python shows it (repr), `re_says` Python's re module's reason, `safetensors_says`
# the safetensors library's, `os_error` the operating system's, `json_says` Python's json module's
CATALOGUE.update({
    # LoRA's settings and target modules (core.engine.lora)
    "lora.rank": "lora rank must be a positive integer, got {py_value}.",
    "lora.alpha": "lora alpha must be a positive number, got {py_value}.",
    "lora.dropout": "lora dropout must be in [0, 1), got {py_value}.",
    "lora.already_adapted": ("{module} already has a LoRA adapter ({count} such modules); inject once, or load the "
                             "adapter into the existing LoRA layers."),
    "lora.expert_dropout": ("lora dropout {dropout} with target {module} (a mixture of experts' stacked projections): "
                            "LoRA on expert weights has no dropout here, as in PEFT; set dropout to 0 or leave the "
                            "experts out of target_modules."),
    "lora.bad_regex": "lora target_modules '{pattern}' is not a valid regex: {re_says}.",
    "lora.bad_targets": ("lora target_modules must be a non-empty list of module names, one regex string or "
                         "'all-linear', got {py_value}."),
    "lora.regex_matches_nothing": ("lora target_modules regex '{pattern}' (re.fullmatch on dotted module names such as "
                                   "'{example}') matches no Dense layer of this model; its projections are "
                                   "{projections} ('all-linear': the family's own)."),
    "lora.name_matches_nothing": ("lora target_modules name {names} matches no Dense layer of this model; its "
                                  "projections are {projections} ('all-linear': the family's own)."),
    "lora.names_match_nothing": ("lora target_modules names {names} matches no Dense layer of this model; its "
                                 "projections are {projections} ('all-linear': the family's own)."),
    # ... an adapter's tensors loaded into the model's LoRA layers (a checkpoint's, a PEFT folder's)
    "lora.tensor_shape": ("{source}: tensor {name} has shape {shape}, the model's LoRA layer needs {expected} "
                          "(different rank or base model?)."),
    "lora.missing_tensor": "{source}: missing tensor {name} that the model's LoRA layers need.",
    "lora.missing_tensors": "{source}: missing tensor {name} (and {more} more) that the model's LoRA layers need.",
    "lora.unexpected_tensor": ("{source}: unexpected tensor {name} that matches no LoRA layer of the model (different "
                               "target_modules?)."),
    "lora.unexpected_tensors": ("{source}: unexpected tensor {name} (and {more} more) that matches no LoRA layer of the "
                                "model (different target_modules?)."),
    # ... a PEFT adapter folder (core.engine.lora: read_peft_config, read_peft_tensors)
    "lora.no_adapter_config": ("{file}: not found; a PEFT adapter folder has adapter_config.json and "
                               "adapter_model.safetensors."),
    "lora.not_lora": "{file}: peft_type is {py_value}; only LORA adapters are supported.",
    "lora.config_key_missing": "{file}: {config_key} is missing.",
    "lora.option_unsupported": "{file}: {config_key}={value} is not supported (only {supported_value}).",
    "lora.per_module": "{file}: {config_key} (per-module rank/alpha) is not supported.",
    "lora.target_parameters": ("{file}: target_parameters {value} (LoRA on expert weights) cannot be loaded into "
                               "mindtune yet; load it with peft, or merge it into the base."),
    "lora.no_adapter_weights": "{file}: not found.",
    "lora.pickle_adapter": ("{file}: not found. Found {files}: pickle files can run code when loaded; re-save the "
                            "adapter with safe_serialization=True."),
    "lora.foreign_tensor": ("{file}: tensor {name} is not a PEFT LoRA tensor (expected "
                            "base_model.model.<module>.lora_A.weight / lora_B.weight)."),
    "lora.foreign_tensors": ("{file}: tensor {name} (and {more} more) is not a PEFT LoRA tensor (expected "
                             "base_model.model.<module>.lora_A.weight / lora_B.weight)."),
    # ... a mixture of experts' adapter in PEFT's layout (core.engine.moe.peft_moe_adapter)
    "lora.moe_remapped": ("LoRA on {names} of the dense layers: PEFT 0.21 with transformers 5 reads these "
                          "target_modules of a mixture-of-experts model as expert parameters, so the adapter would load "
                          "onto other weights. Export 'merged', or train without {names} in target_modules."),
    "lora.moe_modules": ("PEFT resolves a mixture-of-experts model's target_modules to module names ({leaves}), which "
                         "would also adapt {module}, untrained here. Export 'merged', or target every layer."),
    "lora.moe_experts": ("PEFT's target_parameters 'mlp.experts.{projection}' would also adapt {module}, untrained "
                         "here. Export 'merged', or target the experts of every sparse layer."),
    # safetensors files (core.weights.safetensors_io's reader, core.engine.checkpoint); `reason` is the
    # reader's own (weights.short_file ...), the safetensors library's (weights.safetensors_says) or the OS's
    "weights.unreadable": "{file}: cannot read safetensors file (truncated or corrupt?): {reason}",
    "weights.unreadable_tensor": "{file}: cannot read tensor {name} (truncated or corrupt?): {reason}",
    "weights.safetensors_says": "{safetensors_says}",
    "weights.os_error": "{os_error}",
    "weights.short_file": "file shorter than the 8-byte header length",
    "weights.header_length": "header length {length} does not fit the file ({size} bytes)",
    "weights.header_json": "header is not valid JSON: {json_says}",
    "weights.header_not_object": "header is not a JSON object",
    "weights.bad_entry": "tensor {name}: malformed header entry {py_value}",
    "weights.bad_offsets": ("tensor {name}: bytes [{begin}, {end}) do not hold {dtype}{shape} inside the file's "
                            "{data_bytes} data bytes (truncated?)"),
    "weights.ends_early": "tensor {name}: the file ends before its last byte (truncated?)",
    "weights.two_shards": "{file}: tensor {name} appears in more than one shard.",
    # ... a Hugging Face checkpoint against the model its config.json describes (core.engine.checkpoint)
    "weights.missing_tensor": "{source}: missing tensor {name} required by {architecture}.",
    "weights.missing_tensors": "{source}: missing tensor {name} (and {more} more) required by {architecture}.",
    "weights.unexpected_tensor": "{source}: unexpected tensor {name} that {architecture} with this config.json does not have.",
    "weights.unexpected_tensors": ("{source}: unexpected tensor {name} (and {more} more) that {architecture} with this "
                                   "config.json does not have."),
    "weights.shape": "{source}: tensor {name} has shape {shape}, config.json implies {expected}.",
    "weights.dtype": "dtype {py_value} is not supported; use one of {choices}.",
    "weights.storage_dtype": "storage dtype {py_value} is not supported; use one of {choices}.",
    "weights.cpu_bf16": ("dtype bfloat16: MindSpore's CPU kernels do not support bf16 compute; load as float32 (or "
                         "float16) on the CPU, or use a GPU/Ascend device."),
    "weights.base_tensor_gone": ("{folder}: tensor {name} of the base checkpoint is gone; the export copies it from "
                                 "there."),
    # a run's training checkpoint (core.engine.checkpoint, core.engine.export)
    "engine.state_no_step": "{file}: missing 'step'.",
    "engine.params_mismatch": "{source}: does not match this run's parameters (missing {missing_keys}, unexpected {unexpected_keys}).",
    "engine.param_shape": "{source}: {name} has shape {shape}, expected {expected}.",
    # exports (core.engine.export: the Monitor tab's downloads, python -m core.export)
    "export.no_checkpoint": "{folder}: checkpoint not found; give runs/<id>/checkpoints/step-N (or best/last).",
    "export.state_fields": "{file}: missing 'step' or 'method'.",
    "export.base_gone": "{folder}: base model {base} is gone; the checkpoint needs it.",
    "export.base_changed": ("{base}: its weights changed since training (sha256 differs); exporting would combine the "
                            "adapter with the wrong base."),
    "export.not_adapter_tensor": ("{file}: {name} is not a LoRA adapter tensor (<module>.lora_a / .lora_b); a PEFT "
                                  "adapter cannot hold it."),
    "export.no_tensor": ("{file}: no tensor is not a LoRA adapter tensor (<module>.lora_a / .lora_b); a PEFT adapter "
                         "cannot hold it."),
    "export.adapter_rank": "{file}: {name} has shape {shape}, not rank {rank} as trainer_state.json's lora settings say.",
    "export.dtype": "--dtype {py_value}: use one of {choices}.",
    "export.unused_tensor": "{file}: {name} matches no tensor of the base {base} (a different base model?).",
    "export.float32_only": "--dtype {dtype}: this family's merged export is written in float32 only.",
    "export.format": "format {py_value} is not supported; use one of {choices}.",
    "export.dtype_merged_only": "--dtype applies to the merged export only ({fmt} is written in float32).",
    "export.full_no_adapter": "a full fine-tune has no adapter: export it as 'merged' or 'mindspore'.",
    "export.which": "--which {py_value}: use {or_choices}.",
    "export.no_pointer": "{folder}: no '{which}' checkpoint yet (checkpoints/{which} is missing).",
    # text generation (core.engine.generate: the Try tab, python -m core.generate, the test answers)
    "generate.max_new_tokens": "max_new_tokens = {value}: must be >= 1",
    "generate.temperature": "temperature = {value}: must be >= 0 (0 = greedy)",
    "generate.top_p": "top_p = {value}: must be in (0, 1]",
    "generate.empty_prompt": "generate: every prompt needs at least one token",
    "generate.too_long": ("prompt of {tokens} tokens + max_new_tokens {max_new_tokens} exceeds the model's context of "
                          "{limit} tokens"),
    # lm-evaluation-harness's model (core.engine.lm_eval_model) and the preference objectives (core.engine.preference)
    "engine.eval_base_missing": "{folder}: its base model {base} (adapter_config.json) is not a folder here.",
    "engine.eval_gen_tokens": "max_gen_toks {max_gen_toks} must be below the model's context of {limit} tokens",
    "engine.objective": "preference objective must be one of {choices}, got {py_value}",
    "engine.loss_type": "preference.loss_type must be sigmoid or ipo, got {py_value}",
})






# ---- area E: the worker, the run folder, checkpoints, evaluation (core.train, core.run, core.eval, core.evaluate) ----
CATALOGUE.update({
    # why the worker failed (core.train); `error` is a library's or Python's own text ("RuntimeError: boom"),
    # `os_says` the OS's reason
    "train.needs_msrun": ("parallel.data_parallel = {data_parallel}: the worker must be started by msrun (python -m "
                          "core.train --config ... does this for you)."),
    "train.not_moe": ("train.router_aux_loss: {architecture} is not a mixture of experts (it has no router); set it to "
                      "false."),
    "train.method_resume": "{path}: a {method} checkpoint cannot resume a {run_method} run.",
    "train.method_fork": ("{path}: a {method} checkpoint cannot start a {run_method} run; a fork keeps the method of its "
                          "parent"),
    "train.other_base": "{path}: trained on another base model than {model}; a fork keeps the base model of its parent",
    "train.fork_parameters": ("{reason} A fork keeps the trainable parameters of its parent (for LoRA: lora.rank and "
                              "lora.target_modules)."),
    "train.fork_steps": ("must be more than the checkpoint's step {step}: a fork continues counting from there (give the "
                         "total, e.g. {example})"),
    "train.nonfinite_loss": "non-finite loss at step {step}",
    "train.nonfinite_gradients": ("non-finite gradients at step {step} (the loss, {loss}, was finite): lower "
                                  "train.learning_rate or set train.max_grad_norm"),
    "train.loss_scale_collapse": ("fp16 loss scale collapse: the gradients overflowed {count} times in a row (steps "
                                  "{first_step}-{step}), every loss was finite; the dynamic loss scale fell from "
                                  "{first_scale} to {scale}. Use fp32 (precision.amp_level=O0) or a lower "
                                  "train.learning_rate."),
    "train.out_of_memory": "out of memory: {error}. {advice}",
    "train.device_out_of_memory": "out of {device} memory: {error}. {advice}",
    "train.device_out_of_memory_figures": "out of {device} memory: {error} ({figures}). {advice}",
    "train.disk_full": "disk full writing {file}: {os_says}; {free} free in {folder}. Free space on that disk.",
    "train.disk_full_run_file": ("disk full writing a run file: {os_says}; {free} free in {folder}. Free space on that "
                                 "disk."),
    "train.crashed": "worker crashed: {error}",
    "train.dry_steps": "--steps {steps}: must be >= 1",
    # ... with several ranks (core.train._fail, core.run.ranks): which rank, and a peer's trouble it follows
    "rank.said": "rank {rank}: {reason}",
    "rank.then_failed": "{note}; then rank {rank} failed: {reason}",
    "rank.peer_exited": "{who} exited with code {code}",
    "rank.peer_stopped": "{who} stopped making progress (process state: {state})",
    "rank.peer_behind": "{who} stopped making progress (its last step, {step}, was {age} s before rank {rank}'s)",
    "rank.device_oom": "out of {device} memory: {error}",
    "rank.device_oom_figures": "out of {device} memory: {error} ({figures})",
    "rank.resumable_unknown": "the newest resumable checkpoint could not be determined ({error})",
    # a checkpoint (core.run.ckpt_store): its manifest, its files, the pointers
    "ckpt.dtype_unsupported": "tensor {name}: dtype {dtype} cannot be saved as safetensors",
    "ckpt.no_step": "{folder}: no checkpoint of step {step}",
    "ckpt.unreadable_manifest": "{file}: unreadable manifest ({error}); the checkpoint cannot be trusted.",
    "ckpt.not_manifest": "{file}: not a checkpoint manifest (no 'files').",
    "ckpt.incomplete": "{folder}: incomplete checkpoint, {missing_file} is missing.",
    "ckpt.manifest_omits": "{file}: does not list {missing_file}.",
    "ckpt.file_missing": "{file}: missing (the manifest lists it).",
    "ckpt.size_differs": ("{file}: {size} bytes, the manifest recorded {expected} (truncated or changed after it was "
                          "saved)."),
    "ckpt.sha_differs": ("{file}: sha256 {actual}… differs from the manifest's {expected}… (corrupted or changed after "
                         "it was saved)."),
    "ckpt.no_last": "{folder}: no 'last' checkpoint to resume from; saved checkpoints that verify: {checkpoints}.",
    "ckpt.no_last_none": "{folder}: no 'last' checkpoint to resume from (the run saved none).",
    "ckpt.not_found": "{folder}: checkpoint not found; give a run folder or runs/<id>/checkpoints/step-N.",
    "ckpt.corrupt_others": ("{reason} Checkpoints that verify: {checkpoints}; to resume from one, name it exactly: "
                            "run.resume={path}"),
    "ckpt.corrupt_none": "{reason} No other checkpoint of this run verifies.",
    "ckpt.disk_full": ("disk full: saving checkpoint step {step} in {folder} needs {needed}, {free} is free (short by "
                       "{short}); {note}. Free space on that disk, or keep fewer checkpoints (train.keep_last_n)."),
    "ckpt.intact": "earlier checkpoints are intact (last -> {checkpoint})",
    "ckpt.untouched": "no earlier checkpoint was touched",
    # a run folder (core.run.rundir); `what` names its file
    "rundir.no_folder": "{folder}: run directory does not exist",
    "rundir.no_file": "{file}: no {what} file",
    "rundir.unreadable": "{file}: cannot read {what} ({os_says})",
    "rundir.invalid_json": "{file}: {what} is not valid JSON ({json_says})",
    "rundir.not_object": "{file}: {what} must be a JSON object, not {py_type}",
    "rundir.what.status": "status",
    "rundir.what.control": "control",
    "rundir.what.profile": "profile summary",
    "rundir.bad_run_id": "run id {run} may only use letters, digits, '.', '_' and '-'",
    "rundir.exists": "{folder}: already exists and is not an empty folder; choose another run id",
    "rundir.not_over": "{file}: only a run that is over can be resumed (state is {state}); stop it first",
    "rundir.unusable_path": "{path}: not a usable path ({error})",
    "rundir.outside": "{path}: resolves to {real}, outside {root}; only paths inside that folder are allowed",
    # starting a run's worker (core.run.launcher)
    "run.launch.not_queued": "run {run} is {state}; only a queued run can start (to continue a run that is over, resume it)",
    "run.launch.not_executable": "{program}: not found or not executable",
    "run.launch.msrun_missing": "{program}: not found or not executable (msrun comes with mindspore)",
    "run.launch.could_not_start": "could not start {command}: {error}",
    "run.launch.worker_not_started": "could not start the worker: {error}",
    "run.launch.survived_kill": "run {run}: processes {pids} survived SIGKILL",
    # an evaluation (core.eval.eval_tasks, core.evaluate, the console's Evaluate panel)
    "eval.not_settings": "{file}: expected a mapping of evaluation settings",
    "eval.unknown_settings": "{file}: unknown setting(s) {setting_names}",
    "eval.no_model": "model: give a model folder, a checkpoint or a run folder",
    "eval.no_tasks": "tasks: choose at least one task",
    "eval.limit": "limit = {value}: must be >= 1 (items per task)",
    "eval.batch_size": "batch_size = {value}: must be >= 1",
    "eval.not_installed": ("lm-eval is not installed (an optional install): pip install -r requirements-eval.txt, then "
                           "evaluate again"),
    "eval.not_a_folder": ("model {folder}: not a folder; give a model folder, a checkpoint (runs/<id>/checkpoints/best), "
                          "a run folder or an export."),
    "eval.ckpt_export": ("model {folder}: a MindSpore (.ckpt) export; evaluate the checkpoint it came from, or its "
                         "merged export."),
    "eval.not_a_model": ("model {folder}: neither a model folder (config.json, tokenizer.json, *.safetensors), a "
                         "training checkpoint (trainer state and weights) nor a PEFT adapter export."),
    "eval.include_not_folder": "include path {folder}: not a folder",
    "eval.invalid_yaml": "{file}: not valid YAML: {yaml_says}",
    "eval.data_file_missing": "task {task}: its data file {file} is not on disk (dataset_kwargs.data_files in {folder})",
    "eval.unknown_task": "task {tasks}: lm-eval knows no task of that name (include paths: {paths}).",
    "eval.unknown_task_local": ("task {tasks}: lm-eval knows no task of that name (include paths: {paths}). Local "
                                "tasks: {task_names}."),
    "eval.unknown_task_no_paths": "task {tasks}: lm-eval knows no task of that name (include paths: none).",
    "eval.task_data_missing": ("task {task}: its data is not on disk (no hub at run time; download it once, or point the "
                               "task at local files): {error}"),
    "eval.no_best": "run {run} has no best checkpoint yet",
    "eval.no_base": "run {run}: its config.yaml names no base model ({error})",
    "eval.tasks_not_local": "task {tasks}: not in the local task folders ({folders})",
    "eval.tasks_no_folders": "task {tasks}: not in the local task folders (none)",
})

# ---- area F: Slurm, trackers, launch commands, family key maps, device rules ----
# `slurm_says` is a Slurm client's own words (sbatch's, scontrol's, sinfo's stderr), `error` a library's
# ("ConnectionError: ..."), `os_error` the OS's reason, `codec_says` Python's UTF-8 decoder's
CATALOGUE.update({
    # talking to Slurm (core.run.slurm)
    "slurm.not_installed": "{program}: not found (Slurm's client commands are not installed on this machine)",
    "slurm.no_answer": "{command}: no answer from Slurm within {seconds} s",
    "slurm.no_controller": "no Slurm controller answers (sinfo: {slurm_says})",
    "slurm.partitions_failed": "scontrol show partition: {slurm_says}",
    "slurm.job_query_failed": "scontrol show job {job_id}: {slurm_says}",
    # ... submitting a run (SlurmBackend.launch): the refusal raised, and the reason its status keeps
    "slurm.refused": "sbatch refused run {run}: {slurm_says}",
    "slurm.refused_job": "sbatch refused the job: {slurm_says}",
    "slurm.not_submitted": "not submitted: {reason}",
    "slurm.not_submitted_config": "not submitted to Slurm: {reason}",
    "slurm.already_submitted": "run {run} is already Slurm job {job_id}; not submitted again",
    "slurm.not_queued": ("run {run} is {state}; only a queued run can be submitted (to continue a run that is over, "
                         "resume it)"),
    # ... what Slurm would refuse, said before submitting (check_submission), after the field it names
    "slurm.no_partition": "Slurm has no partition by that name; its partitions: {partition_names}",
    "slurm.partition_state": "the partition is {state} in Slurm; jobs cannot start there",
    "slurm.partition_nodes": "partition {partition} has {count} node(s); ask for at most {limit}",
    "slurm.partition_nodes_per_job": ("partition {partition} has {count} node(s) and allows {max_nodes} per job; ask "
                                      "for at most {limit}"),
    "slurm.partition_time": "is over partition {partition}'s limit of {max_time}",
    "slurm.no_account": "Slurm's accounting has no account by that name",
    # ... a job Slurm ended, and the workers took its SIGTERM as a stop (SlurmBackend.refresh)
    "slurm.sigterm_stop": "{reason} (the workers took Slurm's SIGTERM as a stop)",
    "slurm.sigterm_stop_saved": "{reason} (the workers took Slurm's SIGTERM as a stop and saved {checkpoint})",
    "slurm.cancelled_while_pending": "{job} was cancelled while pending (scancel)",
    # experiment trackers (core.run.tracking): one that cannot start or stops working; the run goes on
    "tracking.server_silent": ("mlflow.tracking_uri = {uri} does not answer ({os_error}); start the MLflow server, or "
                               "set mlflow.tracking_uri (or MLFLOW_TRACKING_URI) to one that runs"),
    "tracking.mlflow_failed": "mlflow at {uri}: {error}",
    "tracking.swanlab_failed": "swanlab (swanlab.mode = {mode}): {error}",
    "tracking.stopped_working": "{tracker} stopped working ({error})",
    "tracking.goes_on": "{reason}; training goes on without {tracker} (the run folder has every figure)",
    "tracking.mirroring": "tracking: mirroring the metrics to {tracker_names}",
    # the msrun commands for several machines (core.run.launcher.multi_host_commands)
    "launch.workers_nodes": "workers per node ({per_node}) and nodes ({node_count}) must be >= 1",
    "launch.master_port": "master port {port}: must be in 1024..65535 (msrun's range)",
    # a family's key map (core.spec.families.KeyMap.to_ours), said after the checkpoint (model.at)
    "family.keys_collide": "tensors {name} and {other} both map to {target}",
    # bf16 on a device without it (core.spec.device_paths.bf16_problem, core.engine.devices.check_bf16)
    "device.cpu_no_bf16": "MindSpore's CPU kernels have no bf16 compute",
    "device.soc_no_bf16": "this Ascend device ({soc}) has no bf16 compute (910A and 310 SoCs); use float16",
    "device.bf16_refused": "bfloat16 (model.dtype {dtype}, precision.compute_dtype {compute_dtype}): {reason}",
    # area D's leftover: a safetensors header that is not UTF-8 (Python's decoder's words, its reason by
    # `codec_says`)
    "weights.header_not_utf8": ("header is not valid JSON: 'utf-8' codec can't decode byte {byte} in position "
                                "{position}: {codec_says}"),
    "weights.header_not_utf8_bytes": ("header is not valid JSON: 'utf-8' codec can't decode bytes in position "
                                      "{position}-{last}: {codec_says}"),
    # issue 40: Ascend attention by chip and head size (core.spec.device_paths.attention_path), the fit check
    # against the device's memory before launch and at setup (core.run.accelerators, core.engine.devices)
    "path.ascend_chip": ("Ascend: FlashAttentionScore is used on the Atlas A2/A3 training chips only (910B, 910C: "
                         "SoC ascend910b, ascend910_93), not on this {soc}"),
    "path.ascend_head_dim": ("Ascend: FlashAttentionScore takes head sizes that are multiples of 16 up to 512, and "
                             "this model's is {head_dim}"),
    "path.ascend_chip_unknown": ("Ascend: the chip is not known here (FlashAttentionScore runs only on the Atlas A2/A3 "
                                 "training chips, 910B and 910C), so composed attention is assumed"),
    "memory.device_unknown": ("{device}: the device's memory is not known before launch ({why}), so the estimate is "
                              "not checked against it here; Check memory measures the run on the device, and the "
                              "worker checks the estimate against the device's memory when it starts"),
    "memory.smi_missing": "{smi} is not on PATH",
    "memory.smi_silent": "{smi} did not report the device's total memory",
    "memory.fit_over": ("the memory estimate ({needed} MB per device) is more than the {device} device's {has} MB: "
                        "the run may fail out of memory; lower train.micro_batch_size or data.max_seq_len, set "
                        "recompute.policy=full, or use method=lora"),
    "memory.fit_ok": "the memory estimate ({needed} MB per device) fits the {device} device's {has} MB",
    "memory.fit_unknown": ("the {device} device's total memory is unknown ({why}): the memory estimate ({needed} MB "
                           "per device) is not checked against it; the allocator's peak is charted as the run trains"),
    "memory.not_initialised": ("MindSpore reports an Ascend device's memory only once the device is initialised, and "
                               "reported none after a first operator ran"),
    "memory.no_properties": "mindspore.hal.get_device_properties failed: {error}",
})


CATALOGUE.update({
    # GRPO's prompt sets (core.data.prompts) and reward functions (core.eval.rewards)
    "data.grpo_pairs": ("field {field}: this record is a preference pair (chosen/rejected); train.objective grpo reads "
                        "prompts and the columns its rewards use (a 'prompt' and an 'answer', say): choose a prompt "
                        "set, or train.objective dpo, simpo or orpo for pairs"),
    "data.grpo_kto": ("field {field}: this record is a KTO answer (a boolean label); train.objective grpo reads prompts "
                      "and the columns its rewards use (a 'prompt' and an 'answer', say): choose a prompt set, or "
                      "train.objective kto"),
    "data.grpo_text": ("a raw-text record has no prompt (data.format text); train.objective grpo reads 'prompt', "
                       "'messages'/'conversations' or alpaca 'instruction'"),
    "data.grpo_no_prompt": ("field {field}: no prompt; train.objective grpo reads 'prompt' (text or messages), "
                            "'messages'/'conversations' (the turns before the answer) or alpaca 'instruction', and "
                            "this record has {field_names} (map other names with data.columns)"),
    "data.grpo_preference_entry": ("this is preference data (chosen/rejected pairs or a KTO label); train.objective "
                                   "grpo reads prompts. Choose another dataset"),
    "data.prompts_overlong": ("{count} prompts are longer than grpo.max_prompt_len {max_prompt_len} tokens "
                              "(data.overlong: error): {listed}; raise grpo.max_prompt_len, or set data.overlong to "
                              "truncate (cut from the left) or skip"),
    "data.no_prompts_left": ("{file}: no prompt is left: every one is longer than grpo.max_prompt_len {max_prompt_len} "
                             "tokens and data.overlong is skip"),
    "stats.prompts_cut": ("{split_role}: {count} of {records} prompts are longer than grpo.max_prompt_len "
                          "{max_prompt_len} tokens and were cut from the left, their ends kept (data.overlong: "
                          "{policy}): {listed}"),
    "stats.prompts_skipped": ("{split_role}: {count} of {records} prompts are longer than grpo.max_prompt_len "
                              "{max_prompt_len} tokens and were skipped (data.overlong: {policy}): {listed}"),
    "stats.column_in_some": ("{split_role}: column {column} has a value in only {count} of {records} records; a reward "
                             "that reads it stops the run at the others"),
    "stats.answer_from": "{split_role}: the 'answer' column of {count} of {records} records is their {field}",
    "stats.final_turn_dropped": ("{split_role}: {count} of {records} conversations end with an assistant turn and have "
                                 "an 'answer' column of their own: that turn was left out of the prompt"),
    # a reward function that fails stops the run (core.eval.rewards: never a silent zero)
    "reward.file_import": "reward {function}: {file} does not import: {error}",
    "reward.file_no_function": "reward {function}: {file} has no function {name}",
    "reward.file_not_callable": "reward {function}: {name} in {file} is a {py_type}, not a function",
    "reward.raised": "reward {function} raised {error}",
    "reward.not_a_list": "reward {function} returned a {py_type}, not a list of numbers",
    "reward.wrong_count": "reward {function} returned {count} values for {expected} completions",
    "reward.not_a_number": "reward {function}: value {index} is {value}, a {py_type}, not a number",
    "reward.not_finite": "reward {function}: value {index} is {value}, not a finite number",
    "reward.timeout": ("reward {function} ran longer than grpo.reward_timeout_s = {seconds} s on one batch and was "
                       "stopped"),
    "reward.process_ended": "the reward process ended (exit code {code}) while it ran reward {function}",
    "reward.no_value": "reward {function}: {record} has no value in column {column}",
    "reward.math_answer": ("reward {function}: the answer {value} in column {column} ({record}) is nothing math-verify "
                           "can read as a mathematical expression"),
    "reward.no_scorer": ("reward {function}: a reward model (run {run}) is scored by the training engine, which gave "
                         "no scorer here"),
    "reward.setting_not_count": "reward {function}: {setting} must be a whole number of tokens >= 1, not {value}",
    "reward.setting_not_bool": "reward {function}: {setting} must be true or false, not {value}",
    "reward.soft_over_max": "reward {function}: soft_tokens {soft} is more than max_tokens {limit}",
    "reward.check_column": ("reward {index} ({function}) reads column {column}, which the data lacks (its columns: "
                            "{field_names})"),
    "reward.check_no_math": "reward {index} (math) needs the math-verify package: pip install math-verify",
    "reward.check_file_missing": "reward {index} (file): {path} does not exist",
    "reward.check_file_outside": ("reward {index} (file): {path} is outside the folders reward code may run from "
                                  "({folders})"),
    "reward.check_file_syntax": "reward {index} (file): {path} line {line} is not valid Python ({py_says})",
    "reward.check_file_no_def": "reward {index} (file): {path} defines no function {name}",
    "reward.check_run_missing": "reward {index} (reward_model): no run {run} in {runs}",
    "reward.check_run_unfinished": ("reward {index} (reward_model): run {run} is {state}; a reward model must have "
                                    "finished"),
    "reward.check_run_objective": ("reward {index} (reward_model): run {run} trained train.objective {objective}, not "
                                   "a reward model (train.objective reward)"),
    "reward.check_setting": "reward {index}: {reason}",
})


# ---- issue 39: GGUF for llama.cpp and Ollama, the OpenAI-compatible endpoint ----
# (core.engine.gguf_export, gguf_check, gguf_run, ollama; core.engine.serve). `reasons` is the check's own
# English list; `error` a library's words
CATALOGUE.update({
    "gguf.no_package": "the {package} package is not installed: pip install -r {requirements}",
    "gguf.no_llama_cpp": ("llama-cpp-python is not installed, and every GGUF export is checked by reloading it with "
                          "llama.cpp: pip install -r {requirements}"),
    "gguf.window_not_carried": ("sliding window of {window} tokens not carried (llama.cpp attends to the whole "
                                "context for this architecture, as its own converter does): answers are the same "
                                "while prompt and answer fit in {window} tokens"),
    "gguf.moe_dense_layers": ("llama.cpp's qwen3moe makes every layer a mixture of experts; this model has dense "
                              "layers ({layers})"),
    "gguf.moe_no_norm_topk": ("llama.cpp's qwen3moe renormalises the top-k expert weights; this model does not "
                              "(norm_topk_prob is false)"),
    "gguf.gemma_query_scale": ("llama.cpp scales Gemma's queries by 1/sqrt({assumed}); this model's "
                               "query_pre_attn_scalar is {scalar}"),
    "gguf.family_unknown": "{family}: mindtune has no GGUF mapping for this family",
    "gguf.bias_not_read": "{family}: llama.cpp's Gemma reads no attention biases, and this model has them",
    "gguf.window_too_short": ("{family}: trained with a sliding window of {window} tokens on sequences of up to "
                              "{seq_len}; llama.cpp runs this architecture without the window, so its answers "
                              "would differ past {window} tokens"),
    "gguf.llama_cpp_refused": "llama.cpp could not load {file} (not offered): {error}",
    "gguf.rope_type": ("RoPE scaling {rope_type} is not carried to GGUF (default, linear and llama3 are; longrope "
                       "for Phi-3/Phi-4)"),
    "gguf.local_rope": "{family}: a separate RoPE base for the sliding layers is not carried to GGUF",
    "gguf.partial_rotary": "RoPE on part of each head (partial_rotary_factor {factor}) is not carried to GGUF",
    "gguf.no_tokenizer_json": "{folder}: no tokenizer.json; the GGUF file must carry the tokenizer",
    "gguf.tokenizer_kind": ("{file}: a {kind} tokenizer; the GGUF writer carries byte-level BPE tokenizers "
                            "(GPT-2, Llama 3, Qwen style) and SentencePiece-style BPE with byte fallback (Llama 2, "
                            "Mistral v0.1, Gemma) only"),
    "gguf.tokenizer_pre": ("{file}: pre-tokenizer {kinds} is not one llama.cpp can be told (ByteLevel, or Split + "
                           "ByteLevel with the Llama 3 or Qwen2 regex)"),
    "gguf.tokenizer_regex": ("{file}: pre-tokenizer regex {regex} matches none llama.cpp knows (GPT-2, Llama 3, "
                             "Qwen2)"),
    "gguf.tokenizer_prefix_space": ("{file}: the ByteLevel pre-tokenizer adds a prefix space, which llama.cpp's "
                                    "BPE tokenizer does not"),
    "gguf.tokenizer_too_big": "{file}: token id {token_id} is past the embedding's {rows} rows",
    "gguf.tokenizer_duplicate": "{file}: token {token} has two ids ({first} and {second}); a GGUF vocabulary cannot",
    "gguf.tensor_unmapped": "tensor {name} has no llama.cpp name for this architecture",
    "gguf.tensor_shape": "tensor {name} came out {shape}, not {expected}",
    "gguf.quant": "GGUF type {quant}: use one of {choices}",
    "gguf.disk_full": ("the disk holding {folder} is full: the GGUF file needs about {needed}, {free} is free; "
                       "nothing was written and earlier exports are untouched"),
    "gguf.lora_experts": ("{module}: a LoRA on stacked experts has no llama.cpp adapter form; export the merged "
                          "GGUF instead"),
    "gguf.check_no_data": ("the check reloads the file with llama.cpp on run {run}'s validation set, which cannot "
                           "be read: {error}"),
    "gguf.check_no_samples": "run {run}: its validation set has no sample to check the file with",
    "gguf.quantize_failed": "llama.cpp's quantizer failed on {file} (code {code})",
    "gguf.checkpoint_gone": ("{folder}: the checkpoint changed while it was exported (the run is still saving and "
                             "removed it: {error}); export again, or when the run has ended"),
    "gguf.check_failed": ("the file did not pass its check and is kept as {file}, not offered: {reasons}"),
    "ollama.template_not_prefix": ("the chat template renders {what} by changing what came before it; Ollama's "
                                   "TEMPLATE cannot say that"),
    "ollama.template_content": "the chat template does not render {what}'s text exactly once",
    "ollama.template_first_turn": "the chat template renders the first user turn unlike the later ones",
    "ollama.template_head": "the chat template renders a system turn unlike its other turns",
    "ollama.template_differs": ("the Ollama template made from the chat template renders a {roles} conversation "
                                "differently from it"),
    "ollama.triple_quote": "{what} contains three double quotes, which a Modelfile cannot quote",
    "ollama.template_braces": "the chat template's text contains '{{{{', which Ollama's template would read as code",
    # the endpoint (core.engine.serve): OpenAI-style error bodies and the console's Serve action
    "serve.unknown_model": "model {model} is not served here; this endpoint serves {served}",
    "serve.too_long": ("the prompt is {tokens} tokens and {max_new_tokens} more are asked for; the model reads "
                       "{limit} at most"),
    "serve.bad_json": "the request body is not valid JSON: {error}",
    "serve.bad_field": "request field {field}: {error}",
    "serve.no_messages": "messages: give at least one message with a role and a string content",
    "serve.no_login_public": ("--host {host} would serve the model to other machines without a login; add --auth "
                              "user:password (clients send it as their API key) or serve on 127.0.0.1"),
    "serve.unauthorized": ("this endpoint needs a login: send the user:password it was started with (--auth) as "
                           "the API key"),
    "serve.bad_auth": "--auth {value}: give user:password",
})

# the parameters that hold a message themselves (the others are values: a step, a signal, a file)
MESSAGE_PARAMS = frozenset({"reason", "note", "who", "job", "advice", "why", "listed"})
# parameters that are a list of messages, said one after another with LIST_SEPARATOR between them
LIST_PARAMS = frozenset({"items"})
LIST_SEPARATOR = ", "
# parameters that are a list of lines (an error's several problems, each a message or a text), one a line
LINE_PARAMS = frozenset({"lines"})

# area E's: a run folder's file named by its kind (rundir.what.*)
MESSAGE_PARAMS = MESSAGE_PARAMS | {"what"}



def placeholders(template: str) -> set[str]:
    """The parameter names of a template: 'reached {steps} steps' -> {'steps'}."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


class Message(str):
    """`Message("run.reached_steps", steps=20)` is the str 'reached 20 steps' with `key` and `params`."""

    key: str
    params: dict[str, Any]

    def __new__(cls, key: str, **params: Any):
        if key not in CATALOGUE:
            raise KeyError(f"no message {key!r} in core.spec.messages.CATALOGUE")
        missing = placeholders(CATALOGUE[key]) - set(params)
        if missing:
            raise KeyError(f"message {key!r} needs {', '.join(sorted(missing))}")
        if any(isinstance(value, list | tuple) for value in params.values()):
            params = {name: list(value) if isinstance(value, list | tuple) else value for name, value in params.items()}
        shown = {name: ("\n" if name in LINE_PARAMS else LIST_SEPARATOR).join(map(str, value))
                 if isinstance(value, list) else value for name, value in params.items()}
        message = super().__new__(cls, CATALOGUE[key].format(**shown))
        message.key, message.params = key, params
        return message

    def __getnewargs_ex__(self):  # copies and pickles build it again from its key
        return (self.key,), self.params

    def render(self, templates: dict[str, str], separator: str = LIST_SEPARATOR) -> str:
        """The message from `templates` (another language's, by key; English where one is missing),
        its Message parameters rendered the same way, a list's items joined by `separator`."""
        def shown(name, value):
            if isinstance(value, list):
                return ("\n" if name in LINE_PARAMS else separator).join(shown("", item) for item in value)
            return value.render(templates, separator) if isinstance(value, Message) else value

        return templates.get(self.key, CATALOGUE[self.key]).format(
            **{name: shown(name, value) for name, value in self.params.items()})

    def to_json(self) -> dict[str, Any]:
        """{"id", "params"} with Message parameters nested the same way (what a record keeps)."""
        def kept(value):
            if isinstance(value, list):
                return [kept(item) for item in value]
            if hasattr(value, "to_record"):  # a record's place (core.spec.places.Where): its kind kept
                return value.to_record()
            return value.to_json() if isinstance(value, Message) else value

        return {"id": self.key, "params": {name: kept(value) for name, value in self.params.items()}}

    @classmethod
    def from_json(cls, data: Any) -> Message | None:
        """The message a record kept, or None when it does not fit the catalogue (a newer writer's)."""
        if not isinstance(data, dict) or data.get("id") not in CATALOGUE or not isinstance(data.get("params"), dict):
            return None
        def read(value):
            if isinstance(value, list):
                return [read(item) for item in value]
            if isinstance(value, dict) and "place" in value:
                from core.spec.places import Where  # the place's kind (core.spec.places imports this module)
                return Where.from_record(value)
            return (cls.from_json(value) or value) if isinstance(value, dict) else value

        params = {name: read(value) for name, value in data["params"].items()}
        try:
            return cls(data["id"], **params)
        except (KeyError, ValueError, IndexError):
            return None


def ids_of(message) -> list[str]:
    """A message's id and the ids of the messages in its parameters (a list's items too), outermost
    first; [] for what is no message."""
    if not isinstance(message, Message):
        return []
    found = [message.key]
    for value in message.params.values():
        for item in value if isinstance(value, list) else [value]:
            found += ids_of(item)
    return found


CATALOGUE.update({
    # objectives (core.spec.objectives) and GRPO's settings (core.spec.config's grpo: section)
    "config.monitor_not_for_objective": ("train.objective {objective} does not log {monitor}; early stopping can "
                                         "watch {monitors}"),
    "config.grpo_epsilon_high": "grpo.epsilon_high {high} is below grpo.epsilon {low}: the upper clip must not be tighter",
    "config.grpo_too_long": ("grpo.max_prompt_len {prompt} + grpo.max_new_tokens {new} is more than data.max_seq_len "
                             "{total}: raise data.max_seq_len or lower one of them"),
    "memory.grpo_rows": ("grpo: a micro batch of {prompts} prompts trains {prompts} × {generations} completions "
                         "(activations counted per completion row)"),
    "memory.grpo_merged": ("grpo with LoRA: during a rollout the inference kernel holds a float32 copy of every adapted "
                           "matrix with its adapter merged: {mb} MB"),
    "config.grpo_temperature_16bit": ("grpo.temperature must be 1 with a {dtype} model.dtype under LoRA on the CPU: the "
                                      "frozen 16-bit head computes its loss in one kernel at temperature 1; set "
                                      "grpo.temperature 1 or model.dtype float32"),
    "field.rule.rewards": ("a list of reward functions, each {{function: NAME, weight: W, ...}} with NAME one of "
                           "{functions}"),
    "field.rewards_empty": "names no reward function; must be {reason}",
    "field.reward_item": "reward {index} is not a mapping; must be {reason}",
    "field.reward_function": "reward {index}: unknown function {name}; one of {functions}",
    "field.reward_function_suggest": "reward {index}: unknown function {name} (did you mean {suggestion}?); one of {functions}",
    "field.reward_needs": "reward {index} ({function}) needs '{setting}'",
    "field.reward_unknown_key": "reward {index} ({function}) has unknown setting '{setting}'; it takes {keys}",
    "field.reward_weight": "reward {index} ({function}): weight {value} is not a finite number",
    "field.reward_regex": "reward {index}: the pattern is not a regular expression ({re_says})",
})


CATALOGUE.update({
    # the reward model (train.objective reward): its checkpoints, its scorer as a GRPO reward function, its
    # export (core.engine.reward_model, reward_scorer, export)
    "reward.no_head": "{file} has no {name}: it is not a reward model's checkpoint",
    "reward.no_run": "{run} is not a run folder (it has no status.json): name a finished reward model run",
    "reward.not_finished": ("reward model run {run} is '{state}', not finished: only a finished (or early-stopped) "
                            "run can score completions; wait for it to end or name another run"),
    "reward.not_reward_run": ("{run} is a train.objective {objective} run, not a reward model: name a run trained "
                              "with train.objective 'reward'"),
    "reward.no_best": "reward model run {run} has no best checkpoint (checkpoints/best)",
    "reward.counts": ("the reward model got {prompts} prompts and {completions} completions: it scores one "
                      "completion per prompt"),
    "reward.prompt_not_text": ("prompt {index} is of type '{kind}': the reward model takes a prompt as text or a list "
                               "of chat messages"),
    "reward.completion_not_text": ("completion {index} is of type '{kind}': the reward model takes a completion as "
                                   "text or [{{role: assistant, content: text}}]"),
    "export.reward_layout": ("a merged reward model is written as transformers' XxxForSequenceClassification of an "
                             "XxxForCausalLM checkpoint whose tensors stream one by one; {architecture} is not one: "
                             "export the format 'mindspore', or 'peft' with LoRA"),
    # GRPO's loss, step and rollouts (core.engine.grpo), the reference pass shared with the preference
    # objectives (core.engine.preference.LogProbPass) and generation's top-k (core.engine.generate)
    "engine.grpo_loss_type": "grpo.loss_type must be one of {choices}, got {py_value}",
    "engine.grpo_sampling_level": "grpo.importance_sampling_level must be one of {choices}, got {py_value}",
    "engine.grpo_scale_rewards": "grpo.scale_rewards must be one of {choices}, got {py_value}",
    "engine.grpo_group_size": ("{count} rewards do not make whole groups of grpo.num_generations = {generations} "
                               "completions (at least 2 a group)"),
    "engine.grpo_batch_rows": ("a GRPO batch of {prompts} prompts × {generations} completions needs as many "
                               "completions, truncation flags and advantages; got {completions}, {flags} and "
                               "{advantages}"),
    "engine.grpo_empty_row": "a GRPO batch has an empty prompt or an empty completion",
    "engine.grpo_too_wide": ("a prompt of {prompt} tokens or a completion of {completion} tokens does not fit the "
                             "batch's widths of {prompt_width} + {completion_width} tokens"),
    "engine.temperature_in_head": ("grpo.temperature = {temperature} with a 16-bit frozen LM head: its loss kernel "
                                   "scores the tokens at temperature 1; set grpo.temperature to 1, or model.dtype "
                                   "to float32"),
    "engine.adapter_off_without_lora": ("{objective} with the adapter switched off as its reference needs LoRA layers "
                                        "in the model; with full fine-tuning use a frozen reference copy"),
    "generate.top_k": "top_k = {value}: must be a whole number >= 0 (0 = every token)",
    # issue 37: preference data under data.overlong, a file's problems found in one pass, catalogue text entries
    "stats.pairs_overlong_truncated": ("{split_role}: {count} of {records} records are longer than max_seq_len "
                                       "{max_seq_len} tokens and were truncated (the end of the prompt kept, the "
                                       "answers cut to what is left) (data.overlong: {policy}): {listed}"),
    "data.problems": "{count} problems in {file}: {listed}",
    # GRPO step speed (issue 36): a step's prompts rolled out in one call
    "memory.grpo_rollout": ("grpo: a rollout samples {prompts} prompts ({rows} completions) in one call; its key/value "
                            "cache at full length, logits and prefill buffers: {mb} MB"),
    # issue 39: the GGUF families once refused (Phi-3/Phi-4, GLM-4, SentencePiece tokenizers)
    "gguf.longrope_context": ("LongRoPE: llama.cpp uses the long factors for every position when it is loaded with "
                              "a context (n_ctx) over {original} tokens, and the short ones otherwise; mindtune, as "
                              "transformers, uses the long ones for a sequence longer than {original} tokens: the "
                              "answers agree while n_ctx stays within {original} tokens"),
    "gguf.tokenizer_unigram": ("{file}: a Unigram (SentencePiece unigram) tokenizer; llama.cpp's SentencePiece "
                               "tokenizer merges pieces by score as SentencePiece's BPE does, which is not a "
                               "Unigram segmentation, so token ids would differ: not carried"),
    "gguf.tokenizer_prepend_first": ("{file}: the Metaspace pre-tokenizer prepends a space to the text's first "
                                     "segment only (prepend_scheme 'first', transformers' legacy=false); llama.cpp "
                                     "prepends one after every special token too, so token ids would differ after "
                                     "special tokens: not carried"),
    "gguf.tokenizer_prepend_always": ("{file}: the Metaspace pre-tokenizer prepends a space to each text segment "
                                      "unless it begins with one (prepend_scheme 'always'); llama.cpp prepends one "
                                      "even then, so token ids would differ where a segment begins with a space: "
                                      "not carried"),
    "gguf.tokenizer_sentencepiece_layout": ("{file}: a SentencePiece-style tokenizer with normalizer {normalizer} "
                                            "and pre-tokenizer {pre}, which llama.cpp's SentencePiece tokenizer "
                                            "does not reproduce (it carries spaces as U+2581, with a space prepended "
                                            "to every text segment or to none)"),
})


CATALOGUE.update({
    # issue 38, ids end to end: an error of several problems (a ConfigError's lines) as one record
    "problem.lines": "{lines}",
    "train.dry_out_of_memory": "out of memory during the dry run: {error}",
})
