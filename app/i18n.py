"""Labels in English and Simplified Chinese, switchable in the page.

Gradio's own `gr.I18n` picks the language from the browser's locale; mindtune users often browse
in English but read Chinese more easily (or the other way round), so the page has a toggle
(`lang-toggle`). Every widget that shows text is registered with `Labels.bind`, and switching the
language sends one `gr.update` per widget with its label (or value, info, ...) in the new language.
"""
from __future__ import annotations

from typing import Any

LANGS = ("en", "zh")
LANG_CHOICES = [("English", "en"), ("中文", "zh")]

# key -> (English, 简体中文)
TEXTS: dict[str, tuple[str, str]] = {
    # page
    "app.title": ("## mindtune — fine-tune LLMs on MindSpore", "## mindtune — 基于 MindSpore 的大模型微调"),
    "app.subtitle": ("Pick a base model and a dataset, press **Start**, watch the curves, download the adapter.",
                     "选择基座模型和数据集，点击**开始训练**，观察曲线，下载适配器。"),
    "lang": ("Language", "语言"),
    "tab.train": ("Train", "训练"), "tab.monitor": ("Monitor", "监控"), "tab.runs": ("Runs", "运行记录"),
    "tab.try": ("Try it", "试用"),
    # train tab sections
    "sec.model": ("Base model", "基座模型"), "sec.method": ("Method", "微调方法"),
    "sec.precision": ("Precision, recompute and parallelism", "精度、重计算与并行"),
    "sec.training": ("Batch, schedule, logging and checkpoints", "批大小、学习率调度、日志与检查点"),
    "sec.data": ("Data files, split, sequence length and statistics", "数据文件、划分、序列长度与统计"),
    "sec.model_table": ("Model folders found", "找到的模型目录"),
    "sec.lora": ("LoRA dropout and target modules", "LoRA dropout 与目标模块"),
    "sec.eval": ("Evaluation and early stopping", "评估与早停"), "sec.launch": ("Before launch", "启动前检查"),
    "sec.config_io": ("Save or load a config", "保存或加载配置"),
    "model.table": ("Model folders found", "找到的模型目录"),
    "model.refresh": ("Rescan folders", "重新扫描"),
    "data.picker": ("Dataset", "数据集"),
    "data.upload": ("Upload a data file (JSONL, JSON, CSV, Parquet, Arrow, TXT, .gz) or a zipped dataset folder",
                    "上传数据文件（JSONL、JSON、CSV、Parquet、Arrow、TXT、.gz）或压缩的数据集目录"),
    "data.preview": ("Preview: the first samples through the chat template", "预览：经过对话模板渲染的前几条样本"),
    "data.histogram": ("Token lengths of the training samples", "训练样本的 token 长度分布"),
    "data.stats": ("Data statistics", "数据统计"),
    "launch.memory": ("Memory estimate per worker", "每个 worker 的显存/内存估算"),
    "launch.yaml": ("The exact config that will run (YAML)", "将要运行的完整配置（YAML）"),
    "launch.command": ("The command that will run", "将要执行的命令"),
    "launch.multihost": ("Several machines: one command per node", "多机运行：每个节点一条命令"),
    "launch.nodes": ("Nodes", "节点数"), "launch.master_addr": ("Master address (node 0)", "主节点地址（节点 0）"),
    "launch.master_port": ("Master port", "主节点端口"),
    "launch.errors": ("Problems to fix before starting", "启动前需要修正的问题"),
    "start": ("Start training", "开始训练"),
    "start.anyway": ("Start anyway (the estimate does not fit)", "仍然开始（估算超出内存）"),
    "dry_run.button": ("Check memory (dry run: 2 steps)", "检查内存（试运行 2 步）"),
    "dry_run.running": ("dry run: setting up and training 2 steps", "试运行：准备并训练 2 步"),
    "config.load_shipped": ("Load a shipped config", "加载内置配置"),
    "config.upload": ("Load a config file (YAML)", "加载配置文件（YAML）"),
    "config.save": ("Save this config as YAML", "将当前配置保存为 YAML"),
    "global_batch": ("Global batch", "全局批大小"),
    "ref.new_from": ("New run from", "基于此运行新建："), "ref.fork": ("Fork of", "分叉自："),
    "ref.clear": ("Start fresh instead", "改为全新开始"),
    "ref.changes": ("Changes from that run:", "与该运行相比的改动："),
    "ref.no_changes": ("No setting differs from that run yet.", "尚未改动任何设置。"),
    "ref.was": ("was", "原为"),
    # form fields
    "field.run.name": ("Run name (optional prefix)", "运行名称（可选前缀）"),
    "field.run.seed": ("Seed", "随机种子"),
    "field.model.path": ("Base checkpoint", "基座检查点"),
    "field.model.dtype": ("Parameter dtype", "参数存储精度"),
    "field.method": ("Method", "微调方法"),
    "field.lora.rank": ("LoRA rank r", "LoRA 秩 r"), "field.lora.alpha": ("LoRA alpha", "LoRA alpha"),
    "field.lora.dropout": ("LoRA dropout", "LoRA dropout"),
    "field.lora.target_names": ("Target modules", "目标模块"),
    "field.lora.target_regex": ("…or a regular expression (overrides the boxes)", "……或正则表达式（优先于勾选）"),
    "field.data.train_file": ("Training file", "训练文件"),
    "field.data.validation_file": ("Validation file (empty: split off train)", "验证文件（留空则从训练集划分）"),
    "field.data.test_file": ("Test file (exact-match scoring)", "测试文件（精确匹配评分）"),
    "field.data.format": ("Record format", "数据格式"),
    "field.data.validation_fraction": ("Validation share of train", "验证集比例"),
    "field.data.max_seq_len": ("Max sequence length", "最大序列长度"),
    "field.data.mask_prompt": ("Train on the answer only (mask the prompt)", "只训练回答（屏蔽提示部分）"),
    "field.data.columns": ("Column mapping (format field: your column, ...)", "列映射（格式字段: 数据列, ...）"),
    "field.data.train_on": ("Assistant turns trained", "参与训练的助手轮次"),
    "field.data.packing": ("Pack samples into rows", "样本打包（多条样本共用一行）"),
    "field.data.group_by_length": ("Group batches by length", "按长度分组成批"),
    "field.train.length_unit": ("Train for", "训练长度单位"),
    "field.train.length": ("Steps or epochs", "步数或轮数"),
    "field.train.micro_batch_size": ("Micro batch (per worker)", "微批大小（每个 worker）"),
    "field.train.grad_accum_steps": ("Gradient accumulation", "梯度累积步数"),
    "field.train.learning_rate": ("Learning rate", "学习率"),
    "field.train.weight_decay": ("Weight decay", "权重衰减"),
    "field.train.schedule": ("Schedule", "学习率调度"),
    "field.train.warmup_steps": ("Warmup steps", "预热步数"),
    "field.train.min_lr_ratio": ("Final LR / peak", "最终学习率比例"),
    "field.train.max_grad_norm": ("Gradient clip norm (0: off)", "梯度裁剪范数（0 为关闭）"),
    "field.train.log_every": ("Log every (steps)", "日志间隔（步）"),
    "field.train.eval_every": ("Evaluate every (steps)", "评估间隔（步）"),
    "field.train.save_every": ("Save every (steps)", "保存间隔（步）"),
    "field.train.keep_last_n": ("Checkpoints kept", "保留检查点数"),
    "field.precision.amp_level": ("AMP level", "混合精度等级"),
    "field.precision.compute_dtype": ("Low-precision dtype", "低精度类型"),
    "field.precision.loss_scale": ("Loss scaling", "损失缩放"),
    "field.precision.initial_loss_scale": ("Initial loss scale", "初始损失缩放值"),
    "field.recompute.policy": ("Recompute", "重计算策略"),
    "field.recompute.layer_fraction": ("Share of layers recomputed", "重计算层比例"),
    "field.parallel.data_parallel": ("Data-parallel workers", "数据并行 worker 数"),
    "field.parallel.optimizer_shard": ("Shard optimizer state (Ascend)", "优化器状态切分（仅昇腾）"),
    "field.parallel.device": ("Device", "设备"),
    "field.parallel.hang_timeout_s": ("Hang timeout (s)", "无进展超时（秒）"),
    "field.eval.ema_alpha": ("EMA weight of the newest value", "EMA 新值权重"),
    "field.eval.downstream": ("Score answers on the test set", "在测试集上评分"),
    "field.eval.max_new_tokens": ("Tokens generated per answer", "每个回答生成 token 数"),
    "field.eval.max_eval_samples": ("Max eval samples (0: all)", "最多评估样本（0 为全部）"),
    "field.early_stopping.enabled": ("Early stopping", "早停"),
    "field.early_stopping.monitor": ("Monitored metric", "监控指标"),
    "field.early_stopping.patience": ("Patience (evaluations)", "耐心值（评估次数）"),
    "field.early_stopping.min_delta": ("Min improvement", "最小改进量"),
    # monitor tab
    "mon.run": ("Run", "运行"), "mon.state": ("State", "状态"),
    "mon.log_scale": ("Log scale for the loss charts", "损失曲线使用对数坐标"),
    "mon.ppl_log_scale": ("Log scale for perplexity", "困惑度使用对数坐标"),
    "mon.log": ("Log (tail of train.log)", "日志（train.log 末尾）"),
    "mon.stop": ("Stop (save, then end)", "停止（先保存再结束）"),
    "mon.stop_now": ("Stop now", "立即停止"),
    "mon.es": ("Early stopping of this run", "本运行的早停设置"),
    "mon.es_apply": ("Apply to the running job", "应用到正在运行的任务"),
    "mon.downloads": ("Downloads of the best checkpoint", "下载最佳检查点"),
    "mon.profile": ("Profiler: top operators by time", "性能分析：耗时最多的算子"),
    "mon.profile_trace": ("⬇ profiler trace (trace_view.json)", "⬇ 性能分析 trace（trace_view.json）"),
    "mon.no_run": ("No run yet: start one in the Train tab.", "还没有运行：请在“训练”页开始一个。"),
    "chart.loss": ("Training loss", "训练损失"), "chart.val_loss": ("Validation loss", "验证损失"),
    "chart.val_ppl": ("Validation perplexity", "验证困惑度"), "chart.memory": ("Peak memory (MB per worker)",
                                                                          "峰值内存（每 worker，MB）"),
    "chart.tokens_per_s": ("Tokens per second", "每秒 token 数"), "chart.lr": ("Learning rate", "学习率"),
    "chart.grad_norm": ("Gradient norm", "梯度范数"), "chart.loss_scale": ("Loss scale", "损失缩放值"),
    "download.peft": ("PEFT adapter (zip)", "PEFT 适配器（zip）"),
    "download.merged": ("Merged Hugging Face model (zip)", "合并后的 Hugging Face 模型（zip）"),
    "download.mindspore": ("MindSpore checkpoint (zip)", "MindSpore 检查点（zip）"),
    "download.prepare": ("prepare", "准备"), "download.busy": ("preparing…", "准备中…"),
    "download.exporting": ("exporting", "正在导出"), "download.none": ("no checkpoint yet", "尚无检查点"),
    "status.step": ("step", "步数"), "status.elapsed": ("elapsed", "已用时间"), "status.eta": ("ETA", "预计剩余"),
    "status.best": ("best", "最佳"),
    "phase.queued": ("waiting in the queue for a free device (Runs tab)", "在队列中等待空闲设备（见“运行记录”页）"),
    "phase.loading": ("loading the model and data", "正在加载模型和数据"),
    "phase.baseline": ("evaluating the base model", "正在评估基座模型"),
    "phase.compiling": ("compiling the first training step (can take a minute)", "正在编译第一个训练步（可能需要一分钟）"),
    "mon.no_log": ("(no train.log: a run started from a shell prints to that shell)",
                   "（没有 train.log：命令行启动的运行输出在该终端中）"),
    "failure.oom": ("Out of memory: lower the micro batch or max sequence length, turn on recompute, or use fewer workers.",
                    "内存不足：请减小微批大小或最大序列长度，开启重计算，或减少 worker 数。"),
    "failure.nonfinite": ("The loss became NaN or infinite: lower the learning rate, or train in fp32 (AMP O0).",
                          "损失变为 NaN 或无穷大：请降低学习率，或使用 fp32（AMP O0）训练。"),
    "failure.data": ("Bad data: a data file cannot be used as given (see the reason below).",
                     "数据有误：数据文件无法按当前设置使用（原因见下）。"),
    "failure.config": ("The settings cannot be used as given: a field, the checkpoint or the LoRA targets (see the reason below).",
                       "设置无法按给定方式使用：某个字段、检查点或 LoRA 目标模块（见下方原因）。"),
    "failure.crash": ("A worker crashed or was killed (see the log below).", "有 worker 崩溃或被终止（见下方日志）。"),
    "failure.other": ("The run failed.", "运行失败。"),
    "failure.disk_full": ("The disk is full: free space (or keep fewer checkpoints); earlier checkpoints are intact.",
                          "磁盘已满：请释放空间（或减少保留的检查点）；之前的检查点完好。"),
    "failure.checkpoint": ("A checkpoint is corrupt: its bytes differ from its manifest (see which file below).",
                           "检查点已损坏：文件内容与清单不符（见下方文件名）。"),
    "failure.loss_scale": ("fp16 gradients kept overflowing: train in fp32 (AMP O0) or lower the learning rate.",
                           "fp16 梯度持续溢出：请改用 fp32（AMP O0）或降低学习率。"),
    "failure.hang": ("A worker stopped making progress (see which rank below).", "有 worker 不再推进（见下方 rank）。"),
    "failure.rank_died": ("A data-parallel worker died (see which rank, its exit signal and log below).",
                          "有数据并行 worker 退出（见下方 rank、退出信号与日志）。"),
    "failure.reason": ("Reason", "原因"),
    "state.queued": ("queued", "排队中"), "state.starting": ("starting", "启动中"), "state.running": ("running", "运行中"),
    "state.stopping": ("stopping", "停止中"), "state.finished": ("finished", "已完成"),
    "state.early_stopped": ("early stopped", "已早停"), "state.stopped": ("stopped", "已停止"),
    "state.failed": ("failed", "失败"), "state.unknown": ("unknown", "未知"),
    # runs tab
    "runs.table": ("All runs (including those started from a shell)", "全部运行（包括命令行启动的）"),
    "runs.select": ("Select runs to compare, resume or delete", "选择要比较、恢复或删除的运行"),
    "runs.metric": ("Curve", "曲线"), "runs.overlay": ("Curves of the selected runs", "所选运行的曲线"),
    "runs.diff": ("Configs side by side (differences highlighted)", "配置对比（差异高亮）"),
    "runs.only_diff": ("Only settings that differ", "只显示不同的设置"),
    "runs.log_scale": ("Log scale", "对数坐标"),
    "runs.resume": ("Resume selected (stopped or failed)", "恢复所选（已停止或失败）"),
    "runs.delete": ("Delete selected…", "删除所选……"), "runs.delete_confirm": ("Yes, delete", "确认删除"),
    "runs.delete_cancel": ("Cancel", "取消"), "runs.refresh": ("Refresh", "刷新"),
    "runs.open": ("Open in Monitor", "在监控页打开"),
    "runs.new_from": ("New run from this one", "基于所选运行新建"),
    "runs.fork_step": ("Checkpoint to fork from", "分叉用的检查点"),
    "runs.fork": ("Fork from this checkpoint", "从该检查点分叉"),
    "runs.queue": ("**Queue**: runs waiting for a free device (they start in this order)",
                   "**队列**：等待空闲设备的运行（按此顺序启动）"),
    "runs.queue_up": ("Move selected up", "所选上移"), "runs.queue_down": ("Move selected down", "所选下移"),
    "runs.queue_cancel": ("Cancel selected (queued)", "取消所选（排队中）"),
    # try tab
    "try.base": ("Base model", "基座模型"), "try.checkpoint": ("Fine-tuned checkpoint", "微调检查点"),
    "try.prompt": ("Prompt", "提示词"), "try.chat": ("Use the chat template", "使用对话模板"),
    "try.max_new_tokens": ("Max new tokens", "最多生成 token 数"), "try.generate": ("Generate both", "同时生成"),
    "try.base_out": ("Base model says", "基座模型输出"), "try.tuned_out": ("Fine-tuned says", "微调模型输出"),
}


# Help lines under the form's fields: English is the field's own help in core.config (one source
# with `python -m core.config`), 简体中文 here; a test fails when a field has no translation.
FIELD_HELP_ZH: dict[str, str] = {
    "run.name": "运行 ID 的可选前缀",
    "run.seed": "初始化、数据顺序和 dropout 的随机种子",
    "model.path": "Hugging Face 模型目录（config.json、权重、分词器）",
    "model.dtype": "参数存储（主权重）精度",
    "method": "lora 只训练适配器；full 训练全部权重",
    "lora.rank": "低秩更新的秩 r",
    "lora.alpha": "缩放分子：更新按 alpha / rank 缩放",
    "lora.dropout": "适配器输入上的 dropout（PEFT 默认 0；在 CPU 上 0.05 会使 LoRA 每步慢约 5 倍）",
    "data.train_file": "训练数据：文件、数据集目录或 目录#划分",
    "data.validation_file": "验证数据；留空则从训练集划分",
    "data.test_file": "用于下游评测的留出测试数据",
    "data.format": "记录格式；auto 自动识别",
    "data.columns": "数据集中对应格式字段的列名，例如 {instruction: question}",
    "data.validation_fraction": "未指定验证文件时从训练集留出的比例",
    "data.max_seq_len": "每条样本的 token 数；更长的会被截断",
    "data.mask_prompt": "只训练回答（提示部分的 token 不计损失）",
    "data.train_on": "计入损失的助手轮次：全部，或仅最后一轮",
    "data.packing": "把多条样本打包进一行（注意力只在样本内部）",
    "data.group_by_length": "把长度相近的样本组成一批（填充更少）",
    "train.micro_batch_size": "每个设备每次前向的样本数",
    "train.grad_accum_steps": "每个优化器步累积的微批数",
    "train.learning_rate": "峰值学习率（AdamW）",
    "train.weight_decay": "AdamW 解耦权重衰减",
    "train.schedule": "预热之后的衰减方式",
    "train.warmup_steps": "学习率从 0 线性升到 learning_rate 的步数",
    "train.min_lr_ratio": "最终学习率占峰值的比例",
    "train.max_grad_norm": "梯度裁剪范数；留空则关闭",
    "train.log_every": "两条训练指标记录之间的步数",
    "train.eval_every": "两次验证之间的步数",
    "train.save_every": "两次保存检查点之间的步数",
    "train.keep_last_n": "保留的步数检查点个数（最佳检查点总会保留）",
    "precision.amp_level": "O0 全 fp32，O1 部分算子混合精度，O2 大部分低精度",
    "precision.compute_dtype": "amp_level 不为 O0 时的低精度类型",
    "precision.loss_scale": "float16 的损失缩放",
    "precision.initial_loss_scale": "初始（或固定）损失缩放值",
    "recompute.policy": "重计算激活值的模块",
    "recompute.layer_fraction": "（从第一层起）做重计算的层的比例",
    "parallel.data_parallel": "数据并行 worker 数",
    "parallel.optimizer_shard": "在 worker 之间切分优化器状态（仅昇腾）",
    "parallel.device": "MindSpore 设备类型",
    "eval.ema_alpha": "EMA 平滑指标中最新值的权重",
    "eval.downstream": "在测试集上生成并给回答评分",
    "eval.max_new_tokens": "下游评测的生成长度",
    "eval.max_eval_samples": "评估样本上限；留空则全部",
    "train.router_aux_loss": "混合专家模型：加入路由器的负载均衡损失",
    "train.router_aux_loss_coef": "其权重；留空则用模型 config.json 中的 router_aux_loss_coef",
    "parallel.hang_timeout_s": "某个 worker 这么长时间（秒）没有步数进展时，判定运行失败",
    "eval.baseline": "在第一步之前评估基础模型（监控页的参考线）；false 则立即开始训练",
    "eval.baseline_max_tokens": "基线评估读取的词元上限（整批，至少一批）；留空则读取整个验证集",
    "train.profile_steps": "[起, 止]：在 rank 0 上对这些步运行 MindSpore 性能分析器（runs/<id>/profile/；监控页显示耗时最多的算子）",
    "early_stopping.enabled": "监控指标不再改进时提前停止",
    "early_stopping.monitor": "监控的指标",
    "early_stopping.patience": "停止前允许的无改进评估次数",
    "early_stopping.min_delta": "算作改进的最小下降量",
}
# Read-outs the callbacks write (tables, notes, the Train tab's "Before launch" column).
TEXTS.update({
    "lang.toggle": ("Language · 语言", "语言 · Language"),
    "unit.steps": ("steps", "步数"), "unit.epochs": ("epochs", "轮数"),
    # model folders table (app.catalog.ROW_HEADERS)
    "model.col.folder": ("folder", "目录"), "model.col.architecture": ("architecture", "架构"),
    "model.col.parameters": ("parameters", "参数量"), "model.col.stored dtype": ("stored dtype", "存储精度"),
    "model.col.context": ("context", "上下文长度"), "model.col.vocab": ("vocab", "词表大小"),
    "model.col.status": ("status", "状态"), "model.ok": ("ok", "可用"), "model.active": ("{active} active of {total}", "激活 {active} / 共 {total}"),
    # runs table (app.runs_callbacks.TABLE_HEADERS)
    "runs.col.run": ("run", "运行"), "runs.col.state": ("state", "状态"), "runs.col.step": ("step", "步数"),
    "runs.col.best val ppl": ("best val ppl", "最佳验证困惑度"), "runs.col.tokens/s": ("tokens/s", "token/秒"),
    "runs.col.peak MB": ("peak MB", "峰值内存 MB"), "runs.col.duration": ("duration", "用时"),
    "runs.col.reason": ("reason", "原因"),
    "runs.queue_empty": ("no run is waiting: Start launches at once while a device is free",
                         "没有排队的运行：设备空闲时点击“开始训练”会立即启动"),
    "runs.queued_n": ("queued #{n}", "排队中 #{n}"),
    # global batch: 'Global batch 16 = micro 8 × accumulation 2 × workers 1'
    "batch.parts": ("= micro {micro} × accumulation {accum} × workers {workers}",
                    "= 微批 {micro} × 梯度累积 {accum} × worker {workers}"),
    # memory estimate (app.train_callbacks.estimate_table)
    "mem.weights": ("weights", "权重"), "mem.gradients": ("gradients", "梯度"),
    "mem.optimizer": ("optimizer state", "优化器状态"), "mem.activations": ("activations", "激活值"),
    "mem.runtime": ("framework runtime", "框架运行时"), "mem.total": ("total per worker", "每个 worker 合计"),
    "mem.of": ("of {device} MB", "（共 {device} MB）"), "mem.fits": ("fits ✓", "可以放下 ✓"),
    "mem.no_fit": ("does not fit ✗", "放不下 ✗"),
    "mem.unavailable": ("estimate unavailable", "无法估算"), "mem.pick_model": ("pick a loadable model", "请选择可加载的模型"),
    "mem.trainable": ("trainable parameters: {trainable} of {total} ({share})",
                      "可训练参数：{trainable} / {total}（{share}）"),
    "mem.seq_longest": ("sequence length {seq}: the longest sample ({longest} tokens) padded, max_seq_len {max}",
                        "序列长度 {seq}：最长样本（{longest} 个 token）补齐后的长度，max_seq_len 为 {max}"),
    "mem.seq_max": ("sequence length {seq} (data.max_seq_len)", "序列长度 {seq}（data.max_seq_len）"),
    # devices (app.devices)
    "device.cpu": ("{n} CPU cores; fp32 (amp O0) is fastest here, fp16 works but is slower, bf16 has no CPU kernels",
                   "{n} 个 CPU 核；这里 fp32（amp O0）最快，fp16 可用但更慢，bf16 没有 CPU 算子"),
    "device.gpu": ("{n} NVIDIA GPU(s) found", "找到 {n} 块 NVIDIA GPU"),
    "device.no_gpu": ("no NVIDIA GPU found (nvidia-smi)", "未找到 NVIDIA GPU（nvidia-smi）"),
    "device.ascend": ("{n} Ascend NPU(s) found", "找到 {n} 块昇腾 NPU"),
    "device.no_ascend": ("no Ascend NPU found (/dev/davinci*)", "未找到昇腾 NPU（/dev/davinci*）"),
})
# The dataset's preview, histogram and statistics (app.data_preview, app.data_callbacks).
TEXTS.update({
    "dp.legend_masked": ("prompt, system and tool turns (masked, no loss)", "提示、系统和工具轮次（屏蔽，不计损失）"),
    "dp.legend_trained": ("assistant turns (trained)", "助手轮次（参与训练）"),
    "dp.cut": ("… {n} tokens cut by max_seq_len", "… {n} 个 token 被 max_seq_len 截掉"),
    "dp.mapped": ("mapped by data.columns", "由 data.columns 映射"), "dp.absent": ("absent", "缺失"),
    "dp.fields": ("fields in the data:", "数据中的字段："),
    "dp.ignored": ("field {name} ignored in {count} of {total} records", "字段 {name} 在 {total} 条记录中有 {count} 条被忽略"),
    "dp.ignored_head": ("⚠ format {fmt} does not read these fields (map them with data.columns, or pick another format):",
                        "⚠ 格式 {fmt} 不读取这些字段（用 data.columns 映射，或换一种格式）："),
    "dp.format": ("format: {fmt} ({how}){split} · first {n} of {total} records · trained: {trained}",
                  "格式：{fmt}（{how}）{split} · 共 {total} 条记录中的前 {n} 条 · 训练：{trained}"),
    "dp.auto": ("auto-detected", "自动识别"), "dp.as_set": ("as set", "按设置"), "dp.split": (" · split {split}", " · 划分 {split}"),
    "dp.every_token": ("every token", "全部 token"), "dp.all_assistant": ("all assistant", "全部助手轮次"),
    "dp.last": ("last", "最后一轮助手"),
    "dp.sample": ("{where} · {full} tokens, {trained} trained", "{where} · {full} 个 token，{trained} 个参与训练"),
    "dp.line": ("line {n}", "第 {n} 行"),
    "dp.axis": ("tokens per sample", "每条样本的 token 数"),
    "dp.no_model": ("pick a loadable base model to preview the data with its tokenizer",
                    "请选择可加载的基座模型，以用它的分词器预览数据"),
    "dp.stats_unavailable": ("statistics unavailable: {err}", "无法统计：{err}"),
    "dp.st_train": ("- **train**: {n} samples ({fmt}), {tokens} trained tokens, length {lo}–{hi} (mean {mean})",
                    "- **训练集**：{n} 条样本（{fmt}），{tokens} 个参与训练的 token，长度 {lo}–{hi}（平均 {mean}）"),
    "dp.st_validation": ("- **validation** ({source}): {n} samples, length {lo}–{hi}",
                         "- **验证集**（{source}）：{n} 条样本，长度 {lo}–{hi}"),
    "dp.source.file": ("file", "文件"), "dp.source.fraction": ("fraction", "从训练集按比例划分"),
    "dp.st_truncated": ("- **truncated** at max_seq_len {max}: {train} train ({share}), {validation} validation",
                        "- **截断**（max_seq_len {max}）：训练集 {train} 条（{share}），验证集 {validation} 条"),
    "dp.st_padding": ("- **padding efficiency** (real / padded tokens): {one} one sample per row (rows of {seq}), "
                      "{packed} with data.packing (rows of {packed_seq})",
                      "- **填充效率**（真实 / 补齐后 token）：每行一条样本 {one}（行长 {seq}），"
                      "data.packing 打包后 {packed}（行长 {packed_seq}）"),
    "dp.st_gain": (": {gain}× the real tokens per padded token", "：每个补齐 token 中的真实 token 为 {gain} 倍"),
    "dp.st_overlap": ("- **overlap**: {overlap} of {n} validation samples also occur in train",
                      "- **重叠**：{n} 条验证样本中有 {overlap} 条也出现在训练集中"),
    "dp.st_overlap_warn": (" ⚠ validation loss will look better than it is", " ⚠ 验证损失会显得比实际更好"),
    "dp.st_test": ("- **test**: {n} records for exact-match scoring", "- **测试集**：{n} 条记录用于精确匹配评分"),
    "dp.saved": ("saved as `{file}`; {found}", "已保存为 `{file}`；{found}"),
    "dp.detected": ("format **{fmt}** (detected)", "格式 **{fmt}**（自动识别）"),
})
# Inside the charts (app.svg_chart, drawn by app.monitor_callbacks and app.runs_callbacks).
TEXTS.update({
    "chart.step": ("step", "步数"), "chart.log": (" (log)", "（对数）"),
    "chart.empty": ("waiting for the first points…", "等待第一批数据点…"),
    "chart.overlay_empty": ("select runs to compare their curves", "选择运行以对比曲线"),
    "ytitle.loss": ("loss", "损失"), "ytitle.val_loss": ("validation loss", "验证损失"),
    "ytitle.val_ppl": ("perplexity", "困惑度"), "ytitle.memory": ("MB per worker", "每 worker MB"),
    "ytitle.tokens_per_s": ("tokens/s", "token/秒"), "ytitle.lr": ("learning rate", "学习率"),
    "ytitle.grad_norm": ("grad norm", "梯度范数"), "ytitle.loss_scale": ("loss scale", "损失缩放"),
    "es.best": ("best {monitor} {value} at step {step}", "最佳 {monitor} {value}（第 {step} 步）"),
    "es.patience": ("patience left {n}", "剩余耐心 {n}"), "es.off": (" (early stopping off)", "（早停已关闭）"),
})
# core.memory's notes are English sentences with figures in them; each pattern here gives its
# 简体中文 (unmatched notes stay English, and the browser test names any that reach the page).
MEMORY_NOTES_ZH: list[tuple[str, str]] = [
    (r"CPU: the peak is the worker's resident set size; the compiled train and eval graphs share one memory pool",
     "CPU：峰值是 worker 进程的常驻内存；编译后的训练图和评估图共用一个内存池"),
    (r"CPU: attention, norms, MLP gates and loss run as fused kernels \(no score tensors kept\)",
     "CPU：注意力、归一化、MLP 门控和损失以融合算子运行（不保留注意力分数张量）"),
    (r"gradient accumulation holds a second float32 gradient buffer \(the running sum\)",
     "梯度累积需要第二份 float32 梯度缓冲（累加和）"),
    (r"device memory unknown: the total is not checked against a limit", "设备内存未知：合计未与上限比较"),
    (r"CPU: the (\d+) workers share this machine's RAM \((.+)\)", r"CPU：\1 个 worker 共用本机内存（\2）"),
    (r"(\w+): activations are textbook figures, not measured on such a device", r"\1：激活值为理论估算，未在此类设备上实测"),
]


# Why a run ended, as the worker and the launcher write it (status.json's `reason`); an error's
# own text (a failed run's exception) is shown as it is.
REASONS_ZH: list[tuple[str, str]] = [
    (r"reached (\d+) steps", r"已达到 \1 步"),
    (r"stopped by request", "按请求停止"),
    (r"stopped by the user \(forced\); newest resumable checkpoint: (\S+)", r"用户强制停止；最新可恢复的检查点：\1"),
    (r"stopped by the user \(forced\)", "用户强制停止"),
    (r"stopped by the user", "用户停止"),
    (r"stopped now by user", "用户立即停止"),
    (r"cancelled before it started", "启动前已取消"),
    (r"graceful stop timed out after (\S+) s; worker terminated by user", r"正常停止 \1 秒后超时；已强制结束 worker"),
    (r"(\S+) did not improve by (\S+) for (\d+) evaluations \(best (\S+) at step (\d+)\)",
     r"\1 连续 \3 次评估未改进 \2 以上（最佳 \4，第 \5 步）"),
]


# The messages that answer an action (Start, Stop, a queue move, Resume), as app.jobs and
# app.train_callbacks write them; the run ids and settings in them stay as they are.
ACTIONS_ZH: list[tuple[str, str]] = [
    (r"(⚠ |✓ )?not started: fix the problems listed", r"\1未开始：请先修正列出的问题"),
    (r"(⚠ |✓ )?not started", r"\1未开始"),
    (r"(⚠ |✓ )?started (\S+)", r"\1已启动 \2"),
    (r"(⚠ |✓ )?already started as (\S+)", r"\1已作为 \2 启动"),
    (r"(⚠ |✓ )?queued (\S+) \(#(\d+) in the (\w+) queue; it starts when (.+) frees the device\)",
     r"\1\2 已排队（\4 队列第 \3 位；\5 释放设备后启动）"),
    (r"(⚠ |✓ )?queued (\S+) \(in the queue; it starts when (.+) frees the device\)", r"\1\2 已排队（\3 释放设备后启动）"),
    (r"(⚠ |✓ )?(queued to resume|resumed) (\S+) from (\S+)", None),
    (r"(\S+): stopping \(saving a checkpoint first\)", r"\1：正在停止（先保存检查点）"),
    (r"(\S+): stopping now", r"\1：正在立即停止"),
    (r"(\S+): a stop is already under way", r"\1：已在停止中"),
    (r"cancelled (\S+) \(it never started\)", r"已取消 \1（尚未启动）"),
    (r"moved (\S+) (up|down) to place (\d+) of your queued runs", None),
    (r"(\S+) is already (first|last) in the queue", None),
    (r"⚠ select exactly one queued run", "⚠ 请只选择一个排队中的运行"),
    (r"⚠ no run selected", "⚠ 未选择运行"),
]
_WORDS_ZH = {"queued to resume": "已排队等待恢复", "resumed": "已恢复", "up": "上移", "down": "下移",
             "first": "第一个", "last": "最后一个"}


def _action_zh(match: Any, pattern: str) -> str:
    g = match.groups()
    if pattern.startswith(r"(⚠ |✓ )?(queued to resume"):
        return f"{g[0] or ''}{_WORDS_ZH[g[1]]} {g[2]}（自 {g[3]}）"
    if pattern.startswith("moved"):
        return f"{g[0]} 已{_WORDS_ZH[g[1]]}到你的排队运行中的第 {g[2]} 位"
    return f"{g[0]} 已是队列中的{_WORDS_ZH[g[1]]}"


def action_text(message: str, lang: str) -> str:
    """A message that answers an action, in `lang`; the part that says what changed from the run a
    new one was made from is matched on its own. Unmatched parts stay as written."""
    if lang != "zh" or not message:
        return message
    import re

    parts = []
    for part in re.split(r"; (?=made from |forked from )", message):
        for pattern, zh in ACTIONS_ZH:
            match = re.fullmatch(pattern, part)
            if match:
                part = match.expand(zh) if zh is not None else _action_zh(match, pattern)
                for device, shown in (("cpu", "CPU"), ("gpu", "GPU"), ("ascend", "昇腾")):
                    part = part.replace(f"（{device} 队列", f"（{shown} 队列")
                break
        else:
            part = _by_patterns(part, lang, MADE_FROM_ZH).replace("no setting changed", "未改动任何设置")
        parts.append(part)
    return "；".join(parts)


MADE_FROM_ZH: list[tuple[str, str]] = [
    (r"forked from (\S+) at step (\d+): (.*)", r"分叉自 \1 第 \2 步：\3"),
    (r"made from (\S+): (.*)", r"基于 \1：\2"),
]


def _by_patterns(sentence: str, lang: str, patterns: list[tuple[str, str]]) -> str:
    if lang != "zh":
        return sentence
    import re

    for pattern, zh in patterns:
        if re.fullmatch(pattern, sentence):
            return re.sub(pattern, zh, sentence)
    return sentence


def memory_note(note: str, lang: str) -> str:
    """One of core.memory's notes in `lang` (English when no pattern matches)."""
    return _by_patterns(note, lang, MEMORY_NOTES_ZH)


def reason_text(reason: str, lang: str) -> str:
    """Why a run ended, in `lang` (an error's own text unchanged)."""
    return _by_patterns(reason, lang, REASONS_ZH)


# Help lines of the widgets that stand for a config field in another shape, or for none.
TEXTS.update({
    "help.model.picker": ("folders under --models-dir; ⚠ marks one that cannot be loaded (reason in the table)",
                          "--models-dir 下的目录；⚠ 表示无法加载（原因见模型目录表）"),
    "help.lora.targets": ("linear layers of this model's transformer blocks", "该模型 Transformer 块中的线性层"),
    "help.lora.target_regex": (r"full match on dotted names, e.g. .*\.(q_proj|v_proj)",
                               r"对带点的模块名做完整匹配，例如 .*\.(q_proj|v_proj)"),
    "help.train.length": ("optimizer steps, or passes over the data", "优化器步数，或遍历数据的轮数"),
    "help.parallel.workers": ("msrun workers on this machine", "本机上的 msrun worker 数"),
})


def _field_help() -> None:
    from app.form import fields  # the form's own fields (core.config's help; MindSpore-free)

    for key, info in fields().items():
        if info.help:
            TEXTS[f"help.{key}"] = (info.help, FIELD_HELP_ZH.get(key, ""))


_field_help()

def text(key: str, lang: str) -> str:
    """The text of `key` in `lang` (English when no translation exists, the key when neither does)."""
    pair = TEXTS.get(key)
    if pair is None:
        return key
    return pair[1] if lang == "zh" and pair[1] else pair[0]


class Labels:
    """The widgets whose text depends on the language, and which property holds that text."""

    def __init__(self, lang: str = "en"):
        self.lang = lang if lang in LANGS else "en"
        self._bindings: list[tuple[Any, dict[str, str]]] = []
        self.toggle: Any = None  # the lang-toggle widget, an input of callbacks that write text

    def __call__(self, key: str) -> str:
        return text(key, self.lang)

    def bind(self, component: Any, **props: Any) -> Any:
        """Show the text of each `prop=key` on `component` now, and again after a language switch.
        E.g. `bind(gr.Number(), label="field.train.learning_rate")`; buttons use `value=`. A list
        of keys is a list of texts (a table's `headers`); a list of (key, value) pairs is a
        choice list (`choices`: the label in the language, the value unchanged)."""
        for prop, key in props.items():
            for k in _keys(key):
                if k not in TEXTS:
                    raise KeyError(f"no text for {k!r} in app.i18n.TEXTS")
            setattr(component, prop, _shown(key, self.lang))
        self._bindings.append((component, dict(props)))
        return component

    @property
    def components(self) -> list[Any]:
        return [component for component, _ in self._bindings]

    def values(self, lang: str) -> list[dict[str, str]]:
        """For each bound widget, its texts in `lang` ({prop: text}); plain data for tests."""
        return [{prop: _shown(key, lang) for prop, key in props.items()} for _, props in self._bindings]


def _keys(key: Any) -> list[str]:
    if isinstance(key, str):
        return [key]
    return [k if isinstance(k, str) else k[0] for k in key]


def _shown(key: Any, lang: str) -> Any:
    if isinstance(key, str):
        return text(key, lang)
    return [text(k, lang) if isinstance(k, str) else (text(k[0], lang), k[1]) for k in key]
