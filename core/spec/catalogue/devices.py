"""Core's messages: a device's rules, which attention it runs, the memory estimate's notes (core.spec.memory).

Each id has its English and its 中文 side by side, and the kind of each parameter that is
not plain text (core.spec.catalogue.entry.KINDS)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

MESSAGES: dict[str, Entry] = {
    # which attention a device runs (core.spec.device_paths), said in the memory estimate's notes
    "path.cpu_kernel": Entry(
        "the CPU's fused kernel where it compiles (core.engine.fused)",
        "CPU 的融合算子（能编译时；core.engine.fused）"),
    "path.gpu_composed": Entry(
        "GPU: MindSpore 2.10 has no fused attention for GPU (FlashAttentionScore is Ascend-only)",
        "GPU：MindSpore 2.10 没有 GPU 的融合注意力（FlashAttentionScore 只在昇腾上）"),
    "path.ascend_dtype": Entry(
        "Ascend: FlashAttentionScore takes float16/bfloat16 and attention computes in {dtype} (use "
        "precision.amp_level O2 for the fused kernel)",
        "昇腾：FlashAttentionScore 只接受 float16/bfloat16，而注意力以 {dtype} 计算（用 precision.amp_level O2 才能用融合算子）"),
    "path.ascend_unsupported": Entry(
        "Ascend: FlashAttentionScore is not given {needs} here",
        "昇腾：这里不给 FlashAttentionScore 传 {needs}"),
    "path.ascend_packed": Entry(
        "Ascend: packed batches need per-sample segments, which the causal mode does not take",
        "昇腾：打包的批次需要按样本分段，因果模式不支持"),
    "path.ascend_flash": Entry(
        "Ascend: ops.flash_attention_score, causal (sparse_mode 2), no mask tensor",
        "昇腾：ops.flash_attention_score，因果模式（sparse_mode 2），无掩码张量"),
    # the memory estimate's notes (core.spec.memory)
    "memory.cpu_rss": Entry(
        "CPU: the peak is the worker's resident set size; the compiled train and eval graphs share one memory pool",
        "CPU：峰值是 worker 进程的常驻内存；编译后的训练图和评估图共用一个内存池"),
    "memory.cpu_fused": Entry(
        "CPU: attention, norms, MLP gates and loss run as fused kernels (no score tensors kept)",
        "CPU：注意力、归一化、MLP 门控和损失以融合算子运行（不保留注意力分数张量）"),
    "memory.cpu_composed": Entry(
        "CPU: attention, norms, MLP gates and loss run as composed MindSpore ops (the fused kernels need float32, "
        "no AMP and a C++ compiler), which keep score tensors",
        "CPU：注意力、归一化、MLP 门控和损失以组合的 MindSpore 算子运行（融合算子需要 float32、不开 AMP 且有 C++ 编译器），会保留注意力分数张量"),
    "memory.cpu_recompute": Entry(
        "CPU: recompute moves the peak of a compiled step a little (measured: full -8%, MLP -4%; attention +11%, "
        "as its layers cannot share one compiled graph); it saves more on GPU/Ascend",
        "CPU：重计算只让编译后单步的峰值略有变化（实测：full -8%，MLP -4%；attention +11%，因为其各层无法共用一个编译图）；在 GPU/Ascend 上省得更多"),
    "memory.textbook": Entry(
        "{device}: activations are textbook figures, not measured on such a device",
        "{device}：激活值为理论估算，未在此类设备上实测"),
    "memory.flash": Entry(
        "{device} attention: FlashAttentionScore, causal mode: no score or mask tensors",
        "{device} 注意力：FlashAttentionScore 因果模式，无注意力分数或掩码张量"),
    "memory.composed_attention": Entry(
        "{device} attention composed ({why}): each layer keeps its (B, H, T, T) softmax for the backward "
        "({scores_mb} MB in all) and one (B, 1, T, T) float32 mask per window ({mask_mb} MB), not broadcast to the "
        "heads",
        "{device} 注意力用组合算子（{why}）：每层为反向传播保留 (B, H, T, T) 的 softmax（共 {scores_mb} MB），每个窗口一个 (B, 1, T, T) float32 "
        "掩码（{mask_mb} MB），不按头广播",
        {"why": "message"}),
    "memory.head_loss": Entry(
        "{device} loss: LM head and cross-entropy in chunks of {tokens} tokens, no logits",
        "{device} 损失：LM 头与交叉熵按每块 {tokens} 个 token 分块计算，不生成 logits"),
    "memory.chunked_loss": Entry(
        "{device} loss: cross-entropy in chunks of {tokens} tokens on the logits (no full softmax or one-hot)",
        "{device} 损失：在 logits 上按每块 {tokens} 个 token 分块计算交叉熵（不生成完整的 softmax 或独热编码）"),
    "memory.pairs": Entry(
        "{objective}: train.micro_batch_size counts pairs, each micro batch runs the chosen and the rejected "
        "answers (2 × the rows, activations counted twice)",
        "{objective}：train.micro_batch_size 按偏好对计数，每个微批同时运行 chosen 和 rejected 回答（行数 × 2，激活值计两次）"),
    "memory.frozen_reference": Entry(
        "{objective}: the frozen reference copy holds the starting weights a second time ({dtype}), counted with "
        "the weights",
        "{objective}：冻结的参考模型副本再保存一份初始权重（{dtype}），计入权重"),
    "memory.adapter_off": Entry(
        "{objective}: the reference is the base with the adapter switched off: no second copy of the weights, one "
        "more forward pass per step",
        "{objective}：参考模型是关闭适配器的基座：不需要第二份权重，每步多一次前向计算"),
    "memory.parallel": Entry(
        "each of the {workers} workers holds all of this (the optimizer state is not sharded)",
        "{workers} 个 worker 各自持有以上全部（优化器状态不切分）"),
    "memory.amp": Entry(
        "AMP {level}: parameters are cast to {dtype} at every call (no persistent copy); the cast copies are "
        "counted with the weights",
        "AMP {level}：参数在每次调用时转换为 {dtype}（不保留副本）；转换出的副本计入权重"),
    "memory.accumulation": Entry(
        "gradient accumulation holds a second float32 gradient buffer (the running sum)",
        "梯度累积需要第二份 float32 梯度缓冲（累加和）"),
    "memory.shared_ram": Entry(
        "CPU: the {workers} workers share this machine's RAM ({workers} × {mb} MB)",
        "CPU：{workers} 个 worker 共用本机内存（{workers} × {mb} MB）"),
    "memory.unknown_device": Entry(
        "device memory unknown: the total is not checked against a limit",
        "设备内存未知：合计未与上限比较"),
    "memory.too_big": Entry(
        "needs {needed} MB, the device has {has} MB: lower train.micro_batch_size or data.max_seq_len, or use LoRA",
        "需要 {needed} MB，设备只有 {has} MB：请减小 train.micro_batch_size 或 data.max_seq_len，或使用 LoRA"),
    # bf16 on a device without it (core.spec.device_paths.bf16_problem, core.engine.devices.check_bf16)
    "device.cpu_no_bf16": Entry("MindSpore's CPU kernels have no bf16 compute", "MindSpore 的 CPU 算子没有 bf16 计算"),
    "device.soc_no_bf16": Entry(
        "this Ascend device ({soc}) has no bf16 compute (910A and 310 SoCs); use float16",
        "这台 Ascend 设备（{soc}）没有 bf16 计算（910A 和 310 系列芯片）；请使用 float16"),
    "device.bf16_refused": Entry(
        "bfloat16 (model.dtype {dtype}, precision.compute_dtype {compute_dtype}): {reason}",
        "bfloat16（model.dtype {dtype}，precision.compute_dtype {compute_dtype}）：{reason}",
        {"reason": "message"}),
    # against the device's memory before launch and at setup (core.run.accelerators, core.engine.devices)
    "path.ascend_chip": Entry(
        "Ascend: FlashAttentionScore is used on the Atlas A2/A3 training chips only (910B, 910C: SoC ascend910b, "
        "ascend910_93), not on this {soc}",
        "昇腾：FlashAttentionScore 只在昇腾 A2/A3 训练系列芯片（910B、910C：SoC ascend910b、ascend910_93）上使用，这块 {soc} 不用"),
    "path.ascend_head_dim": Entry(
        "Ascend: FlashAttentionScore takes head sizes that are multiples of 16 up to 512, and this model's is "
        "{head_dim}",
        "昇腾：FlashAttentionScore 要求头维度是 16 的倍数且不超过 512，而这个模型的头维度是 {head_dim}"),
    "path.ascend_chip_unknown": Entry(
        "Ascend: the chip is not known here (FlashAttentionScore runs only on the Atlas A2/A3 training chips, 910B "
        "and 910C), so composed attention is assumed",
        "昇腾：这里不知道芯片型号（FlashAttentionScore 只在昇腾 A2/A3 训练系列芯片 910B、910C 上运行），因此按组合注意力计算"),
    "memory.device_unknown": Entry(
        "{device}: the device's memory is not known before launch ({why}), so the estimate is not checked against "
        "it here; Check memory measures the run on the device, and the worker checks the estimate against the "
        "device's memory when it starts",
        "{device}：启动前不知道设备内存（{why}），因此这里不把估算与它比较；“检查内存”会在设备上实测这次运行，worker 启动时也会把估算与设备内存比较",
        {"why": "message"}),
    "memory.smi_missing": Entry("{smi} is not on PATH", "PATH 中没有 {smi}"),
    "memory.smi_silent": Entry("{smi} did not report the device's total memory", "{smi} 没有报告设备的总内存"),
    "memory.fit_over": Entry(
        "the memory estimate ({needed} MB per device) is more than the {device} device's {has} MB: the run may "
        "fail out of memory; lower train.micro_batch_size or data.max_seq_len, set recompute.policy=full, or use "
        "method=lora",
        "内存估算（每个设备 {needed} MB）超过了 {device} 设备的 {has} MB：运行可能因内存不足而失败；请减小 train.micro_batch_size 或 "
        "data.max_seq_len，设置 recompute.policy=full，或使用 method=lora"),
    "memory.fit_ok": Entry(
        "the memory estimate ({needed} MB per device) fits the {device} device's {has} MB",
        "内存估算（每个设备 {needed} MB）在 {device} 设备的 {has} MB 之内"),
    "memory.fit_unknown": Entry(
        "the {device} device's total memory is unknown ({why}): the memory estimate ({needed} MB per device) is "
        "not checked against it; the allocator's peak is charted as the run trains",
        "{device} 设备的总内存未知（{why}）：内存估算（每个设备 {needed} MB）未与它比较；训练过程中会绘制分配器的峰值",
        {"why": "message"}),
    "memory.not_initialised": Entry(
        "MindSpore reports an Ascend device's memory only once the device is initialised, and reported none after "
        "a first operator ran",
        "MindSpore 只在昇腾设备初始化后才报告其内存，而运行了第一个算子后仍未报告"),
    "memory.no_properties": Entry(
        "mindspore.hal.get_device_properties failed: {error}",
        "mindspore.hal.get_device_properties 失败：{error}"),
    "memory.grpo_rows": Entry(
        "grpo: a micro batch of {prompts} prompts trains {prompts} × {generations} completions (activations "
        "counted per completion row)",
        "grpo：{prompts} 个提示词的微批训练 {prompts} × {generations} 个补全（激活值按补全行计）"),
    "memory.grpo_merged": Entry(
        "grpo with LoRA: during a rollout the inference kernel holds a float32 copy of every adapted matrix with "
        "its adapter merged: {mb} MB",
        "grpo 与 LoRA：采样时推理内核持有每个适配矩阵合并适配器后的 float32 副本：{mb} MB"),
    "memory.grpo_rollout": Entry(
        "grpo: a rollout samples {prompts} prompts ({rows} completions) in one call; its key/value cache at full "
        "length, logits and prefill buffers: {mb} MB",
        "grpo：一次采样调用处理 {prompts} 个提示词（{rows} 个补全）；其按完整长度计的键/值缓存、logits 与预填充缓冲：{mb} MB"),
}
