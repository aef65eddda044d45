"""Core's messages: exporting a run: merged models, GGUF files, Ollama.

Each id has its English and its 中文 side by side, and the kind of each parameter that is
not plain text (core.spec.catalogue.entry.KINDS)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

MESSAGES: dict[str, Entry] = {
    # exports (core.engine.export: the Monitor tab's downloads, python -m core.export)
    "export.no_checkpoint": Entry(
        "{folder}: checkpoint not found; give runs/<id>/checkpoints/step-N (or best/last).",
        "{folder}：找不到检查点；请给出 runs/<id>/checkpoints/step-N（或 best/last）。"),
    "export.state_fields": Entry("{file}: missing 'step' or 'method'.", "{file}：缺少 'step' 或 'method'。"),
    "export.base_gone": Entry(
        "{folder}: base model {base} is gone; the checkpoint needs it.",
        "{folder}：基座模型 {base} 已不存在；该检查点需要它。"),
    "export.base_changed": Entry(
        "{base}: its weights changed since training (sha256 differs); exporting would combine the adapter with the "
        "wrong base.",
        "{base}：其权重在训练后发生了变化（sha256 不同）；导出会把适配器与错误的基座模型合并。"),
    "export.not_adapter_tensor": Entry(
        "{file}: {name} is not a LoRA adapter tensor (<module>.lora_a / .lora_b); a PEFT adapter cannot hold it.",
        "{file}：{name} 不是 LoRA 适配器张量（<module>.lora_a / .lora_b）；PEFT 适配器无法容纳它。"),
    "export.no_tensor": Entry(
        "{file}: no tensor is not a LoRA adapter tensor (<module>.lora_a / .lora_b); a PEFT adapter cannot hold it.",
        "{file}：没有任何张量，不是 LoRA 适配器张量（<module>.lora_a / .lora_b）；PEFT 适配器无法容纳它。"),
    "export.adapter_rank": Entry(
        "{file}: {name} has shape {shape}, not rank {rank} as trainer_state.json's lora settings say.",
        "{file}：{name} 的形状为 {shape}，与 trainer_state.json's lora 设置所说的秩 {rank} 不符。"),
    "export.dtype": Entry(
        "--dtype {py_value}: use one of {choices}.",
        "--dtype {py_value}：请使用以下之一：{choices}。",
        {"py_value": "py_value", "choices": "names"}),
    "export.unused_tensor": Entry(
        "{file}: {name} matches no tensor of the base {base} (a different base model?).",
        "{file}：{name} 不匹配基座模型 {base} 的任何张量（基座模型不同？）。"),
    "export.float32_only": Entry(
        "--dtype {dtype}: this family's merged export is written in float32 only.",
        "--dtype {dtype}：该模型系列的合并导出只能写成 float32。"),
    "export.format": Entry(
        "format {py_value} is not supported; use one of {choices}.",
        "不支持格式 {py_value}；请使用以下之一：{choices}。",
        {"py_value": "py_value", "choices": "names"}),
    "export.dtype_merged_only": Entry(
        "--dtype applies to the merged export only ({fmt} is written in float32).",
        "--dtype 只适用于合并导出（'{fmt}' 总是写成 float32）。"),
    "export.full_no_adapter": Entry(
        "a full fine-tune has no adapter: export it as 'merged' or 'mindspore'.",
        "全参数微调没有适配器：请导出为 'merged' 或 'mindspore'。"),
    "export.which": Entry(
        "--which {py_value}: use {or_choices}.",
        "--which {py_value}：请使用 {or_choices}。",
        {"py_value": "py_value", "or_choices": "or_list"}),
    "export.no_pointer": Entry(
        "{folder}: no '{which}' checkpoint yet (checkpoints/{which} is missing).",
        "{folder}：还没有 '{which}' 检查点（缺少 checkpoints/{which}）。"),
    # (core.engine.gguf_export, gguf_check, gguf_run, ollama; core.engine.serve). `reasons` is the check's own
    # English list; `error` a library's words
    "gguf.no_package": Entry(
        "the {package} package is not installed: pip install -r {requirements}",
        "未安装 {package} 包：'pip install -r {requirements}'"),
    "gguf.no_llama_cpp": Entry(
        "llama-cpp-python is not installed, and every GGUF export is checked by reloading it with llama.cpp: pip "
        "install -r {requirements}",
        "未安装 'llama-cpp-python'，而每个 GGUF 导出都要用 llama.cpp 重新加载来检验：'pip install -r {requirements}'"),
    "gguf.window_not_carried": Entry(
        "sliding window of {window} tokens not carried (llama.cpp attends to the whole context for this "
        "architecture, as its own converter does): answers are the same while prompt and answer fit in {window} "
        "tokens",
        "未携带 {window} 个词元的滑动窗口（该架构下 llama.cpp 对整个上下文做注意力，与其自带的转换器相同）：提示与回答在 {window} 个词元以内时结果相同"),
    "gguf.moe_dense_layers": Entry(
        "llama.cpp's qwen3moe makes every layer a mixture of experts; this model has dense layers ({layers})",
        "llama.cpp 的 qwen3moe 把每一层都当作专家混合层；该模型有稠密层（{layers}）"),
    "gguf.moe_no_norm_topk": Entry(
        "llama.cpp's qwen3moe renormalises the top-k expert weights; this model does not (norm_topk_prob is false)",
        "llama.cpp 的 qwen3moe 会对前 k 个专家的权重重新归一化；该模型不会（norm_topk_prob 为 false）"),
    "gguf.gemma_query_scale": Entry(
        "llama.cpp scales Gemma's queries by 1/sqrt({assumed}); this model's query_pre_attn_scalar is {scalar}",
        "llama.cpp 按 1/sqrt({assumed}) 缩放 'Gemma' 的查询；该模型的 query_pre_attn_scalar 是 {scalar}"),
    "gguf.family_unknown": Entry(
        "{family}: mindtune has no GGUF mapping for this family",
        "{family}：mindtune 没有该模型系列的 GGUF 映射"),
    "gguf.bias_not_read": Entry(
        "{family}: llama.cpp's Gemma reads no attention biases, and this model has them",
        "{family}：llama.cpp 的 'Gemma' 不读取注意力偏置，而该模型有偏置"),
    "gguf.window_too_short": Entry(
        "{family}: trained with a sliding window of {window} tokens on sequences of up to {seq_len}; llama.cpp "
        "runs this architecture without the window, so its answers would differ past {window} tokens",
        "{family}：训练时使用 {window} 个词元的滑动窗口，序列最长 {seq_len}；llama.cpp 运行该架构时没有窗口，超过 {window} 个词元后结果会不同"),
    "gguf.llama_cpp_refused": Entry(
        "llama.cpp could not load {file} (not offered): {error}",
        "llama.cpp 无法加载 {file}（不提供下载）：{error}"),
    "gguf.rope_type": Entry(
        "RoPE scaling {rope_type} is not carried to GGUF (default, linear and llama3 are; longrope for Phi-3/Phi-4)",
        "RoPE 缩放 {rope_type} 无法带入 GGUF（可带入 'default'、'linear' 与 llama3；Phi-3/Phi-4 还可带入 'longrope'）"),
    "gguf.local_rope": Entry(
        "{family}: a separate RoPE base for the sliding layers is not carried to GGUF",
        "{family}：滑动层单独的 RoPE 基数无法带入 GGUF"),
    "gguf.partial_rotary": Entry(
        "RoPE on part of each head (partial_rotary_factor {factor}) is not carried to GGUF",
        "只作用于每个头一部分的 RoPE（partial_rotary_factor {factor}）无法带入 GGUF"),
    "gguf.no_tokenizer_json": Entry(
        "{folder}: no tokenizer.json; the GGUF file must carry the tokenizer",
        "{folder}：没有 tokenizer.json；GGUF 文件必须携带分词器"),
    "gguf.tokenizer_kind": Entry(
        "{file}: a {kind} tokenizer; the GGUF writer carries byte-level BPE tokenizers (GPT-2, Llama 3, Qwen "
        "style) and SentencePiece-style BPE with byte fallback (Llama 2, Mistral v0.1, Gemma) only",
        "{file}：这是 {kind} 分词器；GGUF 写入器只携带字节级 BPE 分词器（GPT-2、Llama 3、Qwen 风格）和带字节回退的 SentencePiece 式 BPE（'Llama "
        "2'、'Mistral v0.1'、'Gemma'）"),
    "gguf.tokenizer_pre": Entry(
        "{file}: pre-tokenizer {kinds} is not one llama.cpp can be told (ByteLevel, or Split + ByteLevel with the "
        "Llama 3 or Qwen2 regex)",
        "{file}：预分词器 {kinds} 无法告知 llama.cpp（可用 ByteLevel，或带 'Llama 3' / Qwen2 正则的 'Split' + ByteLevel）"),
    "gguf.tokenizer_regex": Entry(
        "{file}: pre-tokenizer regex {regex} matches none llama.cpp knows (GPT-2, Llama 3, Qwen2)",
        "{file}：预分词正则 {regex} 与 llama.cpp 已知的（GPT-2、Llama 3、Qwen2）都不符"),
    "gguf.tokenizer_prefix_space": Entry(
        "{file}: the ByteLevel pre-tokenizer adds a prefix space, which llama.cpp's BPE tokenizer does not",
        "{file}：ByteLevel 预分词器会加前缀空格，而 llama.cpp 的 BPE 分词器不会"),
    "gguf.tokenizer_too_big": Entry(
        "{file}: token id {token_id} is past the embedding's {rows} rows",
        "{file}：词元编号 {token_id} 超出了嵌入矩阵的 {rows} 行"),
    "gguf.tokenizer_duplicate": Entry(
        "{file}: token {token} has two ids ({first} and {second}); a GGUF vocabulary cannot",
        "{file}：词元 {token} 有两个编号（{first} 和 {second}）；GGUF 词表不允许"),
    "gguf.tensor_unmapped": Entry(
        "tensor {name} has no llama.cpp name for this architecture",
        "张量 {name} 在该架构下没有 llama.cpp 名称"),
    "gguf.tensor_shape": Entry(
        "tensor {name} came out {shape}, not {expected}",
        "张量 {name} 的形状是 {shape}，而不是 {expected}"),
    "gguf.quant": Entry(
        "GGUF type {quant}: use one of {choices}",
        "GGUF 类型 {quant}：请使用以下之一：{choices}",
        {"choices": "names"}),
    "gguf.disk_full": Entry(
        "the disk holding {folder} is full: the GGUF file needs about {needed}, {free} is free; nothing was "
        "written and earlier exports are untouched",
        "{folder} 所在的磁盘已满：GGUF 文件约需 {needed}，只剩 {free}；未写入任何内容，先前的导出未被改动"),
    "gguf.lora_experts": Entry(
        "{module}: a LoRA on stacked experts has no llama.cpp adapter form; export the merged GGUF instead",
        "{module}：堆叠专家上的 LoRA 没有 llama.cpp 适配器形式；请改为导出合并后的 GGUF"),
    "gguf.check_no_data": Entry(
        "the check reloads the file with llama.cpp on run {run}'s validation set, which cannot be read: {error}",
        "检验要在运行 {run} 的验证集上用 llama.cpp 重新加载文件，但验证集无法读取：{error}"),
    "gguf.check_no_samples": Entry(
        "run {run}: its validation set has no sample to check the file with",
        "运行 {run}：其验证集中没有可用来检验文件的样本"),
    "gguf.quantize_failed": Entry(
        "llama.cpp's quantizer failed on {file} (code {code})",
        "llama.cpp 的量化器处理 {file} 失败（代码 {code}）"),
    "gguf.checkpoint_gone": Entry(
        "{folder}: the checkpoint changed while it was exported (the run is still saving and removed it: {error}); "
        "export again, or when the run has ended",
        "{folder}：导出期间检查点发生了变化（运行仍在保存并删除了它：{error}）；请重新导出，或等运行结束后再导出"),
    "gguf.check_failed": Entry(
        "the file did not pass its check and is kept as {file}, not offered: {reasons}",
        "该文件未通过检验，保存为 {file}，不提供下载：{reasons}"),
    "ollama.template_not_prefix": Entry(
        "the chat template renders {what} by changing what came before it; Ollama's TEMPLATE cannot say that",
        "对话模板在渲染{what}时改动了之前的内容；'Ollama' 的 TEMPLATE 无法表达",
        {"what": "message"}),
    "ollama.template_content": Entry(
        "the chat template does not render {what}'s text exactly once",
        "对话模板没有把{what}的文字恰好渲染一次",
        {"what": "message"}),
    "ollama.template_first_turn": Entry(
        "the chat template renders the first user turn unlike the later ones",
        "对话模板渲染第一个用户轮次的方式与之后的不同"),
    "ollama.template_head": Entry(
        "the chat template renders a system turn unlike its other turns",
        "对话模板渲染系统轮次的方式与其他轮次不同"),
    "ollama.template_differs": Entry(
        "the Ollama template made from the chat template renders a {roles} conversation differently from it",
        "由对话模板生成的 'Ollama' 模板对 {roles} 对话的渲染与原模板不同"),
    "ollama.triple_quote": Entry(
        "{what} contains three double quotes, which a Modelfile cannot quote",
        "{what}中含有三个连续的双引号，'Modelfile' 无法给它加引号",
        {"what": "message"}),
    "ollama.template_braces": Entry(
        "the chat template's text contains '{{{{', which Ollama's template would read as code",
        "对话模板的文字中含有 '{{{{'，'Ollama' 的模板会把它当作代码"),
    "export.reward_layout": Entry(
        "a merged reward model is written as transformers' XxxForSequenceClassification of an XxxForCausalLM "
        "checkpoint whose tensors stream one by one; {architecture} is not one: export the format 'mindspore', or "
        "'peft' with LoRA",
        "合并导出的奖励模型写成 transformers 的 XxxForSequenceClassification，仅支持可逐个张量流式读取的 XxxForCausalLM 检查点；{architecture} "
        "不属于此类：请导出 'mindspore' 格式，或在 LoRA 下导出 'peft'"),
    "gguf.longrope_context": Entry(
        "LongRoPE: llama.cpp uses the long factors for every position when it is loaded with a context (n_ctx) "
        "over {original} tokens, and the short ones otherwise; mindtune, as transformers, uses the long ones for a "
        "sequence longer than {original} tokens: the answers agree while n_ctx stays within {original} tokens",
        "LongRoPE：llama.cpp 以超过 {original} 个 token 的上下文（n_ctx）加载时，对所有位置都用长因子，否则用短因子；mindtune 与 transformers "
        "一样，只对长于 {original} 个 token 的序列用长因子：n_ctx 不超过 {original} 时两者的回答一致"),
    "gguf.tokenizer_unigram": Entry(
        "{file}: a Unigram (SentencePiece unigram) tokenizer; llama.cpp's SentencePiece tokenizer merges pieces by "
        "score as SentencePiece's BPE does, which is not a Unigram segmentation, so token ids would differ: not "
        "carried",
        "{file}：这是 'Unigram'（SentencePiece unigram）分词器；llama.cpp 的 SentencePiece 分词器像 SentencePiece 的 BPE "
        "那样按分数合并片段，与 'Unigram' 的切分不同，词元编号会不一致：不予携带"),
    "gguf.tokenizer_prepend_first": Entry(
        "{file}: the Metaspace pre-tokenizer prepends a space to the text's first segment only (prepend_scheme "
        "'first', transformers' legacy=false); llama.cpp prepends one after every special token too, so token ids "
        "would differ after special tokens: not carried",
        "{file}：'Metaspace' 预分词器只在文本的第一段前加空格（prepend_scheme 'first'，即 transformers 的 legacy=false）；llama.cpp 在每个特殊 "
        "token 之后也加空格，特殊 token 之后的词元编号会不一致：不予携带"),
    "gguf.tokenizer_prepend_always": Entry(
        "{file}: the Metaspace pre-tokenizer prepends a space to each text segment unless it begins with one "
        "(prepend_scheme 'always'); llama.cpp prepends one even then, so token ids would differ where a segment "
        "begins with a space: not carried",
        "{file}：'Metaspace' 预分词器在每段文本前加空格，但该段已以空格开头时不加（prepend_scheme 'always'）；llama.cpp "
        "此时仍会加，以空格开头的段的词元编号会不一致：不予携带"),
    "gguf.tokenizer_sentencepiece_layout": Entry(
        "{file}: a SentencePiece-style tokenizer with normalizer {normalizer} and pre-tokenizer {pre}, which "
        "llama.cpp's SentencePiece tokenizer does not reproduce (it carries spaces as U+2581, with a space "
        "prepended to every text segment or to none)",
        "{file}：SentencePiece 式分词器的归一化器 {normalizer} 与预分词器 {pre} 无法由 llama.cpp 的 SentencePiece 分词器重现（它把空格记作 "
        "U+2581，在每段文本前都加一个空格，或都不加）"),
}
