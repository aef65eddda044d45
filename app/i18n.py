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
    "sec.training": ("Training settings", "训练参数"), "sec.data": ("Dataset", "数据集"),
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

    def bind(self, component: Any, **props: str) -> Any:
        """Show the text of each `prop=key` on `component` now, and again after a language switch.
        E.g. `bind(gr.Number(), label="field.train.learning_rate")`; buttons use `value=`."""
        for prop, key in props.items():
            if key not in TEXTS:
                raise KeyError(f"no text for {key!r} in app.i18n.TEXTS")
            setattr(component, prop, text(key, self.lang))
        self._bindings.append((component, dict(props)))
        return component

    @property
    def components(self) -> list[Any]:
        return [component for component, _ in self._bindings]

    def values(self, lang: str) -> list[dict[str, str]]:
        """For each bound widget, its texts in `lang` ({prop: text}); plain data for tests."""
        return [{prop: text(key, lang) for prop, key in props.items()} for _, props in self._bindings]
