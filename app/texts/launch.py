"""The console's texts: starting a run: the checks, the dry run, the memory estimate, trackers.

Each key has its English and its 中文 side by side, in the class of core's messages
(core.spec.catalogue.entry.Entry)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

TEXTS: dict[str, Entry] = {
    "launch.memory": Entry("Memory estimate per worker", "每个 worker 的显存/内存估算"),
    "launch.yaml": Entry("The exact config that will run (YAML)", "将要运行的完整配置（YAML）"),
    "launch.command": Entry(
        "The command that will run (a Slurm run: its batch script, kept in the run folder as job.sbatch)",
        "将要执行的命令（Slurm 运行：其批处理脚本，保存在运行目录中的 job.sbatch）"),
    "launch.multihost": Entry("Several machines: one command per node", "多机运行：每个节点一条命令"),
    "launch.nodes": Entry("Nodes", "节点数"),
    "launch.master_addr": Entry("Master address (node 0)", "主节点地址（节点 0）"),
    "launch.master_port": Entry("Master port", "主节点端口"),
    "launch.errors": Entry("Problems to fix before starting", "启动前需要修正的问题"),
    "start": Entry("Start training", "开始训练"),
    "start.anyway": Entry("Start anyway (the estimate does not fit)", "仍然开始（估算超出内存）"),
    "dry_run.button": Entry("Check memory (dry run: 2 steps)", "检查内存（试运行 2 步）"),
    "dry_run.running": Entry("dry run: setting up and training 2 steps", "试运行：准备并训练 2 步"),
    "ref.new_from": Entry("New run from", "基于此运行新建："),
    "ref.fork": Entry("Fork of", "分叉自："),
    "ref.clear": Entry("Start fresh instead", "改为全新开始"),
    "ref.changes": Entry("Changes from that run:", "与该运行相比的改动："),
    "ref.no_changes": Entry("No setting differs from that run yet.", "尚未改动任何设置。"),
    "ref.was": Entry("was", "原为"),
    # memory estimate (app.tabs.train_callbacks.estimate_table)
    "mem.weights": Entry("weights", "权重"),
    "mem.gradients": Entry("gradients", "梯度"),
    "mem.optimizer": Entry("optimizer state", "优化器状态"),
    "mem.activations": Entry("activations", "激活值"),
    "mem.runtime": Entry("framework runtime", "框架运行时"),
    "mem.total": Entry("total per worker", "每个 worker 合计"),
    "mem.of": Entry("of {device} MB", "（共 {device} MB）"),
    "mem.fits": Entry("fits ✓", "可以放下 ✓"),
    "mem.no_fit": Entry("does not fit ✗", "放不下 ✗"),
    "mem.unavailable": Entry("estimate unavailable", "无法估算"),
    "mem.pick_model": Entry("pick a loadable model", "请选择可加载的模型"),
    "mem.trainable": Entry(
        "trainable parameters: {trainable} of {total} ({share})",
        "可训练参数：{trainable} / {total}（{share}）"),
    "mem.seq_longest": Entry(
        "sequence length {seq}: the longest sample ({longest} tokens) padded, max_seq_len {max}",
        "序列长度 {seq}：最长样本（{longest} 个 token）补齐后的长度，max_seq_len 为 {max}"),
    "mem.seq_max": Entry("sequence length {seq} (data.max_seq_len)", "序列长度 {seq}（data.max_seq_len）"),
    "mem.seq_packed": Entry(
        "sequence length {seq}: packed rows of max_seq_len {max}",
        "序列长度 {seq}：max_seq_len {max} 的打包行"),
    "mem.seq_unreadable": Entry(
        "sequence length {seq} (max_seq_len; data not readable: {err})",
        "序列长度 {seq}（max_seq_len；数据无法读取：{err}）"),
    "mem.seq_grouped": Entry("; length-grouped batches are shorter", "；按长度分组的批更短"),
    "mem.invalid": Entry("invalid config", "配置无效"),
    # The console's own answers: a run that does not fit, the dry run, saving and loading a config, the
    # Runs tab's resume and delete.
    "fit.need": Entry("{mb} MB per worker", "每个 worker {mb} MB"),
    "fit.workers": Entry(" × {n} workers", " × {n} 个 worker"),
    "fit.more": Entry(
        "the memory estimate ({need}) is more than this machine's {device} MB",
        "内存估算（{need}）超过本机的 {device} MB"),
    "fit.to_fit": Entry(". To fit: ", "。要放下，可以："),
    "fit.item": Entry("{change}: {mb} MB per worker", "{change}：每个 worker {mb} MB"),
    "fit.fits": Entry(" — fits", "——可以放下"),
    "fit.lora": Entry("method full → lora", "微调方法 full → lora"),
    "fit.half_batch": Entry(
        "train.micro_batch_size {micro} → {half} with train.grad_accum_steps {accum} → {accum2} (the same global "
        "batch)",
        "train.micro_batch_size {micro} → {half}，同时 train.grad_accum_steps {accum} → {accum2}（全局批大小不变）"),
    "fit.recompute": Entry("recompute.policy full (every layer)", "recompute.policy full（每一层都重计算）"),
    "fit.seq": Entry(
        "data.max_seq_len {seq} → {half} (longer samples are cut)",
        "data.max_seq_len {seq} → {half}（更长的样本会被截断）"),
    "dry.failed": Entry("dry run failed: {error}", "试运行失败：{error}"),
    "dry.fix_first": Entry("fix the problems listed first", "请先修正列出的问题"),
    "dry.timeout": Entry("no answer within {s} s", "{s} 秒内没有结果"),
    "dry.measured": Entry(
        "measured {mb} per worker ({steps} training steps and one evaluation batch, {s} s)",
        "实测每个 worker {mb}（{steps} 个训练步和一个评估批，{s} 秒）"),
    "dry.estimate": Entry("estimate {mb} MB ({gap}% of the measured)", "估算 {mb} MB（相对实测 {gap}%）"),
    "dry.reference.frozen_copy": Entry(
        "{objective}: the frozen reference copy held and measured ({mb} MB of weights)",
        "{objective}：冻结的参考模型副本已计入实测（权重 {mb} MB）"),
    "dry.reference.adapter_off": Entry(
        "{objective}: the reference is the base with the adapter off (no second copy)",
        "{objective}：参考模型为关闭适配器的基座（无第二份副本）"),
    "dry.machine": Entry("{mb} MB on this machine: ", "本机 {mb} MB："),
    # a core error (a Message, or an exception that keeps them)
    "check.warn": Entry("⚠ {problem}", "⚠ {problem}", {"problem": "message"}),
    "dry.exited": Entry("core.dry_run exited with {code}", "core.dry_run 退出码为 {code}"),
    # a run id, resume's refusals (app.runs.jobs)
    "check.not_run_id": Entry("{run} is not a run id", "{run} 不是运行 ID"),
    "check.no_run": Entry("no run {run} in {folder}", "{folder} 中没有运行 {run}"),
    "check.not_resumable": Entry(
        "{run} is {state}; only a stopped or failed run can be resumed",
        "{run} 的状态为{state}；只有已停止或失败的运行可以恢复"),
    # a run's state as status.json writes it, in 中文 as the badge says it
    "check.state": Entry("{state}", "{state}", {"state": "run_state"}),
    "check.no_such_checkpoint": Entry(
        "{run} has no checkpoint {checkpoint} (its checkpoints/ holds {held})",
        "{run} 没有检查点 {checkpoint}（其 checkpoints/ 中有：{held}）"),
    "check.nothing": Entry("nothing", "无"),
    "check.none": Entry("none", "无"),
    "check.no_checkpoint": Entry(
        "{run} saved no checkpoint to resume from; start a new run instead",
        "{run} 没有保存可恢复的检查点；请开始新的运行"),
    "check.resume_here": Entry(
        "{run} ran on {nodes} node(s) x {per_node} worker(s) (data parallel {width}); resuming it on this machine "
        "needs {width} workers: {problem}",
        "{run} 曾在 {nodes} 个节点 × 每节点 {per_node} 个工作进程上运行（数据并行 {width}）；在本机恢复需要 {width} 个工作进程：{problem}",
        {"problem": "message"}),
    # the folders this console may read (app.paths), the model folder and the data (app.tabs.train_callbacks,
    # app.tabs.data_callbacks)
    "check.outside_roots": Entry(
        "{path}: outside the folders this console may read ({roots})",
        "{path}：不在本控制台可读取的目录中（{roots}）"),
    "check.none_configured": Entry("(none configured)", "（未配置）"),
    "check.in_base": Entry("base: {problem}", "base：{problem}", {"problem": "message"}),
    "check.not_model_folder": Entry("{path} is not a model folder under {roots}", "'{path}' 不是 {roots} 下的模型目录"),
    "check.not_loadable": Entry(
        "{name} is not loadable: {problem}",
        "'{name}' 无法加载：{problem}",
        {"problem": "message"}),
    "check.cannot_read_data": Entry("cannot read the data: {problem}", "无法读取数据：{problem}", {"problem": "message"}),
    # a fork (app.tabs.train_callbacks.new_from_run, fork_errors)
    "check.no_fork_checkpoint": Entry(
        "{run} has no checkpoint step-{step} (kept: {kept})",
        "{run} 没有检查点 step-{step}（保留的：{kept}）"),
    "check.fork_keeps": Entry(
        "a fork keeps {setting} of {run} ({value}): its checkpoint holds weights of that shape",
        "分叉须保持 {run} 的 {setting}（{value}）：其检查点中的权重是这个形状"),
    "check.fork_steps": Entry(
        "steps must be more than {step}: the fork counts on from the checkpoint's step (e.g. {example})",
        "步数必须大于 {step}：分叉从检查点的步数接着计数（例如 {example}）"),
    # the Try tab's generation (app.tabs.try_callbacks)
    "check.no_answer": Entry("no answer within {s} s", "{s} 秒内没有结果"),
    "dry.device": Entry("{mb} MB on the {device} device: ", "{device} 设备 {mb} MB："),
    "fit.more_device": Entry(
        "the memory estimate ({mb} MB per worker) is more than each {name} device's {device} MB",
        "内存估算（每个 worker {mb} MB）超过了每块 {name} 设备的 {device} MB"),
    "dry.device_unknown": Entry(
        "the {device} device's memory: unknown (MindSpore did not report it)",
        "{device} 设备的内存：未知（MindSpore 未报告）"),
    # where the trackers write (core.run.tracking.destinations): the Monitor, the Tracking help, Start's answer
    "track.head": Entry("Trackers:", "实验跟踪："),
    "track.tensorboard": Entry(
        "TensorBoard writes to {where}; see it with {command}",
        "TensorBoard 写入 {where}；用 {command} 查看"),
    "track.mlflow_store": Entry(
        "MLflow writes to {where}; see it with {command}",
        "MLflow 写入 {where}；用 {command} 查看"),
    "track.mlflow_server": Entry(
        "MLflow writes to the server {where} (open it in a browser)",
        "MLflow 写入服务器 {where}（在浏览器中打开）"),
    "track.swanlab_folder": Entry(
        "SwanLab writes to {where}; see it with {command}",
        "SwanLab 写入 {where}；用 {command} 查看"),
    "track.swanlab_cloud": Entry(
        "SwanLab writes to its cloud, project {where} (swanlab login first)",
        "SwanLab 写入其云端项目 {where}（请先 swanlab login）"),
    # the Objective section: where a run of another objective than SFT usually starts (app.tabs.train_callbacks)
    "obj.offer": Entry(
        "{objective} usually starts from an SFT checkpoint: a model already trained on the task. The newest "
        "finished SFT run of this model is {run}, best checkpoint step {step}{figure}.",
        "{objective} 通常从 SFT 检查点开始：一个已在该任务上训练过的模型。此模型最新完成的 SFT 运行是 {run}，最佳检查点为第 {step} 步{figure}。"),
    "obj.no_sft_run": Entry(
        "{objective} usually starts from an SFT checkpoint: a model already trained on the task. This model has no "
        "finished SFT run yet: train one first (objective sft), then fork its best checkpoint here or from the "
        "Runs tab.",
        "{objective} 通常从 SFT 检查点开始：一个已在该任务上训练过的模型。此模型还没有完成的 SFT 运行：请先训练一个（目标 sft），再在这里或“运行记录”页从其最佳检查点分叉。"),
    "obj.forked": Entry(
        "{objective} starts from {run}, step {step} (its model is the reference).",
        "{objective} 从 {run} 的第 {step} 步开始（其模型即参考模型）。"),
    "obj.fork": Entry("Start from this SFT run's best checkpoint", "从该 SFT 运行的最佳检查点开始"),
    # Start refusing a file reward to a user who is not an administrator (app.tabs.train_callbacks)
    "check.reward_file_admin": Entry(
        "{user} may not start this run: a reward function read from a file ({files}) runs its code in the worker, "
        "and only an administrator (--admin) may start such a run. Use another reward function (exact_match, math, "
        "regex, length, reward_model) or ask an administrator",
        "{user} 不能启动此运行：从文件读取的奖励函数（{files}）会在 worker 中运行其代码，只有管理员（--admin）可以启动这样的运行。请改用其他奖励函数（exact_match、math、"
        "regex、length、reward_model），或请管理员启动"),
}
