"""Labels in English and Simplified Chinese, switchable in the page.

Gradio's own `gr.I18n` picks the language from the browser's locale; mindtune users often browse
in English but read Chinese more easily (or the other way round), so the page has a toggle
(`lang-toggle`). Every widget that shows text is registered with `Labels.bind`, and switching the
language sends one `gr.update` per widget with its label (or value, info, ...) in the new language.
"""
from __future__ import annotations

from typing import Any

from core.spec.places import Where
from core.spec.messages import CATALOGUE, LINE_PARAMS, MESSAGE_PARAMS, Message

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
    "sec.eval": ("Evaluation and early stopping", "评估与早停"),
    "sec.objective": ("Objective: SFT or preference tuning (DPO, SimPO, ORPO, KTO)",
                      "训练目标：SFT 或偏好调优（DPO、SimPO、ORPO、KTO）"), "sec.launch": ("Before launch", "启动前检查"),
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
    "launch.command": ("The command that will run (a Slurm run: its batch script, kept in the run folder as job.sbatch)",
                       "将要执行的命令（Slurm 运行：其批处理脚本，保存在运行目录中的 job.sbatch）"),
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
    "config.saved_file": ("The saved config (download)", "已保存的配置（下载）"),
    "global_batch": ("Global batch", "全局批大小"),
    "ref.new_from": ("New run from", "基于此运行新建："), "ref.fork": ("Fork of", "分叉自："),
    "ref.clear": ("Start fresh instead", "改为全新开始"),
    "ref.changes": ("Changes from that run:", "与该运行相比的改动："),
    "ref.no_changes": ("No setting differs from that run yet.", "尚未改动任何设置。"),
    "ref.was": ("was", "原为"),
    # form fields
    "field.run.name": ("Run name (optional prefix)", "运行名称（可选前缀）"),
    "field.run.seed": ("Seed", "随机种子"),
    "field.launch.nodes": ("Nodes", "节点数"), "field.launch.workers_per_node": ("Workers per node", "每节点 worker 数"),
    "field.launch.account": ("Slurm account (empty: your default)", "Slurm 账户（留空则用默认）"),
    "field.launch.time_limit": ("Time limit", "时间限制"),
    "field.launch.sbatch_options": ("Extra sbatch options", "额外的 sbatch 选项"),
    "field.launch.env": ("Environment on every node", "每个节点上的环境变量"),
    "field.model.path": ("Base checkpoint", "基座检查点"),
    "field.model.dtype": ("Parameter dtype", "参数存储精度"),
    "field.method": ("Method", "微调方法"),
    "field.lora.rank": ("LoRA rank r", "LoRA 秩 r"), "field.lora.alpha": ("LoRA alpha", "LoRA alpha"),
    "field.lora.dropout": ("LoRA dropout", "LoRA dropout"),
    "field.lora.target_names": ("Target modules", "目标模块"),
    "field.lora.target_regex": ("…or a regular expression (overrides the boxes)", "……或正则表达式（优先于勾选）"),
    "field.data.train_file": ("Training file", "训练文件"),
    "field.data.validation_file": ("Validation file (empty: split off train)", "验证文件（留空则从训练集划分）"),
    "field.data.test_file": ("Test file (answer scoring: EM, BLEU, ROUGE)", "测试文件（回答评分：精确匹配、BLEU、ROUGE）"),
    "field.data.format": ("Record format", "数据格式"),
    "field.data.validation_fraction": ("Validation share of train", "验证集比例"),
    "field.data.max_seq_len": ("Max sequence length", "最大序列长度"),
    "field.data.mask_prompt": ("Train on the answer only (mask the prompt)", "只训练回答（屏蔽提示部分）"),
    "field.data.columns": ("Column mapping (format field: your column, ...)", "列映射（格式字段: 数据列, ...）"),
    "field.data.train_on": ("Assistant turns trained", "参与训练的助手轮次"),
    "field.data.packing": ("Pack samples into rows", "样本打包（多条样本共用一行）"),
    "field.data.group_by_length": ("Group batches by length", "按长度分组成批"),
    "field.data.dataset": ("Catalogue datasets (dataset_info.json names)", "目录中的数据集（dataset_info.json 中的名称）"),
    "field.data.overlong": ("Records over max length", "超长记录的处理"),
    "field.data.text_split": ("Text files: one record per", "文本文件：每条记录为"),
    "field.data.media": ("Images, audio, video", "图像、音频、视频"),
    "field.train.length_unit": ("Train for", "训练长度单位"),
    "field.train.length": ("Steps or epochs", "步数或轮数"),
    "field.train.micro_batch_size": ("Micro batch (per worker)", "微批大小（每个 worker）"),
    "field.train.grad_accum_steps": ("Gradient accumulation", "梯度累积步数"),
    "field.train.learning_rate": ("Learning rate", "学习率"),
    "field.train.weight_decay": ("Weight decay", "权重衰减"),
    "field.train.schedule": ("Schedule", "学习率调度"),
    "field.train.objective": ("Objective", "训练目标"),
    "field.preference.beta": ("beta", "beta"),
    "field.preference.label_smoothing": ("Label smoothing", "标签平滑"),
    "field.preference.loss_type": ("DPO loss", "DPO 损失"),
    "field.preference.simpo_gamma": ("SimPO gamma (margin)", "SimPO gamma（间隔）"),
    "field.preference.orpo_lambda": ("ORPO lambda", "ORPO lambda"),
    "field.preference.kto_desirable_weight": ("KTO desirable weight", "KTO 可取回答权重"),
    "field.preference.kto_undesirable_weight": ("KTO undesirable weight", "KTO 不可取回答权重"),
    "field.preference.reference": ("Reference model", "参考模型"),
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
    "field.parallel.optimizer_shard": ("Shard optimizer state (not supported)", "优化器状态切分（不支持）"),
    "field.parallel.device": ("Device", "设备"),
    "field.parallel.hang_timeout_s": ("Hang timeout (s)", "无进展超时（秒）"),
    "field.eval.ema_alpha": ("EMA weight of the newest value", "EMA 新值权重"),
    "field.eval.downstream": ("Score answers on the test set", "在测试集上评分"),
    "field.eval.max_new_tokens": ("Tokens generated per answer", "每个回答生成 token 数"),
    "field.eval.max_eval_samples": ("Max eval samples (0: all)", "最多评估样本（0 为全部）"),
    "field.eval.baseline": ("Evaluate the base model first", "先评估基座模型"),
    "field.eval.baseline_max_tokens": ("Baseline token cap (empty: all)", "基线评估 token 上限（留空为全部）"),
    "field.train.profile_steps": ("Profile steps (start,end)", "性能分析步（起,止）"),
    "field.early_stopping.enabled": ("Early stopping", "早停"),
    "field.early_stopping.monitor": ("Monitored metric", "监控指标"),
    "field.early_stopping.patience": ("Patience (evaluations)", "耐心值（评估次数）"),
    "field.early_stopping.min_delta": ("Min improvement", "最小改进量"),
    "field.eval.downstream_every_eval": ("Score answers at every evaluation", "每次评估都给回答评分"),
    "field.tracking": ("Mirror metrics to trackers", "同步指标到实验跟踪工具"),
    "field.mlflow.tracking_uri": ("MLflow tracking URI (empty: $MLFLOW_TRACKING_URI or runs/mlflow.db)",
                                  "MLflow 跟踪 URI（留空：$MLFLOW_TRACKING_URI 或 runs/mlflow.db）"),
    "field.mlflow.experiment": ("MLflow experiment", "MLflow 实验名"),
    "field.swanlab.mode": ("SwanLab mode", "SwanLab 模式"),
    "field.swanlab.project": ("SwanLab project", "SwanLab 项目名"),
    "sec.tracking": ("Tracking (TensorBoard, MLflow, SwanLab)", "实验跟踪（TensorBoard、MLflow、SwanLab）"),
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
    "mon.profile_head": ("steps {steps}: {ms} ms of kernels ({phases})", "第 {steps} 步：算子共 {ms} ms（{phases}）"),
    "mon.profile_col.operator": ("operator", "算子"), "mon.profile_col.phase": ("phase", "阶段"),
    "mon.profile_col.ms": ("ms", "ms"), "mon.profile_col.share": ("share", "占比"),
    "mon.profile_col.calls": ("calls", "调用次数"),
    "mon.profile_phase.backward": ("backward", "反向"), "mon.profile_phase.forward + update": ("forward + update", "前向 + 更新"),
    "mon.profile_trace": ("⬇ profiler trace (trace_view.json)", "⬇ 性能分析 trace（trace_view.json）"),
    "mon.no_run": ("No run yet: start one in the Train tab.", "还没有运行：请在“训练”页开始一个。"),
    "chart.loss": ("Training loss", "训练损失"), "chart.val_loss": ("Validation loss", "验证损失"),
    "chart.val_ppl": ("Validation perplexity", "验证困惑度"),
    "chart.reward_accuracy": ("Reward accuracy (preference pairs)", "奖励准确率（偏好对）"),
    "chart.reward_margin": ("Reward margin and rewards", "奖励间隔与奖励"),
    "chart.logps": ("Log-probabilities of the chosen and rejected answers", "chosen 与 rejected 回答的对数概率"),
    "chart.memory": ("Peak memory (MB per worker)", "峰值内存（每 worker，MB）"),
    "chart.tokens_per_s": ("Tokens per second", "每秒 token 数"), "chart.lr": ("Learning rate", "学习率"),
    "chart.grad_norm": ("Gradient norm", "梯度范数"), "chart.loss_scale": ("Loss scale", "损失缩放值"),
    "chart.answers": ("Answer scores on the test set (×100)", "测试集回答得分（×100）"),
    "download.peft": ("PEFT adapter (zip)", "PEFT 适配器（zip）"),
    "download.merged": ("Merged Hugging Face model (zip)", "合并后的 Hugging Face 模型（zip）"),
    "download.mindspore": ("MindSpore checkpoint (zip)", "MindSpore 检查点（zip）"),
    # issue 39: GGUF for llama.cpp and Ollama, each offered with what llama.cpp's reload of it found
    "download.gguf-f16": ("GGUF f16 (llama.cpp)", "GGUF f16（llama.cpp）"),
    "download.gguf-q4_k_m": ("GGUF q4_k_m (llama.cpp)", "GGUF q4_k_m（llama.cpp）"),
    "download.ollama": ("Ollama (q4_k_m GGUF + Modelfile, zip)", "Ollama（q4_k_m GGUF + 'Modelfile'，zip）"),
    "download.gguf-lora": ("LoRA adapter GGUF (llama.cpp)", "LoRA 适配器 GGUF（llama.cpp）"),
    "mon.serve": ("Serve (OpenAI-compatible endpoint)", "提供服务（'OpenAI' 兼容端点）"),
    "mon.serve_stop": ("Stop serving", "停止提供服务"),
    "mon.serve_loading": ("loading the model", "正在加载模型"),
    "download.check_exact": ("reloaded with llama.cpp: {equal}/{prompts} prompts answer as trained, logits within "
                             "{diff}, perplexity {ppl}",
                             "已用 llama.cpp 重新加载：{equal}/{prompts} 个提示的回答与训练后一致，logits 相差不超过 {diff}，"
                             "困惑度 {ppl}"),
    "download.check_ppl": ("reloaded with llama.cpp: {equal}/{prompts} prompts answer as trained; perplexity "
                           "{before} → {after} at {quant}",
                           "已用 llama.cpp 重新加载：{equal}/{prompts} 个提示的回答与训练后一致；{quant} 的困惑度 "
                           "{before} → {after}"),
    "download.where": ("{which} step {step}", "{which}（第 {step} 步）"),
    "download.failed": (" (last try failed: {error})", "（上次失败：{error}）"),
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
    "failure.cluster": ("The Slurm job ended without the run's own account: its time limit, a node failure, or a job that died (see Slurm's words below).",
                        "Slurm 作业在运行给出说明前结束：时间限制、节点故障或作业异常终止（见下方 Slurm 的说明）。"),
    "failure.reason": ("Reason", "原因"),
    "state.queued": ("queued", "排队中"), "state.starting": ("starting", "启动中"), "state.running": ("running", "运行中"),
    "state.stopping": ("stopping", "停止中"), "state.finished": ("finished", "已完成"),
    "state.early_stopped": ("early stopped", "已早停"), "state.stopped": ("stopped", "已停止"),
    "state.failed": ("failed", "失败"), "state.unknown": ("unknown", "未知"),
    "state.cancelled": ("cancelled", "已取消"),
    # runs tab
    "runs.table": ("All runs (including those started from a shell)", "全部运行（包括命令行启动的）"),
    "runs.select": ("Select runs to compare, resume or delete", "选择要比较、恢复或删除的运行"),
    "runs.metric": ("Curve", "曲线"), "runs.overlay": ("Curves of the selected runs", "所选运行的曲线"),
    "runs.diff": ("Configs side by side (differences highlighted)", "配置对比（差异高亮）"),
    "runs.only_diff": ("Only settings that differ", "只显示不同的设置"),
    "runs.log_scale": ("Log scale", "对数坐标"),
    "runs.resume": ("Resume selected (stopped or failed)", "恢复所选（已停止或失败）"),
    "runs.resume_here": ("Resume on this machine (a cluster run, same workers)", "在本机恢复（集群运行，工作进程数不变）"),
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
    "try.checkpoint_choice": ("{run} · {which} ({state})", "{run} · {which}（{state}）"),
    "try.pointer.best": ("best", "最佳"), "try.pointer.last": ("last", "最新"),
    "try.prompt": ("Prompt", "提示词"), "try.chat": ("Use the chat template", "使用对话模板"),
    "try.max_new_tokens": ("Max new tokens", "最多生成 token 数"), "try.generate": ("Generate both", "同时生成"),
    "try.base_out": ("Base model says", "基座模型输出"), "try.tuned_out": ("Fine-tuned says", "微调模型输出"),
}


# Help lines under the form's fields: English is the field's own help in core.spec.config (one source
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
    "data.train_file": "训练数据：文件、数据集目录、目录#划分或文件列表",
    "data.validation_file": "验证数据（文件、目录或文件列表）；留空则从训练集划分",
    "data.test_file": "用于下游评测的留出测试数据",
    "data.format": "记录格式；auto 自动识别",
    "data.columns": "数据集中对应格式字段的列名，例如 {instruction: question}",
    "data.validation_fraction": "未指定验证文件时从训练集留出的比例",
    "data.max_seq_len": "每条样本的 token 数；更长的见 overlong",
    "data.dataset": "train_file 中 dataset_info.json 目录里的数据集，按名称选择",
    "data.overlong": "超过 max_seq_len 的记录：截断（提示与回答按比例保留开头）、跳过，或全部报错",
    "data.text_split": ".txt 文件：每行一条记录、每个空行分隔的段落一条，或整个文件一条",
    "data.media": "含图像、音频或视频的记录：拒绝，或丢弃媒体及其占位符",
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
    "parallel.optimizer_shard": "在 worker 之间切分优化器状态：不支持（必须保持 false；见指南的设备一节）",
    "parallel.device": "MindSpore 设备类型",
    "eval.ema_alpha": "EMA 平滑指标中最新值的权重",
    "eval.downstream": "在测试集上生成并给回答评分（精确匹配、BLEU-4、ROUGE-1/2/L），训练前后各一次",
    "eval.max_new_tokens": "下游评测的生成长度",
    "eval.max_eval_samples": "评估样本上限；留空则全部",
    "train.router_aux_loss": "混合专家模型：加入路由器的负载均衡损失",
    "train.router_aux_loss_coef": "其权重；留空则用模型 config.json 中的 router_aux_loss_coef",
    "parallel.hang_timeout_s": "某个 worker 这么长时间（秒）没有步数进展时，判定运行失败",
    "eval.baseline": "在第一步之前评估基础模型（监控页的参考线）；false 则立即开始训练",
    "eval.baseline_max_tokens": "基线评估读取的词元上限（整批，至少一批）；留空则读取整个验证集",
    "train.profile_steps": "[起, 止]：在 rank 0 上对这些步运行 MindSpore 性能分析器（runs/<id>/profile/；监控页显示耗时最多的算子）",
    "early_stopping.enabled": "监控指标不再改进时提前停止",
    "early_stopping.monitor": "监控的指标：验证损失或困惑度（越低越好），测试集回答的得分，偏好目标或奖励模型的 reward_accuracy，或 grpo 的 val_reward（越高越好）",
    "train.objective": ("sft：对回答做下一词元损失；dpo/simpo/orpo：chosen 与 rejected 成对比较；kto：标注为可取或不可取的回答"
                        "（设置见 preference: 部分）；grpo：为每个提示词采样多个补全并由奖励函数打分（grpo: 部分）；"
                        "reward：在 chosen 与 rejected 成对数据上训练奖励模型（序列得分）"),
    "grpo.num_generations": "每个提示词采样的补全数（比较奖励的一组）",
    "grpo.max_prompt_len": "保留的提示词 token 数：更长的提示词从左侧截断（data.overlong truncate）、跳过（skip）或拒绝（error）",
    "grpo.max_new_tokens": "一个补全最多的 token 数",
    "grpo.temperature": "采样的温度",
    "grpo.top_p": "采样的核采样阈值 top_p",
    "grpo.top_k": "只在概率最高的 k 个 token 中采样（0：全部）",
    "grpo.beta": "相对参考模型的 KL 项权重（0：不加，与 TRL 默认相同）",
    "grpo.epsilon": "重要性比率的裁剪范围（下侧；epsilon_high 为空时也是上侧）",
    "grpo.epsilon_high": "上侧裁剪范围（DAPO 的 clip-higher）；留空：等于 epsilon",
    "grpo.loss_type": "token 损失的平均方式：grpo（先按补全再按补全数）、bnpo（按微批 token）、dr_grpo（按批大小 × max_new_tokens）、dapo（按整步 token）",
    "grpo.scale_rewards": "优势值除以组内、批内奖励的标准差，或不除",
    "grpo.importance_sampling_level": "每个 token 一个重要性比率（GRPO）或每个补全一个（GSPO）",
    "grpo.num_iterations": "每批采样结果的更新次数；大于 1 时保存采样策略的对数概率作为旧策略",
    "grpo.mask_truncated_completions": "在 max_new_tokens 处被截断的补全不计损失",
    "grpo.rewards": "奖励函数及其权重，例如 [{function: exact_match, column: answer}, {function: regex, pattern: '^\\d+$', weight: 0.2}]",
    "grpo.reward_timeout_s": "奖励函数处理一批超过这么多秒时，运行失败",
    "grpo.eval_temperature": "验证补全的温度（0：贪心，同样的权重得到同样的补全）",
    "preference.beta": "dpo/kto：相对参考模型对数比的权重；simpo：奖励缩放；orpo 不用",
    "preference.label_smoothing": "dpo/simpo（sigmoid 损失）：假定标签被翻转的比例",
    "preference.loss_type": "dpo：sigmoid（Rafailov 等）或 ipo（对长度平均的对数比做平方损失）",
    "preference.simpo_gamma": "simpo：目标奖励间隔 gamma",
    "preference.orpo_lambda": "orpo：加在 chosen 回答 NLL 上的赔率比项的权重",
    "preference.kto_desirable_weight": "kto：可取回答损失的权重",
    "preference.kto_undesirable_weight": "kto：不可取回答损失的权重",
    "preference.reference": "dpo/kto 参考模型：adapter_off（LoRA：关闭适配器的基座，无第二份权重），frozen_copy（起始权重的冻结副本；全参微调），auto 按方法选择",
    "early_stopping.patience": "停止前允许的无改进评估次数",
    "launch.backend": "local 在本机运行；slurm 提交批处理作业",
    "launch.nodes": "Slurm 节点数（每个节点一个 msrun）；节点数 x 每节点 worker 数 = parallel.data_parallel",
    "launch.workers_per_node": "msrun 在每个 Slurm 节点上启动的 worker 数",
    "launch.partition": "Slurm 分区；留空则用集群默认分区",
    "launch.account": "计费的 Slurm 账户；留空则用你的默认账户",
    "launch.time_limit": "Slurm 时间限制（30、1:30:00、2-12 等）；留空则用分区的限制",
    "launch.sbatch_options": "额外的 sbatch 选项，每项一个 '--名称=值'",
    "launch.env": "在每个节点上为作业设置的环境变量",
    "early_stopping.min_delta": "算作改进的最小变化量（损失下降、得分上升）",
    "eval.downstream_every_eval": "每次评估时也给生成的回答评分（BLEU/ROUGE 曲线；早停监控回答得分时自动开启）",
    "tracking": ("同步运行指标的实验跟踪工具（可选安装包：requirements-tracking.txt）：tensorboard 写入 "
                 "<run>/tracking/tensorboard（tensorboard --logdir runs/），mlflow 写入 mlflow.tracking_uri，"
                 "swanlab（offline）写入 <run>/tracking/swanlab（swanlab watch）"),
    "mlflow.tracking_uri": "MLflow 跟踪 URI（http://host:5000、sqlite:///file.db）；留空：$MLFLOW_TRACKING_URI，否则 sqlite:///<run.runs_dir>/mlflow.db",
    "mlflow.experiment": "运行记录所属的 MLflow 实验",
    "swanlab.mode": "offline/local：文件保存在运行目录（swanlab watch 可查看）；cloud：SwanLab 服务器（先 swanlab login）",
    "swanlab.project": "运行记录所属的 SwanLab 项目",
}
# Read-outs the callbacks write (tables, notes, the Train tab's "Before launch" column).
TEXTS.update({
    # cluster runs (app/runs/cluster.py)
    "where": ("Where to run", "运行位置"),
    "where.local": ("This machine", "本机"),
    "where.partition": ("Slurm partition {name} ({n} nodes)", "Slurm 分区 {name}（{n} 个节点）"),
    "where.partition_unknown": ("Slurm partition {name} (not offered now)", "Slurm 分区 {name}（当前不可用）"),
    "where.refused": ("Slurm not offered: {why}", "未提供 Slurm：{why}"),
    "sec.slurm": ("Slurm job settings: nodes, workers, account, time limit, sbatch options, environment",
                  "Slurm 作业设置：节点、worker、账户、时间限制、sbatch 选项、环境变量"),
    "cluster.job": ("Slurm job", "Slurm 作业"), "cluster.partition": ("partition", "分区"),
    "cluster.nodes": ("nodes", "节点"), "cluster.no_nodes": ("not allocated yet", "尚未分配"),
    "cluster.never_ran": ("none (it never ran)", "无（未曾运行）"),
    "cluster.state": ("Slurm state", "Slurm 状态"), "cluster.reason": ("Pending because", "等待原因"),
    "cluster.queue_item": ("Slurm job {job} on {partition}", "Slurm 作业 {job}（分区 {partition}）"),
    "cluster.rank_on": ("rank {rank} on node {node}", "节点 {node} 上的 rank {rank}"),
    "phase.pending": ("pending in Slurm's queue (the reason is above)", "在 Slurm 队列中等待（原因见上方）"),
    "runs.slurm_queue": ("**Slurm queue**: cluster runs pending in Slurm, in Slurm's order",
                         "**Slurm 队列**：在 Slurm 中等待的集群运行（按 Slurm 的顺序）"),
    "slurm.reason.Resources": ("waiting for nodes to be free", "等待节点空闲"),
    "slurm.reason.Priority": ("jobs of higher priority are ahead", "前面有优先级更高的作业"),
    "slurm.reason.QOSMaxNodePerJobLimit": ("more nodes than the QOS allows one job", "节点数超过 QOS 对单个作业的限制"),
    "slurm.reason.PartitionNodeLimit": ("more nodes than the partition allows", "节点数超过分区上限"),
    "slurm.reason.PartitionTimeLimit": ("a longer time limit than the partition allows", "时间限制超过分区上限"),
    "slurm.reason.JobHeldUser": ("held by its user (scontrol release to let it run)", "被用户挂起（用 scontrol release 放行）"),
    "slurm.reason.JobHeldAdmin": ("held by an administrator", "被管理员挂起"),
    "slurm.reason.ReqNodeNotAvail": ("a node it needs is down or reserved", "所需节点不可用或已被预留"),
    "slurm.reason.Dependency": ("waiting for another job to end", "等待其他作业结束"),
    "slurm.reason.BeginTime": ("its start time has not come yet", "尚未到开始时间"),
    "slurm.reason.AssocGrpNodeLimit": ("the account's node limit is reached", "账户的节点数限制已用满"),
    "slurm.end.CANCELLED": ("Cancelled in Slurm (scancel): no rank crashed.", "已在 Slurm 中取消（scancel）：没有 rank 崩溃。"),
    "slurm.end.TIMEOUT": ("Slurm ended the job at its time limit: resume it from its last checkpoint, with a longer limit.",
                          "作业达到时间限制，被 Slurm 结束：可提高时间限制后从最后的检查点恢复。"),
    "slurm.end.NODE_FAIL": ("A node of the job failed: Slurm ended the job; resume it from its last checkpoint.",
                            "作业的某个节点故障，Slurm 结束了作业：可从最后的检查点恢复。"),
    "slurm.end.PREEMPTED": ("Slurm preempted the job for another one; resume it from its last checkpoint.",
                            "作业被 Slurm 抢占：可从最后的检查点恢复。"),
    "slurm.end.OUT_OF_MEMORY": ("Slurm killed the job: out of memory on a node.", "Slurm 结束了作业：某节点内存不足。"),
    "slurm.end.BOOT_FAIL": ("Slurm could not boot a node of the job.", "Slurm 无法启动作业的某个节点。"),
    "slurm.end.DEADLINE": ("Slurm ended the job at its deadline.", "作业到达截止时间，被 Slurm 结束。"),
    "lang.toggle": ("Language · 语言", "语言 · Language"),
    "unit.steps": ("steps", "步数"), "unit.epochs": ("epochs", "轮数"),
    # model folders table (app.data.catalog.ROW_HEADERS)
    "model.col.folder": ("folder", "目录"), "model.col.architecture": ("architecture", "架构"),
    "model.col.parameters": ("parameters", "参数量"), "model.col.stored dtype": ("stored dtype", "存储精度"),
    "model.col.context": ("context", "上下文长度"), "model.col.vocab": ("vocab", "词表大小"),
    "model.col.status": ("status", "状态"),
    "model.label": ("{name} · {arch} · {params} params · {dtype} · ctx {ctx}", "{name} · {arch} · 参数 {params} · {dtype} · 上下文 {ctx}"),
    "model.not_loadable": ("⚠ {name}: not loadable", "⚠ {name}：无法加载"), "model.ok": ("ok", "可用"), "model.active": ("{active} active of {total}", "激活 {active} / 共 {total}"),
    # runs table (app.tabs.runs_callbacks.TABLE_HEADERS)
    "runs.col.run": ("run", "运行"), "runs.col.state": ("state", "状态"), "runs.col.step": ("step", "步数"),
    "runs.col.best val ppl": ("best val ppl", "最佳验证困惑度"), "runs.col.tokens/s": ("tokens/s", "token/秒"),
    "runs.col.peak MB": ("peak MB", "峰值内存 MB"), "runs.col.duration": ("duration", "用时"),
    "runs.col.reason": ("reason", "原因"), "runs.col.parent": ("parent", "来源运行"),
    "runs.parent_step": ("{run} · step {step}", "{run} · 第 {step} 步"),
    "runs.col.EM %": ("EM %", "精确匹配 %"), "runs.col.BLEU": ("BLEU", "BLEU"), "runs.col.ROUGE-1": ("ROUGE-1", "ROUGE-1"),
    "runs.col.ROUGE-2": ("ROUGE-2", "ROUGE-2"), "runs.col.ROUGE-L": ("ROUGE-L", "ROUGE-L"),
    "runs.queue_empty": ("no run is waiting: Start launches at once while a device is free",
                         "没有排队的运行：设备空闲时点击“开始训练”会立即启动"),
    "runs.queued_n": ("queued #{n}", "排队中 #{n}"),
    "runs.pending_n": ("queued #{n} in Slurm", "Slurm 排队中 #{n}"),
    # global batch: 'Global batch 16 = micro 8 × accumulation 2 × workers 1'
    "batch.parts": ("= micro {micro} × accumulation {accum} × workers {workers}",
                    "= 微批 {micro} × 梯度累积 {accum} × worker {workers}"),
    # memory estimate (app.tabs.train_callbacks.estimate_table)
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
    "mem.seq_packed": ("sequence length {seq}: packed rows of max_seq_len {max}", "序列长度 {seq}：max_seq_len {max} 的打包行"),
    "mem.seq_unreadable": ("sequence length {seq} (max_seq_len; data not readable: {err})",
                           "序列长度 {seq}（max_seq_len；数据无法读取：{err}）"),
    "mem.seq_grouped": ("; length-grouped batches are shorter", "；按长度分组的批更短"),
    "mem.invalid": ("invalid config", "配置无效"),
    # devices (app.runs.devices)
    "device.cpu": ("{n} CPU cores; fp32 (amp O0) is fastest here, fp16 works but is slower, bf16 has no CPU kernels",
                   "{n} 个 CPU 核；这里 fp32（amp O0）最快，fp16 可用但更慢，bf16 没有 CPU 算子"),
    "device.found": ("{name} ({n} found)", "{name}（找到 {n} 个）"),
    "device.not_found": ("{name} (not found)", "{name}（未找到）"),
    "device.dtype_not_on": ("{dtype} (not on {device})", "{dtype}（{device} 不支持）"),
    "device.gpu": ("{n} NVIDIA GPU(s) found", "找到 {n} 块 NVIDIA GPU"),
    "device.no_gpu": ("no NVIDIA GPU found (nvidia-smi)", "未找到 NVIDIA GPU（nvidia-smi）"),
    "device.ascend": ("{n} Ascend NPU(s) found", "找到 {n} 块昇腾 NPU"),
    "device.no_ascend": ("no Ascend NPU found (/dev/davinci*)", "未找到昇腾 NPU（/dev/davinci*）"),
})
# The dataset's preview, histogram and statistics (app.data.data_preview, app.tabs.data_callbacks).
TEXTS.update({
    "dp.legend_masked": ("prompt, system and tool turns (masked, no loss)", "提示、系统和工具轮次（屏蔽，不计损失）"),
    "dp.legend_trained": ("assistant turns (trained)", "助手轮次（参与训练）"),
    "dp.cut": ("… {n} tokens cut by max_seq_len", "… {n} 个 token 被 max_seq_len 截掉"),
    "dp.mapped": ("mapped by data.columns", "由 data.columns 映射"), "dp.absent": ("absent", "缺失"),
    "dp.fields": ("fields in the data:", "数据中的字段："),
    "dp.ignored": ("field {name} ignored in {count} of {total} records", "字段 {name} 在 {total} 条记录中有 {count} 条被忽略"),
    "dp.ignored_head": ("⚠ format {fmt} does not read these fields (map its own fields to them with data.columns, or "
                        "pick another format):",
                        "⚠ 格式 {fmt} 不读取这些字段（用 data.columns 映射，或换一种格式）："),
    "dp.format": ("format: {fmt} ({how}){split} · first {n} of {total} records · trained: {trained}",
                  "格式：{fmt}（{how}）{split} · 共 {total} 条记录中的前 {n} 条 · 训练：{trained}"),
    "dp.auto": ("auto-detected", "自动识别"), "dp.as_set": ("as set", "按设置"), "dp.split": (" · split {split}", " · 划分 {split}"),
    "dp.every_token": ("every token", "全部 token"),
    "dp.text_trained": ("every token of the raw text ({split}; documents over max_seq_len cut into {max}-token chunks)",
                        "原始文本的全部 token（{split}；超过 max_seq_len 的文档切成 {max} token 的块）"),
    "dp.split.line": ("one record per line", "每行一条记录"),
    "dp.split.paragraph": ("one record per blank-line paragraph", "每个空行分隔的段落一条记录"),
    "dp.split.document": ("one record per file", "每个文件一条记录"),
    "dp.skipped_sample": ("{where} · {full} tokens: skipped (over max_seq_len; data.overlong: skip)",
                          "{where} · {full} 个 token：已跳过（超过 max_seq_len；data.overlong: skip）"),
    "dp.truncated_sample": ("{where} · {full} tokens, cut to {kept} ({trained} trained; data.overlong: truncate)",
                            "{where} · {full} 个 token，截断为 {kept}（{trained} 个参与训练；data.overlong: truncate）"),
    "data.files_label": ("{name} ({parts})", "{name}（{parts}）"),
    "data.part.train": ("train", "训练"), "data.part.validation": ("validation", "验证"), "data.part.test": ("test", "测试"),
    "data.catalog_entry": ("{name} ({formatting}, {size})", "{name}（{formatting}，{size}）"),
    "data.catalog_samples": ("{n} samples", "抽样 {n} 条"),
    "data.catalog_broken": ("{name} (not loadable: {reason})", "{name}（无法加载：{reason}）"),
    "dp.all_assistant": ("all assistant", "全部助手轮次"),
    "dp.last": ("last", "最后一轮助手"),
    "dp.sample": ("{where} · {full} tokens, {trained} trained", "{where} · {full} 个 token，{trained} 个参与训练"),
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
    # preference objectives (train.objective dpo/simpo/orpo/kto): app.data.data_preview.preference_stats_markdown
    "dp.pst_pairs": ("- **{split}**: {n} pairs; chosen {c_mean} tokens on average (longest {c_max}), rejected "
                     "{r_mean} (longest {r_max}), prompt included",
                     "- **{split}**：{n} 对；chosen 平均 {c_mean} 个 token（最长 {c_max}），rejected 平均 {r_mean}"
                     "（最长 {r_max}），含提示"),
    "dp.pst_kto": ("- **{split}**: {n} KTO answers: {good} desirable ({c_mean} tokens on average, longest {c_max}), "
                   "{bad} undesirable ({r_mean}, longest {r_max}), prompt included",
                   "- **{split}**：{n} 条 KTO 回答：{good} 条可取（平均 {c_mean} 个 token，最长 {c_max}），"
                   "{bad} 条不可取（平均 {r_mean}，最长 {r_max}），含提示"),
    "dp.pst_split.train": ("train", "训练集"), "dp.pst_split.validation": ("validation", "验证集"),
    "dp.pst_dropped": ("- **identical pairs dropped** (no preference to learn): {train} train, {validation} validation",
                       "- **丢弃的相同对**（无偏好可学）：训练集 {train} 对，验证集 {validation} 对"),
    "dp.pst_truncated": ("- **over max_seq_len {max}** (data.overlong: {policy}): {train} train, {validation} "
                         "validation",
                         "- **超过 max_seq_len {max} 的记录**（data.overlong={policy}）：训练集 {train} 条，验证集 "
                         "{validation} 条"),
    "dp.pst_rows": ("- **rows**: {rows} per pair, {seq} tokens each ({objective}: train.micro_batch_size counts "
                    "pairs)",
                    "- **行**：每对 {rows} 行，每行 {seq} 个 token（{objective}：train.micro_batch_size 按对计）"),
    "dp.pst_rows_kto": ("- **rows**: one per answer, {seq} tokens each", "- **行**：每条回答一行，每行 {seq} 个 token"),
    "dp.saved": ("saved as `{file}`; {found}", "已保存为 `{file}`；{found}"),
    "dp.detected": ("format **{fmt}** (detected)", "格式 **{fmt}**（自动识别）"),
})
# Inside the charts (app.charts.svg_chart, drawn by app.tabs.monitor_callbacks and app.tabs.runs_callbacks).
TEXTS.update({
    "chart.step": ("step", "步数"), "chart.log": (" (log)", "（对数）"),
    "chart.empty": ("waiting for the first points…", "等待第一批数据点…"),
    "chart.overlay_empty": ("select runs to compare their curves", "选择运行以对比曲线"),
    "ytitle.loss": ("loss", "损失"), "ytitle.val_loss": ("validation loss", "验证损失"),
    "ytitle.val_ppl": ("perplexity", "困惑度"), "ytitle.memory": ("MB per worker", "每 worker MB"),
    "ytitle.tokens_per_s": ("tokens/s", "token/秒"), "ytitle.lr": ("learning rate", "学习率"),
    "ytitle.grad_norm": ("grad norm", "梯度范数"), "ytitle.loss_scale": ("loss scale", "损失缩放"),
    "ytitle.answers": ("score ×100", "得分 ×100"),
    "ytitle.reward_accuracy": ("reward accuracy", "奖励准确率"), "ytitle.reward_margin": ("reward", "奖励"),
    "ytitle.logps": ("log-prob of the answers", "回答的对数概率"),
    "chart.series": ("series", "曲线"),
    # the Runs comparison's curves (app.tabs.runs_callbacks.OVERLAY_METRICS: the choice and the y axis)
    "overlay.train loss": ("train loss", "训练损失"), "overlay.train loss EMA": ("train loss EMA", "训练损失 EMA"),
    "overlay.val loss": ("val loss", "验证损失"), "overlay.val ppl": ("val ppl", "验证 ppl"),
    "overlay.tokens/s": ("tokens/s", "token/秒"),
    # what a run's short label in a legend calls a setting (app.tabs.runs_callbacks.short_key)
    "short.train.learning_rate": ("lr", "学习率"), "short.train.micro_batch_size": ("batch", "微批"),
    "short.train.grad_accum_steps": ("accum", "梯度累积"), "short.data.max_seq_len": ("seq", "序列长度"),
    "short.parallel.data_parallel": ("dp", "数据并行"), "short.data.train_file": ("data", "数据"),
    "short.model.path": ("model", "模型"), "short.precision.amp_level": ("amp", "混合精度"),
    "short.recompute.policy": ("recompute", "重计算"), "short.train.max_steps": ("steps", "步数"),
    # the charts' series (app.charts.metrics names them; app.tabs.monitor_callbacks.series_text shows them)
    "series.loss": ("loss", "损失"), "series.loss EMA": ("loss EMA", "损失 EMA"),
    "series.val loss": ("val loss", "验证损失"), "series.val loss EMA": ("val loss EMA", "验证损失 EMA"),
    "series.val ppl": ("val ppl", "验证 ppl"), "series.val ppl EMA": ("val ppl EMA", "验证 ppl EMA"),
    "series.peak MB per worker": ("peak MB per worker", "每 worker 峰值 MB"),
    "series.peak MB, largest device": ("peak MB, largest device", "峰值 MB（最大的设备）"),
    "series.tokens/s": ("tokens/s", "token/秒"), "series.learning rate": ("learning rate", "学习率"),
    "series.grad norm": ("grad norm", "梯度范数"), "series.loss scale": ("loss scale", "损失缩放"),
    "series.reward accuracy": ("reward accuracy", "奖励准确率"), "series.reward margin": ("reward margin", "奖励间隔"),
    "series.chosen reward": ("chosen reward", "chosen 奖励"), "series.rejected reward": ("rejected reward", "rejected 奖励"),
    "series.chosen log-prob": ("chosen log-prob", "chosen 对数概率"),
    "series.rejected log-prob": ("rejected log-prob", "rejected 对数概率"),
    "series.best": ("best {monitor}", "最佳 {monitor}"), "series.rank": ("rank {n}", "rank {n}"),
    "series.parent": ("{name} (parent)", "{name}（父运行）"),
    "es.best": ("best {monitor} {value} at step {step}", "最佳 {monitor} {value}（第 {step} 步）"),
    "es.patience": ("patience left {n}", "剩余耐心 {n}"), "es.off": (" (early stopping off)", "（早停已关闭）"),
})
# core.spec.memory's notes are English sentences with figures in them; each pattern here gives its
# 简体中文 (unmatched notes stay English, and the browser test names any that reach the page).


# core's messages by id (core.spec.messages), in 中文; the English is the catalogue's own: why a run
# ended (status.json's `reason`; an error's own text is shown as it is) and the memory estimate's notes
MESSAGES_ZH: dict[str, str] = {
    "path.cpu_kernel": "CPU 的融合算子（能编译时；core.engine.fused）",
    "path.gpu_composed": "GPU：MindSpore 2.10 没有 GPU 的融合注意力（FlashAttentionScore 只在昇腾上）",
    "path.ascend_dtype": "昇腾：FlashAttentionScore 只接受 float16/bfloat16，而注意力以 {dtype} 计算（用 precision.amp_level O2 才能用融合算子）",
    "path.ascend_unsupported": "昇腾：这里不给 FlashAttentionScore 传 {needs}",
    "path.ascend_packed": "昇腾：打包的批次需要按样本分段，因果模式不支持",
    "path.ascend_flash": "昇腾：ops.flash_attention_score，因果模式（sparse_mode 2），无掩码张量",
    "memory.cpu_rss": "CPU：峰值是 worker 进程的常驻内存；编译后的训练图和评估图共用一个内存池",
    "memory.cpu_fused": "CPU：注意力、归一化、MLP 门控和损失以融合算子运行（不保留注意力分数张量）",
    "memory.cpu_composed": ("CPU：注意力、归一化、MLP 门控和损失以组合的 MindSpore 算子运行（融合算子需要 float32、不开 AMP 且有 "
                            "C++ 编译器），会保留注意力分数张量"),
    "memory.cpu_recompute": ("CPU：重计算只让编译后单步的峰值略有变化（实测：full -8%，MLP -4%；attention +11%，因为其各层无法共用"
                             "一个编译图）；在 GPU/Ascend 上省得更多"),
    "memory.textbook": "{device}：激活值为理论估算，未在此类设备上实测",
    "memory.flash": "{device} 注意力：FlashAttentionScore 因果模式，无注意力分数或掩码张量",
    "memory.composed_attention": ("{device} 注意力用组合算子（{why}）：每层为反向传播保留 (B, H, T, T) 的 softmax（共 {scores_mb} MB），"
                                  "每个窗口一个 (B, 1, T, T) float32 掩码（{mask_mb} MB），不按头广播"),
    "memory.head_loss": "{device} 损失：LM 头与交叉熵按每块 {tokens} 个 token 分块计算，不生成 logits",
    "memory.chunked_loss": "{device} 损失：在 logits 上按每块 {tokens} 个 token 分块计算交叉熵（不生成完整的 softmax 或独热编码）",
    "memory.pairs": "{objective}：train.micro_batch_size 按偏好对计数，每个微批同时运行 chosen 和 rejected 回答（行数 × 2，激活值计两次）",
    "memory.frozen_reference": "{objective}：冻结的参考模型副本再保存一份初始权重（{dtype}），计入权重",
    "memory.adapter_off": "{objective}：参考模型是关闭适配器的基座：不需要第二份权重，每步多一次前向计算",
    "memory.parallel": "{workers} 个 worker 各自持有以上全部（优化器状态不切分）",
    "memory.amp": "AMP {level}：参数在每次调用时转换为 {dtype}（不保留副本）；转换出的副本计入权重",
    "memory.accumulation": "梯度累积需要第二份 float32 梯度缓冲（累加和）",
    "memory.shared_ram": "CPU：{workers} 个 worker 共用本机内存（{workers} × {mb} MB）",
    "memory.unknown_device": "设备内存未知：合计未与上限比较",
    "memory.too_big": "需要 {needed} MB，设备只有 {has} MB：请减小 train.micro_batch_size 或 data.max_seq_len，或使用 LoRA",
    "run.reached_steps": "已达到 {steps} 步",
    "run.no_improvement": "{monitor} 连续 {patience} 次评估未改进 {min_delta} 以上（最佳 {best}，第 {step} 步）",
    "run.stopped_by_user": "用户停止",
    "run.stopped_forced": "用户强制停止",
    "run.cancelled": "启动前已取消",
    "run.stop_timed_out": "用户停止：正常停止 {seconds} 秒后超时，已强制结束 worker",
    "run.stopped_before_status": "用户停止（worker 在写下状态前已结束）",
    "run.with_note": "{reason}；{note}",
    "run.resumable": "最新可恢复的检查点：{checkpoint}",
    "run.no_resumable": "没有可恢复的检查点",
    "run.crash": "worker 没有写下最终状态就退出了（崩溃或被杀）；请查看 train.log",
    "run.crash_lines": "{reason}；最后的错误行：\n{lines}",
    "rank.rank": "rank {rank}",
    "rank.worker": "worker",
    "rank.on_node": "节点 {node} 上的 {who}",
    "rank.oom_killed": "内存不足：{who} 被 {signal} 杀死，由内核的 OOM 终止机制执行（{evidence}）。{advice}",
    "rank.killed": "{who} 被 {signal} 杀死",
    "rank.killed_no_oom": "{who} 被 {signal} 杀死（没有内核 OOM 终止机制的迹象）",
    "rank.exited": "{who} 以退出码 {code} 退出，没有写下最终状态",
    "rank.gone": "{who} 已不存在，也没有留下退出状态（它的监护进程也被杀了）",
    "rank.hung": ("{who} 停止了进展：{age} 秒没有完成一步（parallel.hang_timeout_s = {timeout}）；最后一步是 {step}（{phase}），"
                  "进程状态：{state}。已结束运行，以免一直等待"),
    "rank.stopped_by_slurm": "{who} 被 Slurm 的 {signal} 停止（作业 {job_id}）",
    "slurm.cancelled_pending": "{reason}：{job} 在排队时被取消（scancel）",
    "slurm.cancelled_outside": "{job} 在控制台之外被取消（scancel）；运行并未崩溃",
    "slurm.preempted": "{job} 被 Slurm 抢占（更高优先级的作业占用了它的节点）",
    "slurm.timeout": "{job} 达到时间限制，被 Slurm 结束（launch.time_limit）",
    "slurm.node_fail": "{job}：节点故障（NODE_FAIL），Slurm 结束了作业",
    "slurm.out_of_memory": "内存不足：Slurm 结束了 {job}（OUT_OF_MEMORY）。{advice}",
    "slurm.ended": "{job} 已结束（{state}，退出码 {code}），但运行没有写下最终状态；请查看 slurm.out 和 logs/",
    "slurm.job": "Slurm 作业 {id}",
    "slurm.job_on": "Slurm 作业 {id}（节点 {nodes}）",
    "advice.oom": ("要放进内存：调小 train.micro_batch_size（并调大 train.grad_accum_steps 以保持全局批量）或 "
                   "data.max_seq_len，打开重计算（recompute.policy），或改用 LoRA（method=lora）代替全量微调。"),
    "config.resume_and_fork": "只能设置 run.resume（继续此运行）或 run.fork_from（从检查点开始新运行）之一",
    "config.steps_or_epochs": "train.max_steps 与 train.epochs 必须恰好设置一个（train.epochs = {epochs}）",
    "config.below_max_steps": "必须 < train.max_steps（{steps}）",
    "config.packing_and_grouping": "打包已经去掉了填充；data.packing 与 data.group_by_length 只能设置一个",
    "config.score_needs_test": "要给生成的测试回答评分：需要 eval.downstream 为 true 并设置 data.test_file（或改为监控 val_loss）",
    "config.no_validation": "没有验证数据：请设置 data.validation_file，或把 data.validation_fraction 设在 (0, 0.5] 内",
    "config.cpu_bf16_compute": ("MindSpore 的 CPU 算子不支持 bf16 计算（amp_level {level}）；请用 float16 或 amp_level O0"
                                "（fp32），或在 parallel.device gpu/ascend 上运行"),
    "config.cpu_bf16_full": ("在 CPU 上全量微调会训练每个权重，而 MindSpore 的 CPU 算子没有 bf16 计算，所以主权重必须是 "
                             "float32：请用 model.dtype float32（bf16 检查点可精确加载），或 method=lora（冻结的基座权重"
                             "保持 bf16）"),
    "config.bf16_full": ("全量微调会把训练的权重保存为 bf16（MindSpore 的 nn.Adam 把每次更新写回 bf16 参数，小的更新会"
                         "丢失）；请保留 float32 主权重、以 bf16 计算：model.dtype float32（bf16 检查点可精确加载）配合 "
                         "precision.amp_level O2 与 precision.compute_dtype bfloat16，或使用 method=lora"),
    "config.lora_16bit_amp": ("在 CPU 上用 LoRA 时，model.dtype {dtype} 以 16 位保存冻结的基座权重并以 float32 计算；"
                              "AMP 会改用 float16 计算（在 CPU 上更慢）：请用 amp_level O0，或 model.dtype float32 配合 AMP"),
    "config.optimizer_shard": ("不支持：MindSpore 只为 Lamb/AdamWeightDecay/AdaFactor 切分优化器状态（其并行优化器，昇腾"
                               "数据并行），而本引擎的优化器是带偏差修正的 nn.Adam，AdamWeightDecay 没有偏差修正（没有它"
                               "微调会停滞）；请设为 false。要省内存请用 method=lora、recompute.policy full 或更小的 "
                               "train.micro_batch_size"),
    "config.slurm_workers": ("launch.nodes × launch.workers_per_node（{nodes} × {per_node} = {workers}）必须等于 "
                             "parallel.data_parallel（{data_parallel}）：每个工作进程是一个数据并行的 rank"),
    "config.reward_accuracy_sft": "奖励准确率需要偏好目标（train.objective dpo、simpo、orpo 或 kto）",
    "config.no_ppl_to_watch": ("train.objective {objective} 没有可监控的困惑度（它的损失不是语言模型损失）：请监控 "
                               "reward_accuracy、val_loss 或 val_loss_ema"),
    "config.packing_preference": ("train.objective {objective} 按整个回答评分；偏好数据不支持打包的行：请把 data.packing "
                                  "设为 false"),
    "config.router_loss_preference": "路由器的均衡损失不能与 train.objective {objective} 一起使用：请设为 false",
    "config.adapter_off_full": "需要 method=lora（全量微调没有可关闭的适配器）：请用 frozen_copy 或 auto",
    "config.unreadable": "{file}：无法读取配置文件（{os_says}）",
    "config.not_utf8": "{file}：无法读取配置文件（不是 UTF-8 文本：{codec_says}）",
    "config.invalid_yaml": "{file}：YAML 无效：{yaml_says}",
    "config.invalid_yaml_line": "{file} 第 {line} 行：YAML 无效：{yaml_says}",
    "config.yaml_character": "{file} 第 {line} 行：YAML 无效：不允许控制字符 {character}",
    "config.not_sections": "{file}：必须是各节（run:、model:、train:……）的映射，而不是{py_type}",
    "config.empty_file": "{file}：文件为空；配置是各节（run:、model:、train:……）的映射",
    "config.bad_override": "覆盖项 {text} 必须写成 key=value，例如 train.learning_rate=1e-4",
    "config.bad_base": "必须是文件名或文件名列表",
    "config.base_cycle": "继承成环：{cycle}",
    "config.base_missing": "文件不存在：{file}",
    # ---- area A: the data (core.data) ----
    "data.at_line": "{file} 第 {line} 行：{reason}",
    "data.at_record": "{file} 记录 {prefix}[{index}]：{reason}",
    "data.at_row": "{file} 第 {row} 行（行号从 0 起）：{reason}",
    "data.at": "{file}：{reason}",
    "data.file_not_found": "{file}：文件不存在",
    "data.unreadable": "{file}：无法读取（{os_error}）",
    "data.files_unreadable": "无法读取数据文件（{os_error}）",
    "data.not_readable": "{file}：不是可读取的 {file_type} 文件（{reader_says}）",
    "data.not_utf8": "不是 UTF-8 文本（{codec_says}）；请把文件另存为 UTF-8",
    "data.invalid_json_line": "JSON 无效（{json_says}，第 {column} 列）；每行必须是一个 JSON 对象",
    "data.invalid_json": "JSON 无效（{json_says}，第 {column} 列）",
    "data.invalid_json_lines": "JSON 无效（{json_says}，第 {column} 列）；每行一个对象的是 JSONL 格式：请把文件命名为 .jsonl",
    "data.not_an_object": "应为带命名字段的 JSON 对象，实际为{json_type}",
    "data.not_an_array": "{file}：应为对象数组，或在 'data' 下含列表的对象；实际为{json_type}",
    "data.not_an_array_keys": "{file}：应为对象数组，或在 'data' 下含列表的对象；实际为含键 {keys} 的对象",
    "data.csv_values": "有 {count} 个值，但表头有 {columns} 列（{header_names}）；含逗号的值请加引号",
    "data.csv_malformed": "CSV 格式有误（{csv_says}）",
    "data.csv_unnamed": "表头第 {column} 列没有名称；请给每列命名",
    "data.csv_duplicates": "列名重复：{duplicates}",
    "data.unsupported_type": "{file}：不支持的文件类型 {suffix}；支持：{supported}，或 Hugging Face 数据集目录",
    "data.no_split": "{file}：没有划分 {split}；已有划分：{split_names}",
    "data.no_records": ("{file}：没有记录（文件为空）；应为带某种格式字段的记录（alpaca: 'instruction', 'output'; "
                        "sharegpt: 'conversations'; chat: 'messages'; text: 'text'）"),
    "data.not_valid": "{setting}：{value} 无效；有效值：{valid_names}",
    "data.not_a_format": "data.format：{value} 不是一种格式；有效值：{valid_names}",
    "data.unknown_format_keys": "无法从键 {keys} 判断格式；应为 {formats}；{note}",
    "data.unknown_format_columns": "无法从列 {keys} 判断格式；应为 {formats}；{note}",
    "data.map_these": "可用 data.columns 映射这些列，例如 data.columns={{{pairs}}}",
    "data.map_others": "其他列名可用 data.columns 映射，例如 data.columns={{instruction: question, output: answer}}",
    "data.missing_columns": ("{file}：找到的列 {found}；格式 {fmt} 需要 {required_names}，缺少 {missing_names}。"
                             "各格式的列：{formats}；{note}"),
    "data.missing_columns_optional": ("{file}：找到的列 {found}；格式 {fmt} 需要 {required_names}（可选 "
                                      "{optional_names}），缺少 {missing_names}。各格式的列：{formats}；{note}"),
    "data.column_not_used": "data.columns.{column}：格式 {fmt} 不使用 {column_shown}（它读取 {read_names}）",
    "data.mapped_column_missing": "data.columns 把 '{column}' 映射到 {source}，但没有记录含字段 {source}；字段：{field_names}",
    "data.mapped_column_missing_close": ("data.columns 把 '{column}' 映射到 {source}，但没有记录含字段 {source}"
                                         "（是否想写 {close}？）；字段：{field_names}"),
    "data.missing_field": "缺少字段 {field}；{fmt} 格式的记录需要 {needs_fields}（字符串）",
    "data.missing_turns": "缺少字段 {field}；{fmt} 格式的记录需要 {item} 轮次的列表",
    "data.not_a_string": "字段 {field} 必须是字符串，实际为{json_type}",
    "data.not_a_string_or_calls": "字段 {field} 必须是字符串（有 tool_calls 时可为 null），实际为{json_type}",
    "data.not_turns": "字段 {field} 必须是 {item} 对象的列表，实际为{json_type}",
    "data.not_tools": "字段 {field} 必须是工具定义（对象）的列表，实际为{json_type}",
    "data.not_history": "字段 {field} 必须是 [提示, 回答] 对的列表，实际为{json_type}",
    "data.not_calls": "字段 {field} 必须是对象的列表，实际为{json_type}",
    "data.not_a_turn": "字段 {field} 必须是含 {role_tag} 和 {content_tag} 的对象，实际为{json_type}",
    "data.empty_field": "字段 {field} 为空；没有可学习的内容",
    "data.empty_conversation": "字段 {field} 为空；对话至少需要一个用户轮次和一个助手轮次",
    "data.assistant_first": "字段 {field} 是出现在任何用户轮次之前的助手轮次；对话应以系统或用户轮次开始",
    "data.no_assistant": "字段 {field} 没有助手轮次；对话至少需要一个用于学习",
    "data.bad_role": "字段 {field} 的值为 {role}；有效角色：{role_names}",
    "data.bad_role_tags": ("字段 {field} 的值为 {role}；有效角色：{role_names}（其他名称可用 data.columns 的 'user_tag', "
                           "'assistant_tag', 'system_tag', 'function_tag', 'observation_tag' 映射）"),
    "data.needs_pyarrow": "{file}：读取 {file_type} 需要 'pyarrow' 包（安装 'pyarrow<26'）；或把文件转换为 JSONL（{reader_says}）",
    "data.only_blank_lines": "{file}：没有记录：按 '{text_split}' 切分（data.text_split）后没有剩下文本：文件只有空行",
    "data.catalogue_as_file": ("{file}：这是数据集目录（dataset_info.json）；请用 data.dataset 选择其中的数据集（一个名称或"
                               "名称列表），并把该目录设为 data.train_file"),
    "data.state_no_files": "{file}：没有 '_data_files' 列表；这是 'datasets' 的 save_to_disk? 写出的目录吗？",
    "data.state_bad_name": "{file}：'_data_files[{index}].filename' 必须是文件名，实际为 {value}",
    "data.shard_missing": "{file}：缺少分片 {shard}（state.json 列出了 {count} 个分片：{shard_names}）；请重新复制整个目录",
    "data.split_shard_missing": "{file}：划分 {split} 缺少分片 {shard}（共 {total} 个，缺 {missing} 个）；请重新复制整个目录",
    "data.bad_dataset_dict": "{file}：应为 {{\"splits\": [名称]}}",
    "data.cannot_list": "{file}：无法列出目录内容（{os_error}）",
    "data.which_split": "{file}：无法确定{split_role}数据用 {split_names} 中的哪个划分；请写成 {file}#<split> 指定一个",
    "data.no_role_split": "{file}：没有{split_role}划分（已有划分：{split_names}）；请写成 {file}#<split> 指定一个",
    "data.no_validation_split": ("{file}：没有验证划分（已有划分：{split_names}）；请写成 {file}#<split> 指定一个；或把 "
                                 "data.validation_file 设为 null 并设置 data.validation_fraction"),
    "data.no_data_files": ("{file}：该目录中没有数据文件（在 {depth} 层内查找 {supported}），也没有 state.json 或 "
                           "dataset_dict.json"),
    "data.looks_like": ("{reason}；数据看起来是 {detected} 格式（{record_at} 的字段为 {field_names}，没有 {lacks_names}）。"
                        "请把 data.format 设为 auto（或 {detected}）"),
    "data.format_is": "data.format 为 {value}",
    "data.format_set_in": "data.format 为 {value}（在 {origin} 中设置）",
    "data.formatting_is": "{entry}：'formatting' 为 {value}",
    "data.preference_column": ("data.columns.{column}：'{column}' 是偏好数据（chosen/rejected）或 KTO 数据（'label'）的列，"
                               "只能用 train.objective dpo、simpo、orpo 或 kto 训练，不能当作普通回答"),
    "data.mixed_formats": ("{file}：记录是 {fmt} 格式，但 {first_file}（{setting} 的第一个文件）是 {first_fmt} 格式；同一"
                           "列表中的文件必须是同一格式"),
    "data.text_not_json_tools": "字段 {field} 是文本但不是 JSON（{json_says}）；应为工具定义的 JSON 列表",
    "data.text_not_json_history": "字段 {field} 是文本但不是 JSON（{json_says}）；应为 [提示, 回答] 对的列表",
    "data.text_not_json_turns": "字段 {field} 是文本但不是 JSON（{json_says}）；应为 {item} 对象的 JSON 列表",
    "data.tool_no_name": ("字段 {field} 没有字符串 'name'；工具定义为 {{\"name\", \"description\", \"parameters\"}} 或 "
                          "{{\"type\": \"function\", \"function\": {{...}}}}"),
    "data.bad_history_pair": "字段 {field} 必须是由两个字符串组成的 [提示, 回答] 对，实际为 {got_json}",
    "data.call_not_json": ("字段 {field}（function_call 轮次）不是 JSON（{json_says}）；应为 JSON "
                           "{{\"name\": ..., \"arguments\": {{...}}}} 或其列表"),
    "data.call_shape": "字段 {field}（function_call 轮次）必须是 JSON {{\"name\": ..., \"arguments\": {{...}}}} 或其列表",
    "data.two_assistant_turns": ("字段 {field}：连续两个助手轮次（{first_field} 和 {field}），对话模板不允许（{reason}）；"
                                 "请合并它们，或在中间插入用户轮次"),
    "data.template_no_tools": ("字段 {field}：{model} 的对话模板不渲染工具（工具 {tool} 没有出现在渲染结果中）；请使用模板支持"
                               "工具的模型，或不含工具的数据"),
    "data.template_no_calls": ("字段 {field}：{model} 的对话模板不渲染工具调用（对 {tool} 的调用没有出现在渲染结果中）；请使用"
                               "模板支持工具的模型"),
    "data.template_drops_turns": "字段 {field}：{model} 的对话模板丢弃了{turn_role}轮次（该轮次的文本没有出现在渲染结果中）",
    "data.template_rewrites": ("无法定位助手轮次 {field}：对话模板把{note}渲染成的文本不是整段对话的前缀（它改写了前面的轮次"
                               "或生成提示）。请使用只在末尾追加的模板，或设置 data.mask_prompt=false 训练全部 token"),
    "data.turns_before": " {field} 之前的轮次（含生成提示）",
    "data.turns_through": "到 {field} 为止的轮次",
    "data.test_answer_not_text": "字段 {field}：测试记录的最后一个助手轮次必须是可供比较的文本回答（这一个是工具调用或为空）",
    "data.overlong_one": ("{count} 条记录超过 data.max_seq_len={max_seq_len} 个 token（data.overlong: error）：{listed}。"
                          "请调大 data.max_seq_len，或把 data.overlong 设为 'truncate'（按比例截断提示和回答）或 "
                          "'skip'（跳过这些记录）"),
    "data.overlong_many": ("{count} 条记录超过 data.max_seq_len={max_seq_len} 个 token（data.overlong: error）：{listed}。"
                           "请调大 data.max_seq_len，或把 data.overlong 设为 'truncate'（按比例截断提示和回答）或 "
                           "'skip'（跳过这些记录）"),
    "data.prompt_fills": ("字段 {field}：仅提示就有 {count} 个 token，占满了 data.max_seq_len={max_seq_len}；请调大 "
                          "data.max_seq_len 或缩短提示"),
    "data.supervised_not_preference": ("{entry}：这是监督数据（没有 'ranking: true'，也没有 'kto_tag' 列）；train.objective "
                                       "dpo、simpo、orpo 或 kto 需要偏好数据。请选择偏好数据集，或设置 train.objective sft"),
    "data.objective_needs": "字段 {field}：train.objective {objective} 需要{wanted}，但 {held_by} 中是{held}",
    "data.no_pairs_left": "{file}：丢弃完全相同的对之后没有剩下偏好对",
    "data.at_entry": "{file}：数据集 {name}：{reason}",
    "data.catalogue_not_json": "不是 JSON（{json_says}，第 {column} 列）；数据集目录是由命名数据集组成的一个对象",
    "data.catalogue_not_object": "{file}：应为由命名数据集组成的对象，实际为{py_type}",
    "data.catalogue_choose": ("{file}：这是数据集目录（dataset_info.json）；请用 data.dataset 选择其中的数据集（一个名称或"
                              "名称列表）：{dataset_names}"),
    "data.no_such_dataset": "data.dataset：{file} 中没有数据集 {name}；已有数据集：{dataset_names}",
    "data.entry_not_object": "应为含 'file_name' 的对象，实际为 {got_json}",
    "data.entry_on_hub": "字段 {field}：{url} 位于{hub_place}；本控制台只读取本地文件；请下载后在 'file_name' 中填写",
    "data.entry_script": "字段 'script_url'：{url} 是加载脚本；这里不运行脚本；请把其数据转换为文件并在 'file_name' 中填写",
    "data.entry_no_file": "没有字段 'file_name'（{folder} 中的数据文件）",
    "data.entry_formatting": "字段 'formatting' 的值为 {value}；有效值：{valid_names}",
    "data.entry_bad_file_name": "字段 'file_name' 必须是文件名或文件名列表，实际为 {value}",
    "data.entry_outside": "字段 'file_name'：{given} 位于数据集目录 {folder} 之外",
    "data.entry_file_missing": "字段 'file_name'：{file} 不存在",
    "data.entry_tags_alpaca": "字段 'tags' 只适用于 sharegpt 格式（该条目是 alpaca）",
    "data.entry_num_samples": "字段 'num_samples' 必须是正整数，实际为 {value}",
    "data.entry_not_mapping": "字段 {field} 必须是对象，实际为 {got_json}",
    "data.entry_unknown_name": "字段 {field} 不是 {fmt} 格式的{mapping_kind}名；有效值：{valid_names}",
    "data.entry_not_column": "字段 {field} 必须是列名，实际为 {value}",
    "data.entry_ranking": ("这是偏好数据，chosen/rejected 偏好对（'ranking: true'）；只能用 train.objective dpo、simpo、orpo 或 "
                           "kto 训练，不能作为监督回答。请选择其他数据集"),
    "data.entry_kto": ("这是偏好数据，KTO 数据（标签列 {column_shown}）；只能用 train.objective dpo、simpo、orpo 或 kto 训练，"
                       "不能作为监督回答。请选择其他数据集"),
    "data.entry_column_missing": "字段 {field} 指定的列 {column_shown} 在 {files} 中不存在（字段：{field_names}）",
    "data.media_refused": ("{reason}；本控制台只训练纯文本模型。设置 data.media=drop 可去掉媒体及其 <image>/<audio>/<video> "
                           "占位符后训练文本，或使用不含媒体的记录"),
    "data.media_part": "字段 {field} 是{article}{media}内容",
    "data.media_column": "字段 {field} 含 {count} 个{media}",
    "data.bad_part": "字段 {field} 是类型为 {part_type} 的内容；应为 {{\"type\": \"text\", \"text\": ...}}（或图像、音频、视频内容）",
    "data.pair_not_message": "字段 {field}：应为消息对象，实际为{json_type}",
    "data.pair_bad_role": "字段 {field}：角色 {role} 不是 'system'、'user' 或 'assistant'",
    "data.pair_content": "字段 {field}：内容必须是字符串，实际为{json_type}",
    "data.answer_missing": "字段 {field}：缺少回答",
    "data.answer_not_last": "字段 {field}：消息列表必须以助手的回答结尾",
    "data.not_text_or_messages": "字段 {field}：应为字符串或消息列表，实际为{json_type}",
    "data.answer_empty": "字段 {field}：回答为空",
    "data.prompt_empty": "字段 {field}：提示为空",
    "data.no_prompt": "没有提示：应有 'prompt'、'conversations'/'messages' 或 'instruction'（其他名称可用 data.columns 映射）",
    "data.prompt_not_user": "提示必须以用户轮次结尾（字段 {field}）",
    "data.prompts_differ": "字段 {field}：回答之前的对话与 '{chosen_field}' 的不同；一个偏好对共用同一个提示",
    "data.kto_label": "字段 {field}：KTO 标签必须是 true 或 false，实际为 {value}（{json_type}）",
    "data.kto_conversation_end": "字段 {field}：KTO 对话必须以非空的助手回答结尾",
    "data.kto_no_answer": "KTO 记录需要回答：'completion'、'output'，或以助手轮次结尾的对话",
    "data.mixed_kinds": "这条记录是{record_kind}，但 {record_at} 是{first_kind}；一个文件只能有一种数据（字段 {field}）",
    "data.no_desirable": "{file}：没有可取的回答（'label' 为 true）可用 train.objective sft 训练",
    "data.nothing_of_the_answer": ("该样本有 {tokens} 个 token；max_seq_len={max_seq_len} 时回答部分全被截掉——请调大 "
                                   "data.max_seq_len 或缩短提示"),
    "data.test_raw_text": "{file}：测试文件需要提示和参考答案（alpaca、sharegpt 或 chat 格式）；这个文件是纯文本",
    "data.no_validation_samples": ("{file}：data.validation_fraction={fraction} 在 {records} 条记录中得到 0 条验证样本；"
                                   "请调大 data.validation_fraction 或设置 data.validation_file"),
    "data.nothing_to_train": ("{file}：data.validation_fraction={fraction} 在 {records} 条记录中没有留下训练数据；"
                              "请调小它或设置 data.validation_file"),
    "data.no_validation_data": ("data.validation_file：没有验证数据；请设置 data.validation_file，或把 "
                                "data.validation_fraction 设在 (0, 0.5] 内"),
    "data.fewer_samples_than_a_batch": ("train：{count} 条样本不足一个全局批 {batch}（train.micro_batch_size {micro} × "
                                        "train.grad_accum_steps {accum} × 数据并行 {world}）；请调小它们或增加数据"),
    "data.fewer_rows_than_a_batch": ("train：{count} 个打包行不足一个全局批 {batch}（train.micro_batch_size {micro} × "
                                     "train.grad_accum_steps {accum} × 数据并行 {world}）；请调小它们或增加数据"),

    "stats.ignored_field": "{split_role}：{records} 条记录中有 {count} 条的字段 '{field}' 未被使用",
    "stats.overlong_truncated": ("{split_role}：{records} 条记录中有 {count} 条超过 max_seq_len {max_seq_len} 个 token，已截断"
                                 "（按比例保留提示和回答的开头）（data.overlong={policy}）：{listed}"),
    "stats.overlong_skipped": ("{split_role}：{records} 条记录中有 {count} 条超过 max_seq_len {max_seq_len} 个 token，已跳过"
                               "（data.overlong={policy}）：{listed}"),
    "stats.chunked": ("{split_role}：{count} 条超过 max_seq_len {max_seq_len} 的文本记录被切成 {max_seq_len} 个 token 的块"
                      "（{records} 条记录得到 {samples} 个样本）"),
    "stats.media_dropped": "{split_role}：已在 {count} 条记录中丢弃媒体（data.media=drop），并删除其 <image>/<audio>/<video> 占位符",
    "stats.identical_pairs": "{split_role}：丢弃了 {count} 个 chosen 与 rejected 回答相同的偏好对（没有可学习的偏好）",
    "stats.pairs_as_sft": ("{file}：偏好对按 SFT 训练，只用 {count} 个 chosen 回答（不用 rejected 回答）；要学习偏好请把 "
                           "train.objective 设为 dpo、simpo 或 orpo"),
    "stats.kto_as_sft": ("{file}：KTO 数据按 SFT 训练，只用 {count} 个合意的回答（{skipped} 个不合意的回答未用）；要从两者学习请把 "
                         "train.objective 设为 kto"),
    "stats.listed_record": "{record_at}（{tokens} 个 token）",
    "stats.listing": "{items}",
    "stats.listing_more": "{items}，另有 {more} 条",

    # ---- area B: the model folder (core.spec.model_args, families, moe_args, core.data.tokenizer) ----
    "model.at": "{where}：{reason}",
    "model.at_setting": "{setting}：{reason}。",
    "model.no_config": "未找到。模型目录需要 Hugging Face 的 config.json（支持的架构：{architectures}）。",
    "model.invalid_json": "不是有效的 JSON（{json_says}）。",
    "model.not_object": "必须是 JSON 对象",
    "model.remote_code": ("auto_map：该检查点需要运行它自带的 Python 代码（远程代码：{classes}），mindtune 从不运行这类"
                          "代码；支持的架构：{architectures}。"),
    "model.architecture_refused": "'architectures'：不支持 {architecture}（{why}）；支持的架构：{architectures}。",
    "model.architecture_unknown": "不支持架构 {architecture}；支持的架构：{architectures}（model_type {model_types}）。",
    "model.mla_moe": "{name} 的多头潜在注意力（MLA）及其 MoE 路由尚未实现",
    "model.mla": "{name} 的多头潜在注意力（MLA）尚未实现",
    "model.chunked_nope_moe": "{name} 的分块注意力、NoPE 层和 MoE 尚未实现",
    "model.positive_int": "必须是正整数，实际为 {py_value}",
    "model.positive_int_or_null": "必须是正整数或 null，实际为 {py_value}",
    "model.positive_or_null": "必须是正数或 null，实际为 {py_value}",
    "model.kv_heads": "{kv_heads} 必须能整除 num_attention_heads={heads}",
    "model.text_config": "{architecture} 把其语言模型的配置放在这里；应为对象，实际为 {py_value}",
    "model.not_supported": "不支持 {py_value}；支持：{supported_names}",
    "model.rotary_factor": "必须在 (0, 1] 内，实际为 {factor}",
    "model.rope_family": "'{family}' 不支持 {py_value}；支持：{supported_names}",
    "model.sliding_rope": "滑动窗口层只支持 'default'",
    "model.rope_required": "rope_type 为 {rope_type} 时必填",
    "model.longrope_factors": "rope_type 为 'longrope' 时必填：正数列表，实际为 {py_value}",
    "model.longrope_original": "rope_type 为 'longrope' 时必填（大于 1 的整数），实际为 {py_value}",
    "model.factor_count": "必须为每个旋转频率列出一个因子（{half} = head_dim · partial_rotary_factor / 2），实际为 {count} 个",
    "model.layer_types": "必须为 {layers} 层中的每一层列出 {full} 或 {sliding}",
    "model.bidirectional": "不支持双向（编码器式，EmbeddingGemma）注意力；只有因果语言模型可以微调",
    "model.above_context": ("超过模型的上下文长度 {tokens} 个 token（{architecture}，见其 config.json 中的 "
                            "max_position_embeddings）；最多用 {tokens}"),
    "model.targets_unmatched": "名称 {names} 不匹配该 '{family}' 模型的任何投影层；其投影层为 {projections}（或用 'all-linear' 表示全部）",
    "model.targets_none": "不匹配该 '{family}' 模型的任何投影层；其投影层为 {projections}（或用 'all-linear' 表示全部）",
    "model.not_a_folder": ("不是目录。需要含 config.json 与 model.safetensors（或分片的 model.safetensors.index.json）的 "
                           "Hugging Face 目录。"),
    "model.no_weights": ("没有 model.safetensors 或 model.safetensors.index.json。需要含 config.json 与 model.safetensors"
                         "（或分片的 model.safetensors.index.json）的 Hugging Face 目录。"),
    "model.pickle_only": ("只找到 pickle 权重（{files}）。mindtune 只加载 safetensors（pickle 文件在加载时可能运行代码）；"
                          "请用 transformers 转换："
                          "`AutoModelForCausalLM.from_pretrained(dir).save_pretrained(dir, safe_serialization=True)`。"),
    "model.bad_index": "不是有效的 safetensors 索引（需要 'weight_map'）：{json_says}",
    "model.shard_missing": "索引列出了分片 {shard}，但 {folder} 中没有。",
    "model.no_tokenizer": "没有 tokenizer.json（需要 Hugging Face 快速分词器）",
    "model.unreadable_weights": "权重无法读取：{reason}",
    "model.short_weights": "{file}：太短，不是 safetensors 文件",
    "model.huge_header": "{file}：文件头有 {size} 字节，不可信",
    "moe.experts_missing": "缺失（每个 MoE 层的专家数）",
    "moe.top_k": "{top_k} 超过了专家数 {experts}",
    "moe.aux_loss": "必须是 >= 0 的数字，实际为 {py_value}",
    "moe.jitter": "不支持 {py_value}（只支持 0，与模型中心发布的 Mixtral 检查点一致）；请设为 0",
    "moe.qwen_window": "Qwen3-MoE 不支持 true（模型中心没有检查点使用它）；请设为 false",
    "moe.dense_layers": "必须是 [0, {layers}) 内的层序号列表，实际为 {py_value}",
    "tokenizer.not_a_folder": "不是目录；需要含 tokenizer.json 的 Hugging Face 模型目录",
    "tokenizer.no_file": "没有 tokenizer.json；需要 Hugging Face 快速分词器（tokenizer.json）",
    "tokenizer.unreadable_json": "无法读取 JSON（{json_says}）",
    "tokenizer.not_object": "应为 JSON 对象，实际为{py_type}",
    "tokenizer.invalid_file": "不是有效的 tokenizers 文件（{serde_says}）",
    "tokenizer.token": "记号必须是字符串，或含字符串 'content' 的对象，实际为 {py_value}",
    "tokenizer.added_token": "应为含字符串 'content' 的对象，实际为 {py_value}",
    "tokenizer.eos_ids": "应为整数或整数列表，实际为 {py_value}",
    "tokenizer.template_entry": "应为含字符串 'name' 和 'template' 的对象",
    "tokenizer.template_type": "应为字符串或 {{name, template}} 对象的列表，实际为{py_type}",
    "tokenizer.no_template": ("该模型没有对话模板（tokenizer_config.json 中没有 'chat_template'，也没有 "
                              "chat_template.jinja）；请用纯文本数据格式，或添加模板"),
    "tokenizer.no_default": "有多个对话模板，但没有名为 'default' 的（找到 {names}）",
    "tokenizer.refused": "对话模板拒绝了这些消息：{template_says}",
    "tokenizer.failed": "对话模板出错：{jinja_says}",
    "tokenizer.syntax": "对话模板第 {line} 行有语法错误：{jinja_says}",

    # ---- area C: a field's own rule (core.spec.config), core.run's checks (Slurm's shared folder, trackers, cores) ----
    "field.rule.bool": "true 或 false",
    "field.rule.string": "字符串",
    "field.rule.integer": "整数",
    "field.rule.number": "数字",
    "field.rule.integer_bound": "整数，且 {op} {bound}",
    "field.rule.number_bound": "数字，且 {op} {bound}",
    "field.rule.integer_in": "整数，取值范围 {range}",
    "field.rule.number_in": "数字，取值范围 {range}",
    "field.rule.one_of": "以下之一：{options}",
    "field.rule.or_null": "{reason}，或 null",
    "field.rule.target_modules": "非空的模块名列表、'q_proj,v_proj' 形式的文本，或一个正则表达式",
    "field.rule.profile_steps": "两个步数 [起, 止]，且 1 <= 起 <= 止（文本形式：'3,5'）",
    "field.rule.trackers": "由 {trackers} 组成的列表（每个至多一次），或 []",
    "field.rule.columns": "格式字段到数据集列名的映射，例如 {{instruction: question, output: answer}}",
    "field.rule.dataset": "dataset_info.json 目录中的数据集名称，或其列表（文本形式：'a, b'）",
    "field.rule.data_files": ("一个文件、数据集目录、目录#划分，或文件列表（文本形式：'[a.jsonl, b.jsonl]' 或 "
                              "'a.jsonl, b.jsonl'）"),
    "field.rule.time_limit": "Slurm 时间限制（{forms}，例如 30、1:30:00、2-12）",
    "field.rule.sbatch_options": ("sbatch 选项的列表，每项一个 '--name=value' 或 '--name'（长格式；不含命令行特殊字符；"
                                  "不能是启动器自己设置的选项：--output、--error、--chdir、--nodes……）"),
    "field.rule.env": "环境变量名（[A-Za-z_][A-Za-z0-9_]*）到值的映射，例如 {{HF_HOME: /data/hf}}",
    "field.rule.slurm_name": "Slurm 名称（字母、数字、'_'、'.'、'-'）",
    "field.must_be": "必须是{reason}",
    "field.must_be_suggest": "必须是{reason}（是否想写 {suggestion}？）",
    "field.not_empty": "不能为空",
    "field.bad_regex": "不是有效的正则表达式：{re_says}",
    "field.unknown_key": "未知的键；有效的键：{valid_names}",
    "field.unknown_key_suggest": "未知的键（是否想写 {suggestion}？）；有效的键：{valid_names}",
    "field.section_mapping": "必须是 {section} 设置的映射",
    "field.unknown_tracker": "含未知的跟踪工具 {name}；必须是{reason}",
    "field.unknown_tracker_suggest": "含未知的跟踪工具 {name}（是否想写 {suggestion}？）；必须是{reason}",
    "field.tracker_twice": "同一个跟踪工具出现了两次；必须是{reason}",
    "field.unknown_column_field": "含未知字段 {name}；有效字段：{valid_names}",
    "field.unknown_column_field_suggest": "含未知字段 {name}（是否想写 {suggestion}？）；有效字段：{valid_names}",
    "field.column_not_string": "把 {name} 映射到 {column}；列名必须是非空字符串",
    "field.data_file_items": "必须是{reason}；每一项都须是非空文件名",
    "field.time_limit_zero": "必须是大于零的时间限制",
    "field.sbatch_not_text": "{item} 不是选项文本",
    "field.sbatch_shell": "{item} 含有 {characters}：不能有命令行特殊字符或换行",
    "field.sbatch_form": "{item} 不是单个 '--name=value' 项（请用长格式，每项一个选项，例如 --mem=4G）",
    "field.sbatch_reserved": "{item} 设置了 {option}，而启动器会自己设置它",
    "field.sbatch_reserved_use": "{item} 设置了 {option}，而启动器会自己设置它；请用 {instead}",
    "field.env_name": "变量名为 {name}；变量名由字母、数字和 '_' 组成，且不能以数字开头",
    "field.env_value": "给 {name} 的值为 {py_value}；值必须是字符串或数字",
    "field.env_newline": "给 {name} 的值含换行；值只能是一行",
    "field.named": "{widget}{reason}",
    "field.give_length": "请填写步数或轮数",
    "run.check.shared_needed": ("Slurm 运行的运行目录必须位于每个节点都能访问的存储上：用 {option} <共享存储上的文件夹> "
                                "启动控制台，并把运行目录（--runs-dir）放在其中"),
    "run.check.shared_missing": "{option} {folder}：没有这个文件夹",
    "run.check.shared_outside": ("运行目录 {runs} 不在 {option} {shared} 之内：集群节点看不到运行的文件；请使用位于 {shared} "
                                 "之内的运行目录（--runs-dir）"),
    "run.check.tracker_missing": ("tracking：{tracker} 需要 {package} 包，但尚未安装（用 'pip install -r "
                                  "requirements-tracking.txt' 安装），或从 'tracking' 中去掉 {tracker}"),
    "run.check.cores": "本机有 {cores} 个 CPU 核，最多可运行 {cores} 个 CPU worker（每个一个进程）；请把 parallel.data_parallel 设为 {cores} 或更少",
    "run.check.devices_held": "所有 parallel.device={device} 设备（{ids}）都被运行占用（{held}）；请在有空闲设备时再检查内存",

    # ---- where a problem is ----
    "problem.got": "{reason}（当前值 {value}）",
    "problem.empty": "{reason}（该字段为空）",
    "problem.and": "{reason}；{note}",
    "problem.at_key": "{setting}：{reason}",
    "problem.at_value": "{setting} = {value}：{reason}",
    "problem.at_key_in": "{setting}（{source} 中）：{reason}",
    "problem.at_value_in": "{setting} = {value}（{source} 中）：{reason}",
}

# ---- area D: the engine and the weights ----
MESSAGES_ZH.update({
    "lora.rank": "lora 的 rank 必须是正整数，实际为 {py_value}。",
    "lora.alpha": "lora 的 alpha 必须是正数，实际为 {py_value}。",
    "lora.dropout": "lora 的 dropout 必须在 [0, 1) 内，实际为 {py_value}。",
    "lora.already_adapted": "{module} 已有 LoRA 适配器（共 {count} 个这样的模块）；只能注入一次，或把适配器加载到现有的 LoRA 层中。",
    "lora.expert_dropout": ("lora 的 dropout 为 {dropout}，而目标 {module} 是混合专家模型堆叠的投影层：这里专家权重上的 LoRA "
                            "没有 dropout（与 PEFT 相同）；请把 dropout 设为 0，或把专家从 target_modules 中去掉。"),
    "lora.bad_regex": "lora 的 target_modules '{pattern}' 不是有效的正则表达式：{re_says}。",
    "lora.bad_targets": "lora 的 target_modules 必须是非空的模块名列表、一个正则表达式字符串或 'all-linear'，实际为 {py_value}。",
    "lora.regex_matches_nothing": ("lora 的 target_modules 正则表达式 '{pattern}'（用 re.fullmatch 匹配以点分隔的模块名，例如 "
                                   "'{example}'）不匹配该模型的任何全连接层；其投影层为 {projections}（'all-linear'：该模型系列自己的投影层）。"),
    "lora.name_matches_nothing": ("lora 的 target_modules 名称 {names} 不匹配该模型的任何全连接层；其投影层为 {projections}"
                                  "（'all-linear'：该模型系列自己的投影层）。"),
    "lora.names_match_nothing": ("lora 的 target_modules 名称 {names} 不匹配该模型的任何全连接层；其投影层为 {projections}"
                                 "（'all-linear'：该模型系列自己的投影层）。"),
    "lora.tensor_shape": "{source}：张量 {name} 的形状为 {shape}，而模型的 LoRA 层需要 {expected}（秩或基座模型不同？）。",
    "lora.missing_tensor": "{source}：缺少模型的 LoRA 层需要的张量 {name}。",
    "lora.missing_tensors": "{source}：缺少模型的 LoRA 层需要的张量 {name}（另有 {more} 个）。",
    "lora.unexpected_tensor": "{source}：多余的张量 {name}，它不对应模型的任何 LoRA 层（不同的 target_modules?）。",
    "lora.unexpected_tensors": "{source}：多余的张量 {name}（另有 {more} 个），它不对应模型的任何 LoRA 层（不同的 target_modules?）。",
    "lora.no_adapter_config": "{file}：未找到；PEFT 适配器目录应含 adapter_config.json 和 adapter_model.safetensors。",
    "lora.not_lora": "{file}：peft_type 为 {py_value}；只支持 LORA 适配器。",
    "lora.config_key_missing": "{file}：缺少 {config_key}。",
    "lora.option_unsupported": "{file}：不支持 {config_key}={value}（只支持 {supported_value}）。",
    "lora.per_module": "{file}：不支持 {config_key}（按模块设置 rank/alpha）。",
    "lora.target_parameters": ("{file}：target_parameters {value}（专家权重上的 LoRA）暂时无法加载到 mindtune；请用 PEFT 库"
                               "加载，或把它合并进基座模型。"),
    "lora.no_adapter_weights": "{file}：未找到。",
    "lora.pickle_adapter": ("{file}：未找到。找到了 {files}：pickle 文件在加载时可能运行代码；请用 safe_serialization=True "
                            "重新保存适配器。"),
    "lora.foreign_tensor": ("{file}：张量 {name} 不是 PEFT 的 LoRA 张量（应为 base_model.model.<module>.lora_A.weight / "
                            "lora_B.weight）。"),
    "lora.foreign_tensors": ("{file}：张量 {name}（另有 {more} 个）不是 PEFT 的 LoRA 张量（应为 "
                             "base_model.model.<module>.lora_A.weight / lora_B.weight）。"),
    "lora.moe_remapped": ("稠密层的 '{names}' 上有 LoRA：PEFT 0.21 配合 transformers 5 会把混合专家模型 target_modules 中的"
                          "这些名称读作专家参数，适配器就会加载到别的权重上。请导出为 'merged'，或训练时不把 '{names}' 放进 "
                          "target_modules。"),
    "lora.moe_modules": ("PEFT 会把混合专家模型的 target_modules 解析为模块名（{leaves}），这也会适配这里未训练的 {module}。"
                         "请导出为 'merged'，或以每一层为目标。"),
    "lora.moe_experts": ("PEFT 的 target_parameters 'mlp.experts.{projection}' 也会适配这里未训练的 {module}。请导出为 "
                         "'merged'，或以每个稀疏层的专家为目标。"),
    "weights.unreadable": "{file}：无法读取 safetensors 文件（文件被截断或已损坏？）：{reason}",
    "weights.unreadable_tensor": "{file}：无法读取张量 {name}（文件被截断或已损坏？）：{reason}",
    "weights.safetensors_says": "{safetensors_says}",
    "weights.os_error": "{os_error}",
    "weights.short_file": "文件比 8 字节的文件头长度还短",
    "weights.header_length": "文件头长度 {length} 与文件大小（{size} 字节）不符",
    "weights.header_json": "文件头不是有效的 JSON：{json_says}",
    "weights.header_not_object": "文件头不是 JSON 对象",
    "weights.bad_entry": "张量 {name}：文件头条目格式错误 {py_value}",
    "weights.bad_offsets": "张量 {name}：字节区间 [{begin}, {end}) 装不下 {dtype}{shape}，文件只有 {data_bytes} 个数据字节（被截断？）",
    "weights.ends_early": "张量 {name}：文件在其最后一个字节之前就结束了（被截断？）",
    "weights.two_shards": "{file}：张量 {name} 出现在多个分片中。",
    "weights.missing_tensor": "{source}：缺少 {architecture} 需要的张量 {name}。",
    "weights.missing_tensors": "{source}：缺少 {architecture} 需要的张量 {name}（另有 {more} 个）。",
    "weights.unexpected_tensor": "{source}：多余的张量 {name}，按此 config.json 构建的 {architecture} 没有它。",
    "weights.unexpected_tensors": "{source}：多余的张量 {name}（另有 {more} 个），按此 config.json 构建的 {architecture} 没有它们。",
    "weights.shape": "{source}：张量 {name} 的形状为 {shape}，而 config.json 要求 {expected}。",
    "weights.dtype": "不支持数据类型 {py_value}；请使用以下之一：{choices}。",
    "weights.storage_dtype": "不支持存储数据类型 {py_value}；请使用以下之一：{choices}。",
    "weights.cpu_bf16": ("数据类型 bfloat16：MindSpore 的 CPU 算子不支持 bf16 计算；在 CPU 上请以 float32（或 float16）加载，"
                         "或使用 GPU/Ascend 设备。"),
    "weights.base_tensor_gone": "{folder}：基座检查点的张量 {name} 已不存在；导出需要从那里复制它。",
    "engine.state_no_step": "{file}：缺少 'step'。",
    "engine.params_mismatch": "{source}：与本次运行的参数不符（缺少 {missing_keys}，多出 {unexpected_keys}）。",
    "engine.param_shape": "{source}：{name} 的形状为 {shape}，应为 {expected}。",
    "export.no_checkpoint": "{folder}：找不到检查点；请给出 runs/<id>/checkpoints/step-N（或 best/last）。",
    "export.state_fields": "{file}：缺少 'step' 或 'method'。",
    "export.base_gone": "{folder}：基座模型 {base} 已不存在；该检查点需要它。",
    "export.base_changed": "{base}：其权重在训练后发生了变化（sha256 不同）；导出会把适配器与错误的基座模型合并。",
    "export.not_adapter_tensor": "{file}：{name} 不是 LoRA 适配器张量（<module>.lora_a / .lora_b）；PEFT 适配器无法容纳它。",
    "export.no_tensor": "{file}：没有任何张量，不是 LoRA 适配器张量（<module>.lora_a / .lora_b）；PEFT 适配器无法容纳它。",
    "export.adapter_rank": "{file}：{name} 的形状为 {shape}，与 trainer_state.json's lora 设置所说的秩 {rank} 不符。",
    "export.dtype": "--dtype {py_value}：请使用以下之一：{choices}。",
    "export.unused_tensor": "{file}：{name} 不匹配基座模型 {base} 的任何张量（基座模型不同？）。",
    "export.float32_only": "--dtype {dtype}：该模型系列的合并导出只能写成 float32。",
    "export.format": "不支持格式 {py_value}；请使用以下之一：{choices}。",
    "export.dtype_merged_only": "--dtype 只适用于合并导出（'{fmt}' 总是写成 float32）。",
    "export.full_no_adapter": "全参数微调没有适配器：请导出为 'merged' 或 'mindspore'。",
    "export.which": "--which {py_value}：请使用 {or_choices}。",
    "export.no_pointer": "{folder}：还没有 '{which}' 检查点（缺少 checkpoints/{which}）。",
    "generate.max_new_tokens": "max_new_tokens = {value}：必须 >= 1",
    "generate.temperature": "'temperature' = {value}：必须 >= 0（0 = 贪心解码）",
    "generate.top_p": "top_p = {value}：必须在 (0, 1] 内",
    "generate.empty_prompt": "生成：每个提示词至少需要一个 token",
    "generate.too_long": "提示词的 {tokens} 个 token 加上 max_new_tokens {max_new_tokens} 超过了模型的上下文长度 {limit} 个 token",
    "engine.eval_base_missing": "{folder}：其基座模型 {base}（见 adapter_config.json）在这里不是目录。",
    "engine.eval_gen_tokens": "max_gen_toks {max_gen_toks} 必须小于模型的上下文长度 {limit} 个 token",
    "engine.objective": "偏好目标必须是以下之一：{choices}，实际为 {py_value}",
    "engine.loss_type": "preference.loss_type 必须是 sigmoid 或 ipo，实际为 {py_value}",
})
# the Try tab's own answers (app.tabs.try_callbacks)
TEXTS.update({
    "try.no_prompt": ("type a prompt first", "请先输入提示词"),
    "try.no_base": ("pick a loadable base model", "请选择可加载的基座模型"),
    "try.no_checkpoint": ("pick a fine-tuned checkpoint (runs appear here once they saved one)",
                          "请选择微调检查点（运行保存检查点后会出现在这里）"),
    "try.no_such_checkpoint": ("{checkpoint}: no such checkpoint folder", "{checkpoint}：没有这个检查点目录"),
    "try.exited": ("core.engine.generate exited with {code}", "core.engine.generate 退出码为 {code}"),
    "try.tokens_in": ("[{tokens} tokens in {seconds} s]", "[{tokens} 个 token，用时 {seconds} 秒]"),
})






# ---- area E: the worker, the run folder, checkpoints, evaluation ----
MESSAGES_ZH.update({
    # why the worker failed (core.train)
    "train.needs_msrun": ("parallel.data_parallel = {data_parallel}：worker 必须由 msrun 启动（'python -m core.train "
                          "--config ...' 会替你这样做）。"),
    "train.not_moe": "train.router_aux_loss：{architecture} 不是混合专家模型（没有路由器）；请把它设为 false。",
    "train.method_resume": "{path}：{method} 检查点不能恢复 {run_method} 运行。",
    "train.method_fork": "{path}：{method} 检查点不能开始 {run_method} 运行；分叉须保持其父运行的方法",
    "train.other_base": "{path}：训练所用的基础模型不是 {model}；分叉须保持其父运行的基础模型",
    "train.fork_parameters": "{reason} 分叉须保持其父运行的可训练参数（LoRA：lora.rank 和 lora.target_modules）。",
    "train.fork_steps": "必须大于检查点的步数 {step}：分叉从那里接着计数（请给出总步数，例如 {example}）",
    "train.nonfinite_loss": "第 {step} 步的损失不是有限值（NaN/Inf）",
    "train.nonfinite_gradients": ("第 {step} 步的梯度不是有限值（损失 {loss} 是有限值）：请调低 train.learning_rate 或设置 "
                                  "train.max_grad_norm"),
    "train.loss_scale_collapse": ("fp16 损失缩放崩溃：梯度连续 {count} 次溢出（第 {first_step}-{step} 步），损失都是有限值；"
                                  "动态损失缩放从 {first_scale} 降到了 {scale}。请使用 fp32（precision.amp_level=O0）或调低 "
                                  "train.learning_rate。"),
    "train.out_of_memory": "内存不足：{error}。{advice}",
    "train.device_out_of_memory": "{device} 显存不足：{error}。{advice}",
    "train.device_out_of_memory_figures": "{device} 显存不足：{error}（{figures}）。{advice}",
    "train.disk_full": "写入 {file} 时磁盘已满：{os_says}；{folder} 中剩余 {free}。请释放该磁盘的空间。",
    "train.disk_full_run_file": "写入运行文件时磁盘已满：{os_says}；{folder} 中剩余 {free}。请释放该磁盘的空间。",
    "train.crashed": "worker 崩溃：{error}",
    "train.dry_steps": "--steps {steps}：必须 >= 1",
    # ... with several ranks
    "rank.said": "rank {rank}：{reason}",
    "rank.then_failed": "{note}；随后 rank {rank} 失败：{reason}",
    "rank.peer_exited": "{who} 以退出码 {code} 退出",
    "rank.peer_stopped": "{who} 停止了进展（进程状态：{state}）",
    "rank.peer_behind": "{who} 停止了进展（它的最后一步 {step} 比 rank {rank} 的早 {age} 秒）",
    "rank.device_oom": "{device} 显存不足：{error}",
    "rank.device_oom_figures": "{device} 显存不足：{error}（{figures}）",
    "rank.resumable_unknown": "无法确定最新的可恢复检查点（{error}）",
    # a checkpoint
    "ckpt.dtype_unsupported": "张量 {name}：数据类型 {dtype} 无法保存为 safetensors",
    "ckpt.no_step": "{folder}：没有第 {step} 步的检查点",
    "ckpt.unreadable_manifest": "{file}：无法读取清单（{error}）；该检查点不可信。",
    "ckpt.not_manifest": "{file}：不是检查点清单（没有 'files'）。",
    "ckpt.incomplete": "{folder}：检查点不完整，缺少 {missing_file}。",
    "ckpt.manifest_omits": "{file}：没有列出 {missing_file}。",
    "ckpt.file_missing": "{file}：文件缺失（清单中列有它）。",
    "ckpt.size_differs": "{file}：{size} 字节，清单记录的是 {expected}（保存后被截断或改动）。",
    "ckpt.sha_differs": "{file}：sha256 {actual}… 与清单中的 {expected}… 不同（保存后损坏或被改动）。",
    "ckpt.no_last": "{folder}：没有可恢复的 'last' 检查点；校验通过的已保存检查点：{checkpoints}。",
    "ckpt.no_last_none": "{folder}：没有可恢复的 'last' 检查点（该运行没有保存过检查点）。",
    "ckpt.not_found": "{folder}：找不到检查点；请给出运行目录或 runs/<id>/checkpoints/step-N。",
    "ckpt.corrupt_others": "{reason} 校验通过的检查点：{checkpoints}；要从其中之一恢复，请准确地指定：run.resume={path}",
    "ckpt.corrupt_none": "{reason} 该运行没有其他校验通过的检查点。",
    "ckpt.disk_full": ("磁盘已满：在 {folder} 中保存第 {step} 步的检查点需要 {needed}，剩余 {free}（还差 {short}）；{note}。"
                       "请释放该磁盘的空间，或少保留一些检查点（train.keep_last_n）。"),
    "ckpt.intact": "之前的检查点完好（'last' -> {checkpoint}）",
    "ckpt.untouched": "之前的检查点均未改动",
    # a run folder
    "rundir.no_folder": "{folder}：运行目录不存在",
    "rundir.no_file": "{file}：没有{what}文件",
    "rundir.unreadable": "{file}：无法读取{what}（{os_says}）",
    "rundir.invalid_json": "{file}：{what}不是有效的 JSON（{json_says}）",
    "rundir.not_object": "{file}：{what}必须是 JSON 对象，而不是 {py_type}",
    "rundir.what.status": "状态",
    "rundir.what.control": "控制",
    "rundir.what.profile": "性能分析摘要",
    "rundir.bad_run_id": "运行 ID {run} 只能使用字母、数字、'.'、'_' 和 '-'",
    "rundir.exists": "{folder}：已存在且不是空目录；请换一个运行 ID",
    "rundir.not_over": "{file}：只有已结束的运行可以恢复（当前状态为 {state}）；请先停止它",
    "rundir.unusable_path": "{path}：不是可用的路径（{error}）",
    "rundir.outside": "{path}：解析为 {real}，在 {root} 之外；只允许该目录之内的路径",
    # starting a run's worker
    "run.launch.not_queued": "运行 {run} 的状态为 {state}；只有排队中的运行可以启动（要继续已结束的运行，请恢复它）",
    "run.launch.not_executable": "{program}：找不到或不可执行",
    "run.launch.msrun_missing": "{program}：找不到或不可执行（msrun 随 mindspore 一起安装）",
    "run.launch.could_not_start": "无法启动 {command}：{error}",
    "run.launch.worker_not_started": "无法启动 worker：{error}",
    "run.launch.survived_kill": "运行 {run}：进程 {pids} 在 SIGKILL 之后仍然存在",
    # an evaluation
    "eval.not_settings": "{file}：应为评测设置的映射",
    "eval.unknown_settings": "{file}：未知的设置 {setting_names}",
    "eval.no_model": "'model'：请给出模型目录、检查点或运行目录",
    "eval.no_tasks": "'tasks'：请至少选择一个任务",
    "eval.limit": "'limit' = {value}：必须 >= 1（每个任务的条目数）",
    "eval.batch_size": "batch_size = {value}：必须 >= 1",
    "eval.not_installed": "'lm-eval' 未安装（可选安装）：'pip install -r requirements-eval.txt'，然后再评测",
    "eval.not_a_folder": "模型 {folder}：不是目录；请给出模型目录、检查点（runs/<id>/checkpoints/best）、运行目录或导出。",
    "eval.ckpt_export": "模型 {folder}：这是 MindSpore（.ckpt）导出；请评测它所来自的检查点，或它的合并导出。",
    "eval.not_a_model": ("模型 {folder}：既不是模型目录（config.json、tokenizer.json、*.safetensors），也不是训练检查点"
                         "（训练状态和权重），也不是 PEFT 适配器导出。"),
    "eval.include_not_folder": "包含路径 {folder}：不是目录",
    "eval.invalid_yaml": "{file}：不是有效的 YAML：{yaml_says}",
    "eval.data_file_missing": "任务 {task}：其数据文件 {file} 不在磁盘上（{folder} 中的 dataset_kwargs.data_files）",
    "eval.unknown_task": "任务 {tasks}：'lm-eval' 没有这个名字的任务（包含路径：{paths}）。",
    "eval.unknown_task_local": "任务 {tasks}：'lm-eval' 没有这个名字的任务（包含路径：{paths}）。本地任务：{task_names}。",
    "eval.unknown_task_no_paths": "任务 {tasks}：'lm-eval' 没有这个名字的任务（包含路径：无）。",
    "eval.task_data_missing": "任务 {task}：其数据不在磁盘上（运行时不联网下载；请先下载一次，或让任务指向本地文件）：{error}",
    "eval.no_best": "运行 {run} 还没有最佳检查点",
    "eval.no_base": "运行 {run}：其 config.yaml 没有指定基础模型（{error}）",
    "eval.tasks_not_local": "任务 {tasks}：不在本地任务目录中（{folders}）",
    "eval.tasks_no_folders": "任务 {tasks}：不在本地任务目录中（无）",
})

# ---- area F: Slurm, trackers, launch commands, family key maps, device rules ----
MESSAGES_ZH.update({
    # talking to Slurm (core.run.slurm); `slurm_says` is the Slurm client's own words, quoted as they are
    "slurm.not_installed": "{program}：未找到（本机没有安装 Slurm 的客户端命令）",
    "slurm.no_answer": "{command}：Slurm 在 {seconds} 秒内没有应答",
    "slurm.no_controller": "没有应答的 Slurm 控制器（sinfo：{slurm_says}）",
    "slurm.partitions_failed": "'scontrol show partition'：{slurm_says}",
    "slurm.job_query_failed": "'scontrol show job' {job_id}：{slurm_says}",
    "slurm.refused": "sbatch 拒绝了运行 {run}：{slurm_says}",
    "slurm.refused_job": "sbatch 拒绝了该作业：{slurm_says}",
    "slurm.not_submitted": "未提交：{reason}",
    "slurm.not_submitted_config": "未提交到 Slurm：{reason}",
    "slurm.already_submitted": "运行 {run} 已经是 Slurm 作业 {job_id}；不会再次提交",
    "slurm.not_queued": "运行 {run} 的状态是 {state}；只有排队中的运行才能提交（要继续已结束的运行，请恢复它）",
    "slurm.no_partition": "Slurm 没有这个名字的分区；它的分区：{partition_names}",
    "slurm.partition_state": "该分区在 Slurm 中的状态是 {state}；作业无法在那里启动",
    "slurm.partition_nodes": "分区 {partition} 有 {count} 个节点；最多请求 {limit} 个",
    "slurm.partition_nodes_per_job": "分区 {partition} 有 {count} 个节点，每个作业最多允许 {max_nodes} 个；最多请求 {limit} 个",
    "slurm.partition_time": "超过了分区 {partition} 的时间上限 {max_time}",
    "slurm.no_account": "Slurm 的记账系统中没有这个名字的账户",
    "slurm.sigterm_stop": "{reason}（各 worker 把 Slurm 的 SIGTERM 当作停止请求）",
    "slurm.sigterm_stop_saved": "{reason}（各 worker 把 Slurm 的 SIGTERM 当作停止请求，并保存了 {checkpoint}）",
    "slurm.cancelled_while_pending": "{job} 在排队时被取消（scancel）",
    # experiment trackers (core.run.tracking)
    "tracking.server_silent": ("mlflow.tracking_uri = {uri} 没有应答（{os_error}）；请启动 MLflow 服务器，或把 "
                               "mlflow.tracking_uri（或 MLFLOW_TRACKING_URI）设为正在运行的服务器"),
    "tracking.mlflow_failed": "mlflow（{uri}）：{error}",
    "tracking.swanlab_failed": "swanlab（swanlab.mode = {mode}）：{error}",
    "tracking.stopped_working": "{tracker} 停止工作（{error}）",
    "tracking.goes_on": "{reason}；训练继续，但不再使用 {tracker}（运行目录中有全部数据）",
    "tracking.mirroring": "实验跟踪：指标同步到 {tracker_names}",
    # the msrun commands for several machines (core.run.launcher)
    "launch.workers_nodes": "每节点 worker 数（{per_node}）和节点数（{node_count}）都必须 >= 1",
    "launch.master_port": "主节点端口 {port}：必须在 1024..65535 之内（msrun 的范围）",
    # a family's key map (core.spec.families)
    "family.keys_collide": "张量 {name} 和 {other} 都映射到 {target}",
    # bf16 on a device without it (core.spec.device_paths, core.engine.devices)
    "device.cpu_no_bf16": "MindSpore 的 CPU 算子没有 bf16 计算",
    "device.soc_no_bf16": "这台 Ascend 设备（{soc}）没有 bf16 计算（910A 和 310 系列芯片）；请使用 float16",
    "device.bf16_refused": "bfloat16（model.dtype {dtype}，precision.compute_dtype {compute_dtype}）：{reason}",
    # a safetensors header that is not UTF-8 (core.weights.safetensors_io)
    "weights.header_not_utf8": "文件头不是有效的 JSON：'utf-8' 解码器无法解码位置 {position} 的字节 {byte}：{codec_says}",
    "weights.header_not_utf8_bytes": ("文件头不是有效的 JSON：'utf-8' 解码器无法解码位置 {position}-{last} 的字节："
                                      "{codec_says}"),
    # issue 40: Ascend attention by chip and head size, the fit check against the device's memory
    "path.ascend_chip": ("昇腾：FlashAttentionScore 只在昇腾 A2/A3 训练系列芯片（910B、910C：SoC ascend910b、ascend910_93）上使用，"
                         "这块 {soc} 不用"),
    "path.ascend_head_dim": "昇腾：FlashAttentionScore 要求头维度是 16 的倍数且不超过 512，而这个模型的头维度是 {head_dim}",
    "path.ascend_chip_unknown": "昇腾：这里不知道芯片型号（FlashAttentionScore 只在昇腾 A2/A3 训练系列芯片 910B、910C 上运行），因此按组合注意力计算",
    "memory.device_unknown": ("{device}：启动前不知道设备内存（{why}），因此这里不把估算与它比较；“检查内存”会在设备上实测这次运行，"
                              "worker 启动时也会把估算与设备内存比较"),
    "memory.smi_missing": "PATH 中没有 {smi}",
    "memory.smi_silent": "{smi} 没有报告设备的总内存",
    "memory.fit_over": ("内存估算（每个设备 {needed} MB）超过了 {device} 设备的 {has} MB：运行可能因内存不足而失败；请减小 "
                        "train.micro_batch_size 或 data.max_seq_len，设置 recompute.policy=full，或使用 method=lora"),
    "memory.fit_ok": "内存估算（每个设备 {needed} MB）在 {device} 设备的 {has} MB 之内",
    "memory.fit_unknown": ("{device} 设备的总内存未知（{why}）：内存估算（每个设备 {needed} MB）未与它比较；训练过程中会绘制分配器的峰值"),
    "memory.not_initialised": "MindSpore 只在昇腾设备初始化后才报告其内存，而运行了第一个算子后仍未报告",
    "memory.no_properties": "mindspore.hal.get_device_properties 失败：{error}",
})

# ---- issue 39: GGUF for llama.cpp and Ollama, the OpenAI-compatible endpoint ----
MESSAGES_ZH.update({
    "gguf.no_package": "未安装 {package} 包：'pip install -r {requirements}'",
    "gguf.no_llama_cpp": "未安装 'llama-cpp-python'，而每个 GGUF 导出都要用 llama.cpp 重新加载来检验：'pip install -r {requirements}'",
    "gguf.window_not_carried": ("未携带 {window} 个词元的滑动窗口（该架构下 llama.cpp 对整个上下文做注意力，与其自带的转换器相同）："
                                "提示与回答在 {window} 个词元以内时结果相同"),
    "gguf.moe_dense_layers": "llama.cpp 的 qwen3moe 把每一层都当作专家混合层；该模型有稠密层（{layers}）",
    "gguf.moe_no_norm_topk": "llama.cpp 的 qwen3moe 会对前 k 个专家的权重重新归一化；该模型不会（norm_topk_prob 为 false）",
    "gguf.gemma_query_scale": "llama.cpp 按 1/sqrt({assumed}) 缩放 'Gemma' 的查询；该模型的 query_pre_attn_scalar 是 {scalar}",
    "gguf.family_unknown": "{family}：mindtune 没有该模型系列的 GGUF 映射",
    "gguf.bias_not_read": "{family}：llama.cpp 的 'Gemma' 不读取注意力偏置，而该模型有偏置",
    "gguf.window_too_short": ("{family}：训练时使用 {window} 个词元的滑动窗口，序列最长 {seq_len}；llama.cpp 运行该架构时没有窗口，"
                              "超过 {window} 个词元后结果会不同"),
    "gguf.llama_cpp_refused": "llama.cpp 无法加载 {file}（不提供下载）：{error}",
    "gguf.rope_type": "RoPE 缩放 {rope_type} 无法带入 GGUF（可带入 'default'、'linear' 与 llama3；Phi-3/Phi-4 还可带入 'longrope'）",
    "gguf.local_rope": "{family}：滑动层单独的 RoPE 基数无法带入 GGUF",
    "gguf.partial_rotary": "只作用于每个头一部分的 RoPE（partial_rotary_factor {factor}）无法带入 GGUF",
    "gguf.no_tokenizer_json": "{folder}：没有 tokenizer.json；GGUF 文件必须携带分词器",
    "gguf.tokenizer_kind": ("{file}：这是 {kind} 分词器；GGUF 写入器只携带字节级 BPE 分词器（GPT-2、Llama 3、Qwen 风格）"
                            "和带字节回退的 SentencePiece 式 BPE（'Llama 2'、'Mistral v0.1'、'Gemma'）"),
    "gguf.tokenizer_pre": "{file}：预分词器 {kinds} 无法告知 llama.cpp（可用 ByteLevel，或带 'Llama 3' / Qwen2 正则的 'Split' + ByteLevel）",
    "gguf.tokenizer_regex": "{file}：预分词正则 {regex} 与 llama.cpp 已知的（GPT-2、Llama 3、Qwen2）都不符",
    "gguf.tokenizer_prefix_space": "{file}：ByteLevel 预分词器会加前缀空格，而 llama.cpp 的 BPE 分词器不会",
    "gguf.tokenizer_too_big": "{file}：词元编号 {token_id} 超出了嵌入矩阵的 {rows} 行",
    "gguf.tokenizer_duplicate": "{file}：词元 {token} 有两个编号（{first} 和 {second}）；GGUF 词表不允许",
    "gguf.tensor_unmapped": "张量 {name} 在该架构下没有 llama.cpp 名称",
    "gguf.tensor_shape": "张量 {name} 的形状是 {shape}，而不是 {expected}",
    "gguf.quant": "GGUF 类型 {quant}：请使用以下之一：{choices}",
    "gguf.disk_full": "{folder} 所在的磁盘已满：GGUF 文件约需 {needed}，只剩 {free}；未写入任何内容，先前的导出未被改动",
    "gguf.lora_experts": "{module}：堆叠专家上的 LoRA 没有 llama.cpp 适配器形式；请改为导出合并后的 GGUF",
    "gguf.check_no_data": "检验要在运行 {run} 的验证集上用 llama.cpp 重新加载文件，但验证集无法读取：{error}",
    "gguf.check_no_samples": "运行 {run}：其验证集中没有可用来检验文件的样本",
    "gguf.quantize_failed": "llama.cpp 的量化器处理 {file} 失败（代码 {code}）",
    "gguf.checkpoint_gone": "{folder}：导出期间检查点发生了变化（运行仍在保存并删除了它：{error}）；请重新导出，或等运行结束后再导出",
    "gguf.check_failed": "该文件未通过检验，保存为 {file}，不提供下载：{reasons}",
    "ollama.template_not_prefix": "对话模板在渲染{what}时改动了之前的内容；'Ollama' 的 TEMPLATE 无法表达",
    "ollama.template_content": "对话模板没有把{what}的文字恰好渲染一次",
    "ollama.template_first_turn": "对话模板渲染第一个用户轮次的方式与之后的不同",
    "ollama.template_head": "对话模板渲染系统轮次的方式与其他轮次不同",
    "ollama.template_differs": "由对话模板生成的 'Ollama' 模板对 {roles} 对话的渲染与原模板不同",
    "ollama.triple_quote": "{what}中含有三个连续的双引号，'Modelfile' 无法给它加引号",
    "ollama.template_braces": "对话模板的文字中含有 '{{{{'，'Ollama' 的模板会把它当作代码",
    "serve.unknown_model": "这里不提供模型 {model}；此端点提供 {served}",
    "serve.too_long": "提示有 {tokens} 个词元，又要求再生成 {max_new_tokens} 个；该模型最多读取 {limit} 个",
    "serve.bad_json": "请求体不是有效的 JSON：{error}",
    "serve.bad_field": "请求字段 {field}：{error}",
    "serve.no_messages": "'messages'：请至少给出一条带 'role' 和字符串 'content' 的消息",
    "serve.no_login_public": "--host {host} 会在没有登录的情况下把模型提供给其他机器；请加上 '--auth user:password'（客户端把它作为 API 密钥发送），或在 127.0.0.1 上提供服务",
    "serve.unauthorized": "此端点需要登录：请把启动时给出的 'user:password'（--auth）作为 API 密钥发送",
    "serve.bad_auth": "--auth {value}：请给出 'user:password'",
})


# The console's own answers to an action (Start, Stop, a queue move, Resume, an export): each is a
# `Said`, a key of TEXTS with its parameters, rendered in the page's language from the same table as
# its English (issue 29 item 2: no regular expression over the rendered English).
TEXTS.update({
    "act.warn": ("⚠ {message}", "⚠ {message}"),
    "act.done": ("✓ {message}", "✓ {message}"),
    "act.not_started_fix": ("not started: fix the problems listed", "未开始：请先修正列出的问题"),
    "act.not_started_because": ("not started: {problem}", "未开始：{problem}"),
    "act.not_started": ("not started", "未开始"),
    "act.could_not_start": ("could not start: {problem}", "无法启动：{problem}"),
    "act.not_submitted": ("not submitted: {problem}", "未提交：{problem}"),
    "act.started": ("started {run}", "已启动 {run}"),
    "act.already_started": ("already started as {run}", "已作为 {run} 启动"),
    "act.queued_place": ("queued {run} (#{place} in the {device} queue; it starts when {busy} frees the device)",
                         "{run} 已排队（{device} 队列第 {place} 位；{busy} 释放设备后启动）"),
    "act.queued": ("queued {run} (in the queue; it starts when {busy} frees the device)",
                   "{run} 已排队（{busy} 释放设备后启动）"),
    "act.another_run": ("another run", "另一个运行"),
    "act.queue.cpu": ("cpu", "CPU"), "act.queue.gpu": ("gpu", "GPU"), "act.queue.ascend": ("ascend", "昇腾"),
    "act.resumed": ("resumed {run} from {checkpoint}", "已恢复 {run}（自 {checkpoint}）"),
    "act.queued_to_resume": ("queued to resume {run} from {checkpoint}", "已排队等待恢复 {run}（自 {checkpoint}）"),
    "act.resumed_slurm": ("resumed {run} from {checkpoint} as Slurm job {job}", "已恢复 {run}（从 {checkpoint}）：Slurm 作业 {job}"),
    "act.submitted_pending": ("submitted {run} as Slurm job {job} (pending)", "已提交 {run}：Slurm 作业 {job}（排队中）"),
    "act.submitted_pending_reason": ("submitted {run} as Slurm job {job} (pending: {reason})",
                                     "已提交 {run}：Slurm 作业 {job}（排队中：{reason}）"),
    "act.submitted": ("submitted {run} as Slurm job {job} ({state})", "已提交 {run}：Slurm 作业 {job}（{state}）"),
    "act.stopping": ("{run}: stopping (saving a checkpoint first)", "{run}：正在停止（先保存检查点）"),
    "act.stopping_now": ("{run}: stopping now", "{run}：正在立即停止"),
    "act.stop_under_way": ("{run}: a stop is already under way", "{run}：已在停止中"),
    "act.cancelled": ("cancelled {run} (it never started)", "已取消 {run}（尚未启动）"),
    "act.cancelled_slurm": ("cancelled {run} (scancel of Slurm job {job}; it never started)",
                            "已取消 {run}（scancel Slurm 作业 {job}；尚未启动）"),
    "act.moved_up": ("moved {run} up to place {place} of your queued runs", "{run} 已上移到你的排队运行中的第 {place} 位"),
    "act.moved_down": ("moved {run} down to place {place} of your queued runs", "{run} 已下移到你的排队运行中的第 {place} 位"),
    "act.already_first": ("{run} is already first in the queue", "{run} 已是队列中的第一个"),
    "act.already_last": ("{run} is already last in the queue", "{run} 已是队列中的最后一个"),
    "act.select_one_queued": ("⚠ select exactly one queued run", "⚠ 请只选择一个排队中的运行"),
    "act.select_one": ("⚠ select exactly one run", "⚠ 请只选择一个运行"),
    "act.pick_checkpoint": ("⚠ pick one of the run's checkpoints to fork from", "⚠ 请选择要分叉的运行检查点"),
    "act.no_run": ("⚠ no run selected", "⚠ 未选择运行"),
    # issue 39: Serve (app/runs/serving.py): a finished run's best checkpoint as an OpenAI-compatible endpoint
    "act.serving": ("✓ {run} is served at {where}: any OpenAI client, on this machine only",
                    "✓ {run} 已在 {where} 提供服务：任何 'OpenAI' 客户端均可调用，仅限本机"),
    "act.serve_starting": ("{run}: the endpoint is still loading the model; click Serve again to see its address",
                           "{run}：端点仍在加载模型；再次点击“提供服务”查看其地址"),
    "act.serve_failed": ("⚠ the endpoint did not start: {problem}", "⚠ 端点未能启动：{problem}"),
    "act.serve_not_over": ("⚠ {run} is {state}: a run is served when it is over and has a best checkpoint",
                           "⚠ {run} 的状态是 {state}：运行结束且有最佳检查点后才能提供服务"),
    "act.serve_stopped": ("✓ {run} is no longer served", "✓ {run} 已停止提供服务"),
    "act.not_serving": ("{run} is not served by this console", "此控制台没有为 {run} 提供服务"),
    "act.es_over": ("⚠ {run} is over; early-stopping settings only apply to a running job",
                    "⚠ {run} 已结束；早停设置只对正在运行的任务生效"),
    "act.es_sent": ("sent to the worker (request {seq}): {settings}; it applies at the next step",
                    "已发送给 worker（请求 {seq}）：{settings}；下一步起生效"),
    "act.ready": ("ready: `{file}`", "已就绪：`{file}`"),
    "act.export_failed": ("⚠ export failed: {problem}", "⚠ 导出失败：{problem}"),
    "act.with_origin": ("{message}; {origin}", "{message}；{origin}"),
    "act.made_from": ("made from {run}: {changes}", "基于 {run}：{changes}"),
    "act.forked_from": ("forked from {run} at step {step}: {changes}", "分叉自 {run} 第 {step} 步：{changes}"),
    "act.no_change": ("no setting changed", "未改动任何设置"),
})


class Said(str):
    """One of the console's own answers, e.g. `Said("act.started", run=run_id)`: the string is its
    English, so logs, tests and callers that compare text keep working; `key` and `params` render it
    in another language from TEXTS (`in_lang`), never by re-reading the English. A parameter that is
    a Said renders in the same language; one named `problem` is core's message (problem_text); other
    values (run ids, settings, numbers, Slurm's words) stay as they are."""

    key: str
    params: dict[str, Any]

    def __new__(cls, key: str, **params: Any):
        if key not in TEXTS:
            raise KeyError(f"no text for {key!r} in app.i18n.TEXTS")
        said = super().__new__(cls, _render(key, params, "en"))
        said.key, said.params = key, params
        return said

    def __getnewargs_ex__(self):  # copies and pickles (Gradio's state) build it again from its key
        return (self.key,), self.params

    def in_lang(self, lang: str) -> str:
        return _render(self.key, self.params, lang)


def _render(key: str, params: dict[str, Any], lang: str) -> str:
    values = {name: value.in_lang(lang) if isinstance(value, Said)
              else problem_text(value, lang) if name == "problem" else value
              for name, value in params.items()}
    return text(key, lang).format(**values)


def action_text(message: str, lang: str) -> str:
    """An answer to an action in `lang`: a Said from its key; anything else is core's message (an
    error the action met, '⚠ ' before it when marked so), said in `lang` by problem_text."""
    if isinstance(message, Said):
        return message.in_lang(lang)
    if not message or lang != "zh":
        return message
    mark, rest = ("⚠ ", message[2:]) if message.startswith("⚠ ") else ("", message)
    return mark + problem_text(rest, lang)


def memory_note(note: str, lang: str) -> str:
    """One of core.spec.memory's notes in `lang` (a Message by its id; a text as written)."""
    return reason_text(note, lang)


def reason_text(reason: str | None, lang: str, message: dict | None = None) -> str:
    """A core message in `lang` — why a run ended, a memory note: from its message id and parameters
    (a Message, or its record: `Status.reason_message`, core.spec.messages); a text without one (a
    run folder written before the ids, an error's own text) as written, never read back."""
    if not reason or lang != "zh":
        return reason or ""
    said = reason if isinstance(reason, Message) else Message.from_json(message) if message else None
    return _problem_message_zh(said) if said is not None else reason


# Help lines of the widgets that stand for a config field in another shape, or for none.
TEXTS.update({
    "help.where": ("a Slurm partition: sbatch submits the run, srun starts msrun on every node; its folder is on "
                   "shared storage", "Slurm 分区：由 sbatch 提交，srun 在每个节点上启动 msrun；运行目录位于共享存储上"),
    "help.launch.workers": ("with Slurm: nodes × workers per node (set them under the Slurm job settings)",
                            "使用 Slurm 时：节点数 × 每节点 worker 数（在“Slurm 作业设置”中设置）"),
    "help.model.picker": ("folders under --models-dir; ⚠ marks one that cannot be loaded (reason in the table)",
                          "--models-dir 下的目录；⚠ 表示无法加载（原因见模型目录表）"),
    "help.lora.targets": ("linear layers of this model's transformer blocks", "该模型 Transformer 块中的线性层"),
    "help.lora.target_regex": (r"full match on dotted names, e.g. .*\.(q_proj|v_proj)",
                               r"对带点的模块名做完整匹配，例如 .*\.(q_proj|v_proj)"),
    "help.train.length": ("optimizer steps, or passes over the data", "优化器步数，或遍历数据的轮数"),
    "help.parallel.workers": ("msrun workers on this machine", "本机上的 msrun worker 数"),
})


def _field_help() -> None:
    from app.tabs.form import fields  # the form's own fields (core.spec.config's help; MindSpore-free)

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


# The console's own answers: a run that does not fit, the dry run, saving and loading a config, the
# Runs tab's resume and delete.
TEXTS.update({
    "fit.need": ("{mb} MB per worker", "每个 worker {mb} MB"), "fit.workers": (" × {n} workers", " × {n} 个 worker"),
    "fit.more": ("the memory estimate ({need}) is more than this machine's {device} MB",
                 "内存估算（{need}）超过本机的 {device} MB"),
    "fit.to_fit": (". To fit: ", "。要放下，可以："), "fit.item": ("{change}: {mb} MB per worker", "{change}：每个 worker {mb} MB"),
    "fit.fits": (" — fits", "——可以放下"), "fit.lora": ("method full → lora", "微调方法 full → lora"),
    "fit.half_batch": ("train.micro_batch_size {micro} → {half} with train.grad_accum_steps {accum} → {accum2} "
                       "(the same global batch)",
                       "train.micro_batch_size {micro} → {half}，同时 train.grad_accum_steps {accum} → {accum2}（全局批大小不变）"),
    "fit.recompute": ("recompute.policy full (every layer)", "recompute.policy full（每一层都重计算）"),
    "fit.seq": ("data.max_seq_len {seq} → {half} (longer samples are cut)", "data.max_seq_len {seq} → {half}（更长的样本会被截断）"),
    "dry.failed": ("dry run failed: {error}", "试运行失败：{error}"),
    "dry.fix_first": ("fix the problems listed first", "请先修正列出的问题"),
    "dry.timeout": ("no answer within {s} s", "{s} 秒内没有结果"),
    "dry.measured": ("measured {mb} per worker ({steps} training steps and one evaluation batch, {s} s)",
                     "实测每个 worker {mb}（{steps} 个训练步和一个评估批，{s} 秒）"),
    "dry.estimate": ("estimate {mb} MB ({gap}% of the measured)", "估算 {mb} MB（相对实测 {gap}%）"),
    "dry.reference.frozen_copy": ("{objective}: the frozen reference copy held and measured ({mb} MB of weights)",
                                  "{objective}：冻结的参考模型副本已计入实测（权重 {mb} MB）"),
    "dry.reference.adapter_off": ("{objective}: the reference is the base with the adapter off (no second copy)",
                                  "{objective}：参考模型为关闭适配器的基座（无第二份副本）"),
    "dry.machine": ("{mb} MB on this machine: ", "本机 {mb} MB："),
    "config.loaded": ("loaded `{file}`", "已加载 `{file}`"), "config.saved": ("saved `{file}`", "已保存 `{file}`"),
    "config.not_saved": ("⚠ not saved: {why}", "⚠ 未保存：{why}"),
    "runs.msg.select_resume": ("⚠ select exactly one stopped or failed run to resume", "⚠ 请只选择一个已停止或失败的运行来恢复"),
    "runs.msg.select_open": ("⚠ select one run to open", "⚠ 请选择一个要打开的运行"),
    "runs.msg.select_delete": ("⚠ select the runs to delete", "⚠ 请选择要删除的运行"),
    "runs.msg.busy": ("⚠ {run} is {state}: stop it before deleting it", "⚠ {run} 的状态为{state}：请先停止再删除"),
    "runs.msg.confirm": ("Delete {names} with all checkpoints and exports? This cannot be undone.",
                         "删除 {names} 及其全部检查点和导出文件？此操作无法撤销。"),
    "runs.msg.root": ("⚠ {run}: refusing to delete the runs folder itself", "⚠ {run}：拒绝删除运行目录本身"),
    "runs.msg.alive": ("⚠ {run}: a process of this run is still alive; stop it first", "⚠ {run}：该运行仍有进程存活；请先停止"),
    "runs.msg.deleted": ("deleted {runs} at {time}", "已于 {time} 删除 {runs}"),
    "runs.msg.cancelled": ("cancelled", "已取消"),
    # the Runs tab's comparison (app.tabs.runs_callbacks.config_diff_html, deltas_html)
    "runs.diff_empty": ("select runs to compare their configs", "选择运行以对比其配置"),
    "runs.diff_setting": ("setting", "设置"), "runs.na": ("n/a", "不适用"),
    "runs.delta_changed": ("changed settings", "改动的设置"), "runs.delta_same": ("(same settings)", "（设置相同）"),
    "runs.delta_against": ("against {run}", "对比 {run}"),
    "delta.val_ppl": ("ΔPPL", "ΔPPL"), "delta.exact_match": ("Δexact match", "Δ精确匹配"),
    "delta.bleu": ("ΔBLEU", "ΔBLEU"), "delta.rouge1": ("ΔROUGE-1", "ΔROUGE-1"), "delta.rouge2": ("ΔROUGE-2", "ΔROUGE-2"),
    "delta.rougeL": ("ΔROUGE-L", "ΔROUGE-L"),
    "dp.pairs": ("Preference pairs: the first {n} of {total}, chosen and rejected answers side by side (prompt "
                 "masked, each answer trained); identical pairs among them: {identical} (dropped)",
                 "偏好对：共 {total} 条中的前 {n} 条，chosen 与 rejected 回答并排显示（提示被屏蔽，各自训练回答）；"
                 "其中完全相同的对：{identical}（丢弃）"),
    "dp.kto": ("KTO answers: the first {n} of {total}, each with its label (prompt masked, answer trained)",
               "KTO 回答：共 {total} 条中的前 {n} 条，各自带标签（提示被屏蔽，训练回答）"),
    "dp.chosen": ("chosen", "chosen（选中）"), "dp.rejected": ("rejected", "rejected（拒绝）"),
    "dp.desirable": ("desirable (label true)", "可取（label 为 true）"),
    "dp.undesirable": ("undesirable (label false)", "不可取（label 为 false）"),
    "delta.reward_accuracy": ("Δreward accuracy", "Δ奖励准确率"), "delta.reward_margin": ("Δmargin", "Δ奖励间隔"),
    "delta.tokens_per_s": ("Δtokens/s", "Δtoken/秒"), "delta.peak_mem_mb": ("Δpeak MB", "Δ峰值 MB"),
})


# ---- problems: the messages of core's ConfigError, DataError, the model loader's refusals and
# the console's own checks, as the page shows them. They are English sentences with facts in them
# (file, line, key, value, valid values); each phrase below is replaced by its 简体中文 with the
# facts kept as written. The English text stays the message of record (CLI, logs, status.json).
# In 中文, a list of names (keys, fields, roles) is quoted, as values are: 'name', 'seed'.

def _names(listed: str) -> str:
    """'name, runs_dir, seed' -> "'name', 'runs_dir', 'seed'" (names already quoted stay)."""
    return ", ".join(n if n.startswith(("'", '"')) else f"'{n}'" for n in (p.strip() for p in listed.split(","))
                     if n)


_JSON_TYPES_ZH = {"an array": "数组", "a string": "字符串", "a boolean": "布尔值", "a number": "数字", "null": "null",
                  "an object": "对象"}
_PY_TYPES_ZH = {"list": "列表", "int": "整数", "float": "小数", "str": "字符串", "bool": "布尔值", "NoneType": "null",
                "dict": "对象"}


def _value(shown: str) -> str:
    """A Python repr in a message (None, True, False) in the JSON spelling the config file uses."""
    return {"None": "null", "True": "true", "False": "false"}.get(shown, shown)


def _or_list(listed: str) -> str:
    return listed.replace(" or ", " 或 ")


def _quoted(said: str) -> str:
    """A library's own words (Python's json and re, PyYAML, jinja2, tokenizers' serde, safetensors, the
    OS's errno line) as the library said them, quoted (“…”) inside the 中文 sentence: nothing re-reads them."""
    return f"“{said}”"


# the operating system's reasons (strerror) and the UTF-8 decoder's, the common ones; others stay as said
OS_ZH = {"No such file or directory": "没有这个文件或目录", "Permission denied": "权限不足",
         "Is a directory": "这是一个目录", "Not a directory": "不是目录", "Too many open files": "打开的文件过多",
         "No space left on device": "设备上没有剩余空间", "Input/output error": "输入/输出错误",
         # a server that does not answer (area F: an MLflow tracking server)
         "Connection refused": "连接被拒绝", "Connection reset by peer": "连接被对方重置",
         "Network is unreachable": "网络不可达", "No route to host": "没有到主机的路由", "timed out": "超时",
         "Name or service not known": "无法解析主机名"}
CODEC_ZH = {"invalid start byte": "无效的起始字节", "invalid continuation byte": "无效的后续字节",
            "unexpected end of data": "数据意外结束"}

# a core message's parameters that hold a library's own words, in 中文 by that library's table
LIBRARY_PARAMS_ZH = {"yaml_says": _quoted, "os_says": lambda said: OS_ZH.get(said, said),
                     "codec_says": lambda said: CODEC_ZH.get(said, said),
                     "py_type": lambda name: _PY_TYPES_ZH.get(name, f" {name}")}
# area B's library words
LIBRARY_PARAMS_ZH["serde_says"] = _quoted
LIBRARY_PARAMS_ZH["jinja_says"] = _quoted
LIBRARY_PARAMS_ZH["py_value"] = _value  # a Python repr (None, True) as the config file writes it (null, true)
LIBRARY_PARAMS_ZH["supported_names"] = LIBRARY_PARAMS_ZH["model_types"] = _names  # quoted, as values are
# area D's: a list of values (quoted), 'a' or 'b', the safetensors library's reason
LIBRARY_PARAMS_ZH["choices"] = _names
LIBRARY_PARAMS_ZH["or_choices"] = _or_list
LIBRARY_PARAMS_ZH["safetensors_says"] = _quoted




def _format_help_text(listed: str) -> str:
    """core.data.formats.format_help()'s 'alpaca: instruction, output (input, ... optional); text: text'."""
    parts = []
    for part in listed.strip().removesuffix(";").split("; "):
        fmt, _, fields = part.partition(": ")
        required, _, optional = fields.partition(" (")
        shown = f"{fmt}: {_names(required)}"
        if optional:
            shown += f"（可选 {_names(optional.removesuffix(')').removesuffix(' optional'))}）"
        parts.append(shown)
    return "; ".join(parts)


# ---- area A: the console's own words about uploads (app.data.datasets) ----
# the data's messages (core.data, ids data.*): Python's json module's reasons and its value kinds by
# their tables; a list of names (columns, fields, roles) quoted, as values are; format_help()'s list
LIBRARY_PARAMS_ZH.update({
    "os_error": lambda said: OS_ZH.get(said) or _quoted(said),  # a strerror alone, or Python's '[Errno 13] ...'
    "json_says": _quoted,
    "json_type": lambda kind: _JSON_TYPES_ZH.get(kind, f" {kind}"),
    **dict.fromkeys(("header_names", "read_names", "field_names", "role_names", "required_names", "missing_names",
                     "valid_names", "split_names", "lacks_names",
                     "optional_names"), _names),
    "needs_fields": lambda listed: listed.replace(" and ", ", "),
    "formats": _format_help_text,
    "split_role": lambda role: {"train": "训练", "validation": "验证", "test": "测试"}.get(role, f" {role} "),
    "turn_role": lambda role: {"system": "系统", "tool": "工具"}.get(role, f" {role} "),
    **dict.fromkeys(("wanted", "held"), lambda said: _DATA_KINDS_ZH.get(said, said)),
    "record_at": lambda where: _record_at(where),
    "entry": lambda entry: _record_at(entry),
    "article": lambda article: "",  # English's 'a'/'an' before a media kind
    "hub_place": lambda place: {"the Hugging Face hub": " Hugging Face 模型中心", "the ModelScope hub": " ModelScope 模型中心",
                                "the Modelers hub": " Modelers 模型中心", "cloud storage": "云存储"}.get(place, f" {place}"),
    "mapping_kind": lambda kind: {"column": "列", "tag": "标签"}.get(kind, f" {kind} "),
    "dataset_names": lambda listed: {"none": "无", "none loadable": "无（没有可加载的）"}.get(listed) or _names(listed),
    "media": lambda kind: {"image": "图像", "audio": "音频", "video": "视频", "images": "图像", "audios": "音频",
                           "videos": "视频"}.get(kind, f" {kind} "),
    **dict.fromkeys(("record_kind", "first_kind"), lambda kind: {
        "a preference pair (chosen/rejected)": "偏好对（chosen/rejected）", "a KTO answer (label)": " KTO 回答（'label'）",
        "a plain conversation": "普通对话"}.get(kind, f" {kind} ")),
})
# what train.objective reads (core.data.preference._source_kind), in 中文
_DATA_KINDS_ZH = {"preference pairs ('chosen' and 'rejected')": "偏好对（'chosen' 和 'rejected'）",
                  "KTO answers (a boolean 'label')": " KTO 回答（布尔值 'label'）",
                  "plain conversations without 'chosen'/'rejected' or 'label'":
                      "不含 'chosen'/'rejected' 或 'label' 的普通对话"}


def place_text(where: Any, lang: str) -> str:
    """A record's place (core.data.files.Where) in `lang`; a text as written."""
    return _record_at(where) if lang == "zh" else str(where)


def _record_at(where: Any) -> str:
    """A record's place (core.data.files.Where: 'data/a.jsonl line 3', a catalogue's dataset) in 中文,
    by its kind's id; any other text as written."""
    if not isinstance(where, Where):
        return str(where)
    return MESSAGES_ZH[where.key].removesuffix("：{reason}").format(**where.params)
TEXTS.update({
    "upload.unsupported": ("{file}: unsupported file type {ext}; upload one of {accepted} (a .zip of a dataset folder)",
                           "{file}：不支持的文件类型 {ext}；请上传 {accepted} 之一（或数据集目录的 .zip）"),
    "upload.no_extension": ("(none)", "（无）"),
    "upload.too_big": ("{file}: {mb} MB is over the upload limit of {limit} MB (start the console with "
                       "--max-upload-mb to change it)",
                       "{file}：{mb} MB 超过上传上限 {limit} MB（启动控制台时用 --max-upload-mb 修改）"),
    "upload.not_zip": ("{file}: not a readable zip archive ({zip_says})", "{file}：不是可读取的 zip 压缩包（{zip_says}）"),
    "upload.too_many_files": ("{file}: {n} files; at most {limit}", "{file}：有 {n} 个文件；最多 {limit} 个"),
    "upload.unpacks_too_big": ("{file}: unpacks to {mb} MB, over the upload limit of {limit} MB",
                               "{file}：解压后 {mb} MB，超过上传上限 {limit} MB"),
    "upload.refused_member": ("{file}: refused member {member} (absolute path, '..' or a link)",
                              "{file}：拒绝成员 {member}（绝对路径、'..' 或链接）"),
    "upload.zip.not_zip": ("File is not a zip file", "文件不是 zip 格式"),  # Python's zipfile's own reason
    "upload.no_dataset": ("{file}: no dataset inside (expected train.<ext> files, a save_to_disk folder or Parquet "
                          "shards)", "{file}：其中没有数据集（应为 train.<ext> 文件、save_to_disk 目录或 Parquet 分片）"),
})


# ---- area C: the console's own checks (app.tabs.train_callbacks, app.paths, app.runs.jobs, app.tabs.runs_callbacks) ----
LIBRARY_PARAMS_ZH["re_says"] = _quoted
# the form's paired widgets by the name their error line gives them (app.tabs.form.PAIRED_NAMES)
WIDGET_NAMES_ZH = {"steps": "步数", "epochs": "轮数", "target modules": "目标模块", "where to run": "运行位置",
                   "partition": "分区"}
LIBRARY_PARAMS_ZH["widget"] = lambda name: WIDGET_NAMES_ZH.get(name, name)
# area F's: Slurm's partitions (names, quoted) and a model's projections, 'none' when there are none
LIBRARY_PARAMS_ZH["partition_names"] = lambda listed: "无" if listed == "none" else _names(listed)
LIBRARY_PARAMS_ZH["partition"] = lambda name: f"'{name}'"  # a name the cluster's administrator chose
LIBRARY_PARAMS_ZH["projections"] = lambda listed: "无" if listed == "none" else listed
TEXTS.update({
    "check.warn": ("⚠ {problem}", "⚠ {problem}"),  # a core error (a Message, or an exception that keeps them)
    "dry.exited": ("core.dry_run exited with {code}", "core.dry_run 退出码为 {code}"),
    # a run id, resume's refusals (app.runs.jobs)
    "check.not_run_id": ("{run} is not a run id", "{run} 不是运行 ID"),
    "check.no_run": ("no run {run} in {folder}", "{folder} 中没有运行 {run}"),
    "check.not_resumable": ("{run} is {state}; only a stopped or failed run can be resumed",
                            "{run} 的状态为{state}；只有已停止或失败的运行可以恢复"),
    "check.state": ("{state}", "{state_zh}"),  # a run's state as status.json writes it, in 中文 as the badge says it
    "check.no_such_checkpoint": ("{run} has no checkpoint {checkpoint} (its checkpoints/ holds {held})",
                                 "{run} 没有检查点 {checkpoint}（其 checkpoints/ 中有：{held}）"),
    "check.nothing": ("nothing", "无"), "check.none": ("none", "无"),
    "check.no_checkpoint": ("{run} saved no checkpoint to resume from; start a new run instead",
                            "{run} 没有保存可恢复的检查点；请开始新的运行"),
    "check.resume_here": ("{run} ran on {nodes} node(s) x {per_node} worker(s) (data parallel {width}); resuming it on "
                          "this machine needs {width} workers: {problem}",
                          "{run} 曾在 {nodes} 个节点 × 每节点 {per_node} 个工作进程上运行（数据并行 {width}）；在本机恢复"
                          "需要 {width} 个工作进程：{problem}"),
    # the folders this console may read (app.paths), the model folder and the data (app.tabs.train_callbacks, app.tabs.data_callbacks)
    "check.outside_roots": ("{path}: outside the folders this console may read ({roots})",
                            "{path}：不在本控制台可读取的目录中（{roots}）"),
    "check.none_configured": ("(none configured)", "（未配置）"),
    "check.in_base": ("base: {problem}", "base：{problem}"),
    "check.not_model_folder": ("{path} is not a model folder under {roots}", "'{path}' 不是 {roots} 下的模型目录"),
    "check.not_loadable": ("{name} is not loadable: {problem}", "'{name}' 无法加载：{problem}"),
    "check.cannot_read_data": ("cannot read the data: {problem}", "无法读取数据：{problem}"),
    # a fork (app.tabs.train_callbacks.new_from_run, fork_errors)
    "check.no_fork_checkpoint": ("{run} has no checkpoint step-{step} (kept: {kept})", "{run} 没有检查点 step-{step}（保留的：{kept}）"),
    "check.fork_keeps": ("a fork keeps {setting} of {run} ({value}): its checkpoint holds weights of that shape",
                         "分叉须保持 {run} 的 {setting}（{value}）：其检查点中的权重是这个形状"),
    "check.fork_steps": ("steps must be more than {step}: the fork counts on from the checkpoint's step (e.g. {example})",
                         "步数必须大于 {step}：分叉从检查点的步数接着计数（例如 {example}）"),
    # the Try tab's generation (app.tabs.try_callbacks)
    "check.no_answer": ("no answer within {s} s", "{s} 秒内没有结果"),
})


def problem_text(message: str | BaseException | None, lang: str) -> str:
    """A problem message (core's ConfigError, DataError, the model loader's refusal, the console's
    own checks) in `lang`, the facts in it (file, line, key, value, valid values) kept as written.
    A core message (core.spec.messages.Message, and the lines of an error that keeps them: its
    `said`) is rendered from its id, the console's own (Said) from TEXTS. Another process's error
    comes as its record (core.spec.errors.read_report, status.json's reason_message); a text without
    an id (a run folder written before the ids, a library's own words) stays as written."""
    if isinstance(message, BaseException):
        said = getattr(message, "said", None)
        if lang == "zh" and isinstance(said, list):
            return "\n".join(problem_text(line, lang) for line in said)
        message = str(message)
    if isinstance(message, Said):  # the console's own words (app.i18n.TEXTS)
        return message.in_lang(lang)
    if lang != "zh" or not message:
        return message or ""
    if isinstance(message, Message):
        return _problem_message_zh(message)
    return str(message)


LIST_SEPARATOR_ZH = "，"  # between a list parameter's items (core.spec.messages.LIST_PARAMS)


def _problem_message_zh(message: Message) -> str:
    """A core message in 中文; a message parameter that is text (a reason that came without its id)
    as written."""
    values = {name: _problem_message_zh(value) if isinstance(value, Message)
              else ("\n" if name in LINE_PARAMS else LIST_SEPARATOR_ZH).join(
                  _problem_message_zh(item) if isinstance(item, Message) else str(item) for item in value)
              if isinstance(value, list)
              else problem_text(value, "zh") if name in MESSAGE_PARAMS and isinstance(value, str)
              else LIBRARY_PARAMS_ZH[name](value) if name in LIBRARY_PARAMS_ZH else value
              for name, value in message.params.items()}
    return MESSAGES_ZH.get(message.key, CATALOGUE[message.key]).format(**values)


# the Runs tab's Evaluate action (lm-evaluation-harness; app/tabs/eval_callbacks.py)
TEXTS.update({
    "eval.title": ("**Evaluate** (lm-evaluation-harness): the selected run's best checkpoint and its base model, "
                   "each in the background with its own folder under runs/evals/",
                   "**评测**（`lm-evaluation-harness`）：所选运行的最佳检查点及其基础模型，各自在后台运行，"
                   "结果保存在 runs/evals/ 下的独立目录"),
    "eval.tasks": ("Tasks (local task folders: data/eval_tasks)", "任务（本地任务目录：data/eval_tasks）"),
    "eval.targets": ("Models to evaluate", "要评测的模型"),
    "eval.target.best": ("fine-tuned (best)", "微调后（最佳）"),
    "eval.target.base": ("base", "基础模型"),
    "eval.limit": ("Items per task (0 = all)", "每个任务的条目数（0 = 全部）"),
    "eval.chat": ("Apply the chat template", "使用对话模板"),
    "eval.start": ("Evaluate", "评测"),
    "eval.stop": ("Stop evaluation", "停止评测"),
    "eval.none": ("No evaluation of this run yet.", "该运行尚无评测。"),
    "eval.col.metric": ("task / metric", "任务 / 指标"),
    "eval.col.delta": ("Δ (fine-tuned − base)", "Δ（微调后 − 基础）"),
    "eval.msg.select_one": ("Select exactly one run to evaluate.", "请只选择一个运行进行评测。"),
    "eval.msg.no_tasks": ("Choose at least one task.", "请至少选择一个任务。"),
    "eval.msg.started": ("Evaluation started: {runs}", "评测已开始：{runs}"),
    "eval.msg.stopped": ("Stopped: {runs}", "已停止：{runs}"),
})


MESSAGES_ZH.update({
    # objectives (core.spec.objectives) and GRPO's settings (core.spec.config's grpo: section)
    "config.monitor_not_for_objective": "train.objective {objective} 不记录 {monitor}；早停可以监控 {monitors}",
    "config.grpo_epsilon_high": "grpo.epsilon_high {high} 小于 grpo.epsilon {low}：上侧裁剪范围不能更窄",
    "config.grpo_too_long": ("grpo.max_prompt_len {prompt} + grpo.max_new_tokens {new} 超过了 data.max_seq_len "
                             "{total}：请调大 data.max_seq_len 或调小其中之一"),
    "memory.grpo_rows": "grpo：{prompts} 个提示词的微批训练 {prompts} × {generations} 个补全（激活值按补全行计）",
    "memory.grpo_merged": "grpo 与 LoRA：采样时推理内核持有每个适配矩阵合并适配器后的 float32 副本：{mb} MB",
    "config.grpo_temperature_16bit": ("在 CPU 上以 LoRA 训练 {dtype} 的 model.dtype 时 grpo.temperature 必须为 1："
                                      "冻结的 16 位输出头在一个内核里按温度 1 计算损失；请把 grpo.temperature 设为 1，"
                                      "或把 model.dtype 设为 float32"),
    "field.rule.rewards": "奖励函数列表，每项为 {{function: 名称, weight: 权重, ...}}，名称为 {functions} 之一",
    "field.rewards_empty": "没有任何奖励函数；必须是{reason}",
    "field.reward_item": "第 {index} 个奖励不是映射；必须是{reason}",
    "field.reward_function": "第 {index} 个奖励：未知函数 {name}；应为 {functions} 之一",
    "field.reward_function_suggest": "第 {index} 个奖励：未知函数 {name}（是否想写 {suggestion}？）；应为 {functions} 之一",
    "field.reward_needs": "第 {index} 个奖励（{function}）需要 '{setting}'",
    "field.reward_unknown_key": "第 {index} 个奖励（{function}）有未知设置 '{setting}'；可用的设置为 {keys}",
    "field.reward_weight": "第 {index} 个奖励（{function}）：权重 {value} 不是有限数",
    "field.reward_regex": "第 {index} 个奖励：模式不是正则表达式（{re_says}）",
})


MESSAGES_ZH.update({
    # the reward model (train.objective reward): its checkpoints, its scorer as a GRPO reward function, its
    # export (core.engine.reward_model, reward_scorer, export)
    "reward.no_head": "{file} 中没有 {name}：它不是奖励模型的检查点",
    "reward.no_run": "{run} 不是运行文件夹（没有 status.json）：请指定一个已完成的奖励模型运行",
    "reward.not_finished": ("奖励模型运行 {run} 的状态是 '{state}'，尚未完成：只有已完成（或早停）的运行才能为补全打分；"
                            "请等它结束，或指定另一个运行"),
    "reward.not_reward_run": ("{run} 是 train.objective {objective} 的运行，不是奖励模型：请指定以 train.objective 'reward' "
                              "训练的运行"),
    "reward.no_best": "奖励模型运行 {run} 没有最佳检查点（checkpoints/best）",
    "reward.counts": "奖励模型收到 {prompts} 个提示词和 {completions} 个补全：它为每个提示词的一个补全打分",
    "reward.prompt_not_text": "第 {index} 个提示词的类型是 '{kind}'：奖励模型接受文本或聊天消息列表作为提示词",
    "reward.completion_not_text": ("第 {index} 个补全的类型是 '{kind}'：奖励模型接受文本或 "
                                   "[{{role: assistant, content: text}}] 作为补全"),
    "export.reward_layout": ("合并导出的奖励模型写成 transformers 的 XxxForSequenceClassification，仅支持可逐个张量流式读取的 "
                             "XxxForCausalLM 检查点；{architecture} 不属于此类：请导出 'mindspore' 格式，或在 LoRA 下导出 'peft'"),
})


# issue 40: a GPU/Ascend device's memory and chip before launch (app.runs.devices.device_note, core.run.accelerators)
# and the dry run's reading of the device (app.tabs.train_callbacks.dry_run_html)
TEXTS.update({
    "device.ascend_flash": ("; chip {soc}: FlashAttentionScore for fp16/bf16 attention (AMP O2) with head sizes that "
                            "are multiples of 16",
                            "；芯片 {soc}：fp16/bf16 注意力（AMP O2）且头维度是 16 的倍数时用 FlashAttentionScore"),
    "device.ascend_composed": ("; chip {soc}: no FlashAttentionScore (Atlas A2/A3 chips only), attention composed",
                               "；芯片 {soc}：没有 FlashAttentionScore（只在昇腾 A2/A3 芯片上），注意力用组合算子"),
    "device.ascend_chip_unknown": ("; chip unknown (npu-smi did not say): composed attention assumed",
                                   "；芯片未知（npu-smi 未报告）：按组合注意力计算"),
    "device.memory": ("; {mb} MB each", "；每块 {mb} MB"),
    "device.memory_unknown": ("; memory unknown before launch ({why})", "；启动前内存未知（{why}）"),
    "dry.device": ("{mb} MB on the {device} device: ", "{device} 设备 {mb} MB："),
    "fit.more_device": ("the memory estimate ({mb} MB per worker) is more than each {name} device's {device} MB",
                        "内存估算（每个 worker {mb} MB）超过了每块 {name} 设备的 {device} MB"),
    "dry.device_unknown": ("the {device} device's memory: unknown (MindSpore did not report it)",
                           "{device} 设备的内存：未知（MindSpore 未报告）"),
})


MESSAGES_ZH.update({
    # GRPO's prompt sets (core.data.prompts) and reward functions (core.eval.rewards)
    "data.grpo_pairs": ("字段 {field}：这条记录是偏好对（chosen/rejected）；train.objective grpo 读取提示以及奖励函数使用的列"
                        "（例如 'prompt' 和 'answer'）：请选择提示集，或对偏好对使用 train.objective dpo、simpo 或 orpo"),
    "data.grpo_kto": ("字段 {field}：这条记录是 KTO 回答（带布尔标签）；train.objective grpo 读取提示以及奖励函数使用的列"
                      "（例如 'prompt' 和 'answer'）：请选择提示集，或使用 train.objective kto"),
    "data.grpo_text": ("纯文本记录没有提示（data.format text）；train.objective grpo 读取 'prompt'、"
                       "'messages'/'conversations' 或 alpaca 的 'instruction'"),
    "data.grpo_no_prompt": ("字段 {field}：没有提示；train.objective grpo 读取 'prompt'（文本或消息）、"
                            "'messages'/'conversations'（回答之前的轮次）或 alpaca 的 'instruction'，而这条记录只有 "
                            "{field_names}（其他名称可用 data.columns 映射）"),
    "data.grpo_preference_entry": "这是偏好数据（chosen/rejected 对或 KTO 标签）；train.objective grpo 读取提示。请选择其他数据集",
    "data.prompts_overlong": ("{count} 条提示超过 grpo.max_prompt_len {max_prompt_len} 个 token（data.overlong: error）："
                              "{listed}；请调大 grpo.max_prompt_len，或把 data.overlong 设为 'truncate'（从左侧截断）或 'skip'"),
    "data.no_prompts_left": "{file}：没有剩下任何提示：每条都超过 grpo.max_prompt_len {max_prompt_len} 个 token，且 data.overlong 为 'skip'",
    "stats.prompts_cut": ("{split_role}：{records} 条提示中有 {count} 条超过 grpo.max_prompt_len {max_prompt_len} 个 token，"
                          "已从左侧截断，保留结尾（data.overlong: {policy}）：{listed}"),
    "stats.prompts_skipped": ("{split_role}：{records} 条提示中有 {count} 条超过 grpo.max_prompt_len {max_prompt_len} 个 token，"
                              "已跳过（data.overlong: {policy}）：{listed}"),
    "stats.column_in_some": "{split_role}：列 {column} 只在 {records} 条记录中的 {count} 条里有值；读取它的奖励函数会在其余记录处中止训练",
    "stats.answer_from": "{split_role}：{records} 条记录中有 {count} 条的 'answer' 列取自其 {field}",
    "stats.final_turn_dropped": ("{split_role}：{records} 段对话中有 {count} 段以助手轮次结尾且自带 'answer' 列："
                                 "该轮次未放入提示"),
    "reward.file_import": "奖励函数 {function}：{file} 无法导入：{error}",
    "reward.file_no_function": "奖励函数 {function}：{file} 中没有函数 {name}",
    "reward.file_not_callable": "奖励函数 {function}：{file} 中的 {name} 是 {py_type}，不是函数",
    "reward.raised": "奖励函数 {function} 抛出了异常 {error}",
    "reward.not_a_list": "奖励函数 {function} 返回的是 {py_type}，不是数字列表",
    "reward.wrong_count": "奖励函数 {function} 为 {expected} 个补全返回了 {count} 个值",
    "reward.not_a_number": "奖励函数 {function}：第 {index} 个值是 {value}（{py_type}），不是数字",
    "reward.not_finite": "奖励函数 {function}：第 {index} 个值是 {value}，不是有限数",
    "reward.timeout": "奖励函数 {function} 在一个批次上运行超过 grpo.reward_timeout_s = {seconds} 秒，已被停止",
    "reward.process_ended": "奖励进程在运行奖励函数 {function} 时结束了（退出码 {code}）",
    "reward.no_value": "奖励函数 {function}：{record} 的列 {column} 没有值",
    "reward.math_answer": "奖励函数 {function}：列 {column} 中的答案 {value}（{record}）无法被 'math-verify' 读取为数学表达式",
    "reward.no_scorer": "奖励函数 {function}：奖励模型（运行 {run}）由训练引擎打分，但这里没有提供打分器",
    "reward.setting_not_count": "奖励函数 {function}：{setting} 必须是不小于 1 的整数（token 数），而不是 {value}",
    "reward.setting_not_bool": "奖励函数 {function}：{setting} 必须是 true 或 false，而不是 {value}",
    "reward.soft_over_max": "奖励函数 {function}：soft_tokens {soft} 大于 max_tokens {limit}",
    "reward.check_column": "第 {index} 个奖励（{function}）读取列 {column}，但数据中没有这一列（现有的列：{field_names}）",
    "reward.check_no_math": "第 {index} 个奖励（'math'）需要 'math-verify' 包：'pip install math-verify'",
    "reward.check_file_missing": "第 {index} 个奖励（file）：{path} 不存在",
    "reward.check_file_outside": "第 {index} 个奖励（file）：{path} 不在允许运行奖励代码的文件夹中（{folders}）",
    "reward.check_file_syntax": "第 {index} 个奖励（file）：{path} 第 {line} 行不是有效的 Python（{py_says}）",
    "reward.check_file_no_def": "第 {index} 个奖励（file）：{path} 没有定义函数 {name}",
    "reward.check_run_missing": "第 {index} 个奖励（reward_model）：{runs} 中没有运行 {run}",
    "reward.check_run_unfinished": "第 {index} 个奖励（reward_model）：运行 {run} 的状态是 {state}；奖励模型必须已完成",
    "reward.check_run_objective": ("第 {index} 个奖励（reward_model）：运行 {run} 训练的是 train.objective {objective}，"
                                   "不是奖励模型（train.objective 'reward'）"),
    "reward.check_setting": "第 {index} 个奖励：{reason}",
    # GRPO's loss, step and rollouts (core.engine.grpo), the reference pass shared with the preference
    # objectives (core.engine.preference.LogProbPass) and generation's top-k (core.engine.generate)
    "engine.grpo_loss_type": "grpo.loss_type 必须是以下之一：{choices}，实际为 {py_value}",
    "engine.grpo_sampling_level": "grpo.importance_sampling_level 必须是以下之一：{choices}，实际为 {py_value}",
    "engine.grpo_scale_rewards": "grpo.scale_rewards 必须是以下之一：{choices}，实际为 {py_value}",
    "engine.grpo_group_size": "{count} 个奖励无法分成每组 grpo.num_generations = {generations} 个补全的完整组（每组至少 2 个）",
    "engine.grpo_batch_rows": ("由 {prompts} 个提示词 × {generations} 个补全组成的 GRPO 批次需要同样数量的补全、截断标记和优势值；"
                               "实际为 {completions}、{flags} 和 {advantages}"),
    "engine.grpo_empty_row": "GRPO 批次中有空的提示词或空的补全",
    "engine.grpo_too_wide": ("{prompt} 个 token 的提示词或 {completion} 个 token 的补全放不进该批次的宽度 "
                             "{prompt_width} + {completion_width} 个 token"),
    "engine.temperature_in_head": ("grpo.temperature = {temperature} 时 LM 头是冻结的 16 位权重：其损失内核按温度 1 为 token "
                                   "打分；请将 grpo.temperature 设为 1，或将 model.dtype 设为 float32"),
    "engine.adapter_off_without_lora": ("{objective} 以关闭适配器的模型为参考，模型中需要有 LoRA 层；全量微调请使用冻结的参考副本"),
    "generate.top_k": "top_k = {value}：必须是 >= 0 的整数（0 = 所有 token）",
    # issue 37: preference data under data.overlong, a file's problems found in one pass, catalogue text entries
    "stats.pairs_overlong_truncated": ("{split_role}：{records} 条记录中有 {count} 条超过 max_seq_len {max_seq_len} 个 "
                                       "token，已截断（保留提示的末尾，回答截到剩余长度）（data.overlong={policy}）：{listed}"),
    "data.problems": "{file} 中有 {count} 个问题：{listed}",
    # GRPO step speed (issue 36): a step's prompts rolled out in one call
    "memory.grpo_rollout": ("grpo：一次采样调用处理 {prompts} 个提示词（{rows} 个补全）；其按完整长度计的键/值缓存、"
                            "logits 与预填充缓冲：{mb} MB"),
    # issue 39: the GGUF families once refused (Phi-3/Phi-4, GLM-4, SentencePiece tokenizers)
    "gguf.longrope_context": ("LongRoPE：llama.cpp 以超过 {original} 个 token 的上下文（n_ctx）加载时，对所有位置都用长因子，否则用短因子；"
                              "mindtune 与 transformers 一样，只对长于 {original} 个 token 的序列用长因子：n_ctx 不超过 {original} 时两者的回答一致"),
    "gguf.tokenizer_unigram": ("{file}：这是 'Unigram'（SentencePiece unigram）分词器；llama.cpp 的 SentencePiece 分词器像 "
                               "SentencePiece 的 BPE 那样按分数合并片段，与 'Unigram' 的切分不同，词元编号会不一致：不予携带"),
    "gguf.tokenizer_prepend_first": ("{file}：'Metaspace' 预分词器只在文本的第一段前加空格（prepend_scheme 'first'，即 transformers "
                                     "的 legacy=false）；llama.cpp 在每个特殊 token 之后也加空格，特殊 token 之后的词元编号会不一致：不予携带"),
    "gguf.tokenizer_prepend_always": ("{file}：'Metaspace' 预分词器在每段文本前加空格，但该段已以空格开头时不加（prepend_scheme "
                                      "'always'）；llama.cpp 此时仍会加，以空格开头的段的词元编号会不一致：不予携带"),
    "gguf.tokenizer_sentencepiece_layout": ("{file}：SentencePiece 式分词器的归一化器 {normalizer} 与预分词器 {pre} 无法由 llama.cpp 的 SentencePiece 分词器重现"
                                            "（它把空格记作 U+2581，在每段文本前都加一个空格，或都不加）"),
})


TEXTS.update({
    # issue 37: a run is more than SFT in the console (figures by objective, trackers, evaluation, 中文); uploads of pairs
    "dp.detected_pairs": ("**preference pairs** (chosen/rejected): {n} records, shown side by side in the preview",
                          "**偏好对**（chosen/rejected）：{n} 条记录，预览中并排显示"),
    "dp.detected_kto": ("**KTO answers** (a boolean label): {n} records, shown with their labels in the preview",
                        "**KTO 回答**（布尔 label）：{n} 条记录，预览中显示各自的标签"),
    "dp.pst_pairs_one": ("- **{split}**: 1 pair; chosen {c_mean} tokens (longest {c_max}), rejected {r_mean} "
                         "(longest {r_max}), prompt included",
                         "- **{split}**：1 对；chosen {c_mean} 个 token（最长 {c_max}），rejected {r_mean}"
                         "（最长 {r_max}），含提示"),
    "dp.pst_kto_one": ("- **{split}**: 1 KTO answer: {good} desirable ({c_mean} tokens, longest {c_max}), {bad} "
                       "undesirable ({r_mean}, longest {r_max}), prompt included",
                       "- **{split}**：1 条 KTO 回答：{good} 条可取（{c_mean} 个 token，最长 {c_max}），"
                       "{bad} 条不可取（{r_mean}，最长 {r_max}），含提示"),
    # the figures that judge a run, by its objective (app.charts.figures; core.spec.objectives' headline and compare)
    "figure.val_ppl": ("ppl", "困惑度"), "figure.best_val_ppl": ("best val ppl", "最佳验证困惑度"),
    "figure.reward_accuracy": ("reward accuracy", "奖励准确率"), "figure.reward_margin": ("reward margin", "奖励差值"),
    "figure.val_reward": ("reward", "奖励"), "figure.exact_match": ("EM", "精确匹配"),
    "figure.bleu": ("BLEU", "BLEU"), "figure.rouge1": ("ROUGE-1", "ROUGE-1"), "figure.rouge2": ("ROUGE-2", "ROUGE-2"),
    "figure.rougeL": ("ROUGE-L", "ROUGE-L"), "figure.tokens_per_s": ("tokens/s", "token/秒"),
    "figure.peak_mem_mb": ("peak MB", "峰值 MB"), "figure.tok_s": ("{n} tok/s", "{n} token/秒"),
    # the Monitor's status line: the best evaluation, with the run's headline figure when it is another
    "status.best_at": ("{metric} {value} at step {step}", "{metric} {value}（第 {step} 步）"),
    "status.best_with": ("{metric} {value} at step {step} ({figure} {figure_value})",
                         "{metric} {value}（第 {step} 步，{figure} {figure_value}）"),
    "chart.no_scores": ("no answer scores: this run has no data.test_file, or eval.downstream is off",
                        "没有回答评分：此运行没有 data.test_file，或 eval.downstream 已关闭"),
    # where the trackers write (core.run.tracking.destinations): the Monitor, the Tracking help, Start's answer
    "track.head": ("Trackers:", "实验跟踪："),
    "track.tensorboard": ("TensorBoard writes to {where}; see it with {command}",
                          "TensorBoard 写入 {where}；用 {command} 查看"),
    "track.mlflow_store": ("MLflow writes to {where}; see it with {command}", "MLflow 写入 {where}；用 {command} 查看"),
    "track.mlflow_server": ("MLflow writes to the server {where} (open it in a browser)",
                            "MLflow 写入服务器 {where}（在浏览器中打开）"),
    "track.swanlab_folder": ("SwanLab writes to {where}; see it with {command}",
                             "SwanLab 写入 {where}；用 {command} 查看"),
    "track.swanlab_cloud": ("SwanLab writes to its cloud, project {where} (swanlab login first)",
                            "SwanLab 写入其云端项目 {where}（请先 swanlab login）"),
    # the Runs tab: figure columns by objective, comparisons of like with like, curves, fork points
    "runs.col.reward accuracy %": ("reward accuracy %", "奖励准确率 %"), "runs.col.reward margin": ("reward margin", "奖励差值"),
    "runs.col.reward": ("reward", "奖励"),
    "runs.na_objective": ("n/a ({objective} run)", "不适用（{objective} 运行）"),
    "runs.delta_reference": ("against", "对比"),
    "runs.delta_alone": ("not compared: no other selected run measures what a {objective} run does (its loss and "
                         "figures mean something else)",
                         "未对比：所选运行中没有其他运行与 {objective} 运行度量相同的东西（损失与指标含义不同）"),
    "runs.points": ("{n} pts", "{n} 个百分点"),
    "runs.fork_choice_pointer": ("step-{step} ({pointer})", "step-{step}（{pointer}）"),
    "overlay.reward accuracy": ("reward accuracy", "奖励准确率"), "overlay.reward margin": ("reward margin", "奖励差值"),
    "short.run.name": ("name", "名称"), "short.train.objective": ("objective", "目标"),
    "chart.overlay_mixed": ("not drawn: the losses of {objectives} runs measure different things; pick runs of one "
                            "kind, or compare reward accuracy, tokens/s",
                            "未绘制：{objectives} 运行的损失度量的是不同的东西；请选择同一类运行，或对比奖励准确率、token/秒"),
    "act.and_tracker": ("{message}. {tracker}", "{message}。{tracker}"),
    # the Objective section: where a run of another objective than SFT usually starts (app.tabs.train_callbacks)
    "obj.offer": ("{objective} usually starts from an SFT checkpoint: a model already trained on the task. The newest "
                  "finished SFT run of this model is {run}, best checkpoint step {step}{figure}.",
                  "{objective} 通常从 SFT 检查点开始：一个已在该任务上训练过的模型。此模型最新完成的 SFT 运行是 {run}，"
                  "最佳检查点为第 {step} 步{figure}。"),
    "obj.no_sft_run": ("{objective} usually starts from an SFT checkpoint: a model already trained on the task. This "
                       "model has no finished SFT run yet: train one first (objective sft), then fork its best "
                       "checkpoint here or from the Runs tab.",
                       "{objective} 通常从 SFT 检查点开始：一个已在该任务上训练过的模型。此模型还没有完成的 SFT 运行："
                       "请先训练一个（目标 sft），再在这里或“运行记录”页从其最佳检查点分叉。"),
    "obj.forked": ("{objective} starts from {run}, step {step} (its model is the reference).",
                   "{objective} 从 {run} 的第 {step} 步开始（其模型即参考模型）。"),
    "obj.fork": ("Start from this SFT run's best checkpoint", "从该 SFT 运行的最佳检查点开始"),
    # the Evaluate panel's progress: lm-eval's phases (core.evaluate.Progress)
    "eval.phase.loglikelihood": ("log-likelihoods", "对数似然"), "eval.phase.generate_until": ("generation", "生成"),
    "eval.phase.loglikelihood_rolling": ("rolling log-likelihoods", "滚动对数似然"),
    "eval.requests": ("{done}/{total} requests", "{done}/{total} 个请求"),
    # the data preview's hover texts (app.data.sample_html, the length histogram's bars)
    "dp.run_trained": ("{n} tokens, trained", "{n} 个 token，参与训练"),
    "dp.run_masked": ("{n} tokens, masked (no loss)", "{n} 个 token，已屏蔽（不计损失）"),
    "dp.bin": ("{lo}–{hi} tokens: {count}", "{lo}–{hi} 个 token：{count} 条"),
    "chart.overlay_not_drawn": ("not drawn on one axis (see above)", "未在同一坐标轴上绘制（见上方）"),
})


# GRPO in the console (issue: the Train tab's grpo: settings, the Monitor's reward charts and completions
# table, the data preview of prompts, the Start check of the rewards)
TEXTS.update({
    "field.grpo.num_generations": ("Completions per prompt", "每个提示词的补全数"),
    "field.grpo.max_prompt_len": ("Prompt tokens kept", "保留的提示词 token 数"),
    "field.grpo.max_new_tokens": ("Completion tokens (max)", "补全的最大 token 数"),
    "field.grpo.temperature": ("Sampling temperature", "采样温度"),
    "field.grpo.top_p": ("top_p", "top_p"),
    "field.grpo.top_k": ("top_k (0: all)", "top_k（0：全部）"),
    "field.grpo.eval_temperature": ("Validation temperature (0: greedy)", "验证温度（0：贪心）"),
    "field.grpo.beta": ("KL weight beta", "KL 权重 beta"),
    "field.grpo.epsilon": ("Clip range epsilon", "裁剪范围 epsilon"),
    "field.grpo.epsilon_high": ("Upper clip range", "上侧裁剪范围"),
    "field.grpo.num_iterations": ("Updates per rollout batch", "每批采样的更新次数"),
    "field.grpo.loss_type": ("Loss averaging", "损失平均方式"),
    "field.grpo.scale_rewards": ("Advantage scaling", "优势值缩放"),
    "field.grpo.importance_sampling_level": ("Importance ratio per", "重要性比率的粒度"),
    "field.grpo.mask_truncated_completions": ("No loss on cut completions", "被截断的补全不计损失"),
    "field.grpo.reward_timeout_s": ("Reward timeout (s)", "奖励函数超时（秒）"),
    "field.grpo.rewards": ("Reward functions (YAML, one a line)", "奖励函数（YAML，每行一个）"),
    # the Monitor's GRPO charts (app.charts.metrics: reward, reward_functions, kl) and its completions table
    "chart.reward": ("Reward (steps and validation)", "奖励（训练步与验证）"),
    "chart.reward_functions": ("Each reward function's mean", "各奖励函数的均值"),
    "chart.kl": ("KL to the reference and clipped share", "相对参考模型的 KL 与被裁剪的比例"),
    "chart.completions": ("Completions of the validation prompts", "验证提示词的补全"),
    "ytitle.reward": ("reward", "奖励"), "ytitle.reward_functions": ("reward", "奖励"),
    "ytitle.kl": ("KL, clipped share", "KL、裁剪比例"), "ytitle.completions": ("completions", "补全"),
    "series.reward": ("reward", "奖励"), "series.val reward": ("val reward", "验证奖励"),
    "series.val": ("val {name}", "验证 {name}"), "series.kl": ("kl", "KL"),
    "series.clip ratio": ("clip ratio", "裁剪比例"),
    "mon.completions_none": ("No completions yet: a GRPO run shows its validation prompts' completions at each "
                             "evaluation.", "还没有补全：GRPO 运行在每次评估时显示验证提示词的补全。"),
    "mon.completions_head": ("{n} validation prompts at step {step}, each completion's rewards and their weighted total",
                             "第 {step} 步的 {n} 条验证提示词，每个补全的各项奖励及其加权总分"),
    "mon.completions_col.prompt": ("prompt", "提示词"), "mon.completions_col.completion": ("completion", "补全"),
    "mon.completions_col.total": ("total", "总分"),
    # Start refusing a file reward to a user who is not an administrator (app.tabs.train_callbacks)
    "check.reward_file_admin": ("{user} may not start this run: a reward function read from a file ({files}) runs its "
                                "code in the worker, and only an administrator (--admin) may start such a run. Use "
                                "another reward function (exact_match, math, regex, length, reward_model) or ask an "
                                "administrator",
                                "{user} 不能启动此运行：从文件读取的奖励函数（{files}）会在 worker 中运行其代码，只有管理员"
                                "（--admin）可以启动这样的运行。请改用其他奖励函数（exact_match、math、regex、length、"
                                "reward_model），或请管理员启动"),
    # the data preview of a grpo run's prompts (app.data.data_preview)
    "dp.prompts": ("GRPO prompts: the first {n} of {total} records as the rollouts get them (the chat template and "
                   "the generation prompt; at most grpo.max_prompt_len {max} tokens)",
                   "GRPO 提示词：{total} 条记录中的前 {n} 条，按采样时的样子显示（聊天模板加生成提示；最多 "
                   "grpo.max_prompt_len {max} 个 token）"),
    "dp.prompt_about": ("{tokens} prompt tokens ({cut} cut from the left)", "提示词 {tokens} 个 token（从左侧截去 {cut} 个）"),
    "dp.prompt_skipped": ("over grpo.max_prompt_len: skipped (data.overlong skip)",
                          "超过 grpo.max_prompt_len：已跳过（data.overlong skip）"),
    "dp.prompt_columns": ("the columns the reward functions get:", "奖励函数得到的列："),
    "dp.prompt_split": ("- **{split}**: {n} prompts of {records} records; {lo}–{hi} tokens, {mean} on average; "
                        "{cut} cut, {skipped} skipped",
                        "- **{split}**：{records} 条记录中的 {n} 条提示词；{lo}–{hi} 个 token，平均 {mean}；"
                        "截断 {cut} 条，跳过 {skipped} 条"),
    "dp.prompt_reward_columns": ("- **columns every record hands the rewards**: {columns}",
                                 "- **每条记录都交给奖励函数的列**：{columns}"),
    "overlay.val reward": ("val reward", "验证奖励"), "overlay.train reward": ("train reward", "训练奖励"),
})


MESSAGES_ZH.update({
    # issue 38, ids end to end: an error of several problems as one record
    "problem.lines": "{lines}",
    "train.dry_out_of_memory": "试运行时内存不足：{error}",
})
