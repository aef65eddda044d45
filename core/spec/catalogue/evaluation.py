"""Core's messages: evaluation and generation settings (core.evaluate, core.generate).

Each id has its English and its 中文 side by side, and the kind of each parameter that is
not plain text (core.spec.catalogue.entry.KINDS)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

MESSAGES: dict[str, Entry] = {
    # text generation (core.engine.generate: the Try tab, python -m core.generate, the test answers)
    "generate.max_new_tokens": Entry("max_new_tokens = {value}: must be >= 1", "max_new_tokens = {value}：必须 >= 1"),
    "generate.temperature": Entry(
        "temperature = {value}: must be >= 0 (0 = greedy)",
        "'temperature' = {value}：必须 >= 0（0 = 贪心解码）"),
    "generate.top_p": Entry("top_p = {value}: must be in (0, 1]", "top_p = {value}：必须在 (0, 1] 内"),
    "generate.empty_prompt": Entry("generate: every prompt needs at least one token", "生成：每个提示词至少需要一个 token"),
    "generate.too_long": Entry(
        "prompt of {tokens} tokens + max_new_tokens {max_new_tokens} exceeds the model's context of {limit} tokens",
        "提示词的 {tokens} 个 token 加上 max_new_tokens {max_new_tokens} 超过了模型的上下文长度 {limit} 个 token"),
    # an evaluation (core.eval.eval_tasks, core.evaluate, the console's Evaluate panel)
    "eval.not_settings": Entry("{file}: expected a mapping of evaluation settings", "{file}：应为评测设置的映射"),
    "eval.unknown_settings": Entry("{file}: unknown setting(s) {setting_names}", "{file}：未知的设置 {setting_names}"),
    "eval.no_model": Entry("model: give a model folder, a checkpoint or a run folder", "'model'：请给出模型目录、检查点或运行目录"),
    "eval.no_tasks": Entry("tasks: choose at least one task", "'tasks'：请至少选择一个任务"),
    "eval.limit": Entry("limit = {value}: must be >= 1 (items per task)", "'limit' = {value}：必须 >= 1（每个任务的条目数）"),
    "eval.batch_size": Entry("batch_size = {value}: must be >= 1", "batch_size = {value}：必须 >= 1"),
    "eval.not_installed": Entry(
        "lm-eval is not installed (an optional install): pip install -r requirements-eval.txt, then evaluate again",
        "'lm-eval' 未安装（可选安装）：'pip install -r requirements-eval.txt'，然后再评测"),
    "eval.not_a_folder": Entry(
        "model {folder}: not a folder; give a model folder, a checkpoint (runs/<id>/checkpoints/best), a run "
        "folder or an export.",
        "模型 {folder}：不是目录；请给出模型目录、检查点（runs/<id>/checkpoints/best）、运行目录或导出。"),
    "eval.ckpt_export": Entry(
        "model {folder}: a MindSpore (.ckpt) export; evaluate the checkpoint it came from, or its merged export.",
        "模型 {folder}：这是 MindSpore（.ckpt）导出；请评测它所来自的检查点，或它的合并导出。"),
    "eval.not_a_model": Entry(
        "model {folder}: neither a model folder (config.json, tokenizer.json, *.safetensors), a training "
        "checkpoint (trainer state and weights) nor a PEFT adapter export.",
        "模型 {folder}：既不是模型目录（config.json、tokenizer.json、*.safetensors），也不是训练检查点（训练状态和权重），也不是 PEFT 适配器导出。"),
    "eval.include_not_folder": Entry("include path {folder}: not a folder", "包含路径 {folder}：不是目录"),
    "eval.invalid_yaml": Entry(
        "{file}: not valid YAML: {yaml_says}",
        "{file}：不是有效的 YAML：{yaml_says}",
        {"yaml_says": "quoted"}),
    "eval.data_file_missing": Entry(
        "task {task}: its data file {file} is not on disk (dataset_kwargs.data_files in {folder})",
        "任务 {task}：其数据文件 {file} 不在磁盘上（{folder} 中的 dataset_kwargs.data_files）"),
    "eval.unknown_task": Entry(
        "task {tasks}: lm-eval knows no task of that name (include paths: {paths}).",
        "任务 {tasks}：'lm-eval' 没有这个名字的任务（包含路径：{paths}）。"),
    "eval.unknown_task_local": Entry(
        "task {tasks}: lm-eval knows no task of that name (include paths: {paths}). Local tasks: {task_names}.",
        "任务 {tasks}：'lm-eval' 没有这个名字的任务（包含路径：{paths}）。本地任务：{task_names}。"),
    "eval.unknown_task_no_paths": Entry(
        "task {tasks}: lm-eval knows no task of that name (include paths: none).",
        "任务 {tasks}：'lm-eval' 没有这个名字的任务（包含路径：无）。"),
    "eval.task_data_missing": Entry(
        "task {task}: its data is not on disk (no hub at run time; download it once, or point the task at local "
        "files): {error}",
        "任务 {task}：其数据不在磁盘上（运行时不联网下载；请先下载一次，或让任务指向本地文件）：{error}"),
    "eval.no_best": Entry("run {run} has no best checkpoint yet", "运行 {run} 还没有最佳检查点"),
    "eval.no_base": Entry(
        "run {run}: its config.yaml names no base model ({error})",
        "运行 {run}：其 config.yaml 没有指定基础模型（{error}）"),
    "eval.tasks_not_local": Entry(
        "task {tasks}: not in the local task folders ({folders})",
        "任务 {tasks}：不在本地任务目录中（{folders}）"),
    "eval.tasks_no_folders": Entry("task {tasks}: not in the local task folders (none)", "任务 {tasks}：不在本地任务目录中（无）"),
    "generate.top_k": Entry(
        "top_k = {value}: must be a whole number >= 0 (0 = every token)",
        "top_k = {value}：必须是 >= 0 的整数（0 = 所有 token）"),
}
