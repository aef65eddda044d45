"""Core's messages: a model folder, its tokenizer, weights, LoRA adapters and checkpoints.

Each id has its English and its 中文 side by side, and the kind of each parameter that is
not plain text (core.spec.catalogue.entry.KINDS)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

MESSAGES: dict[str, Entry] = {
    # where a model folder's problem is: the file (a path, or a path and its 'key'), the config.json key
    "model.at": Entry("{where}: {reason}", "{where}：{reason}", {"reason": "message"}),
    "model.at_setting": Entry("{setting}: {reason}.", "{setting}：{reason}。", {"reason": "message"}),
    # a model folder's config.json (core.spec.model_args, core.spec.families); `json_says` is Python's json
    # module's own reason, `py_value` a value as Python shows it
    "model.no_config": Entry(
        "not found. A model folder needs a Hugging Face config.json (supported architectures: {architectures}).",
        "未找到。模型目录需要 Hugging Face 的 config.json（支持的架构：{architectures}）。"),
    "model.invalid_json": Entry("not valid JSON ({json_says}).", "不是有效的 JSON（{json_says}）。", {"json_says": "quoted"}),
    "model.not_object": Entry("must be a JSON object", "必须是 JSON 对象"),
    "model.remote_code": Entry(
        "auto_map: this checkpoint needs its own Python code (remote code: {classes}), which mindtune never runs; "
        "supported architectures: {architectures}.",
        "auto_map：该检查点需要运行它自带的 Python 代码（远程代码：{classes}），mindtune 从不运行这类代码；支持的架构：{architectures}。"),
    "model.architecture_refused": Entry(
        "architectures: {architecture} is not supported ({why}); supported: {architectures}.",
        "'architectures'：不支持 {architecture}（{why}）；支持的架构：{architectures}。",
        {"why": "message"}),
    "model.architecture_unknown": Entry(
        "architecture {architecture} is not supported; supported: {architectures} (model_type {model_types}).",
        "不支持架构 {architecture}；支持的架构：{architectures}（model_type {model_types}）。",
        {"model_types": "names"}),
    "model.mla_moe": Entry(
        "{name}'s multi-head latent attention (MLA) and its MoE routing are not implemented",
        "{name} 的多头潜在注意力（MLA）及其 MoE 路由尚未实现"),
    "model.mla": Entry("{name}'s multi-head latent attention (MLA) is not implemented", "{name} 的多头潜在注意力（MLA）尚未实现"),
    "model.chunked_nope_moe": Entry(
        "{name}'s chunked attention, NoPE layers and MoE are not implemented",
        "{name} 的分块注意力、NoPE 层和 MoE 尚未实现"),
    "model.positive_int": Entry(
        "must be a positive integer, got {py_value}",
        "必须是正整数，实际为 {py_value}",
        {"py_value": "py_value"}),
    "model.positive_int_or_null": Entry(
        "must be a positive integer or null, got {py_value}",
        "必须是正整数或 null，实际为 {py_value}",
        {"py_value": "py_value"}),
    "model.positive_or_null": Entry(
        "must be a positive number or null, got {py_value}",
        "必须是正数或 null，实际为 {py_value}",
        {"py_value": "py_value"}),
    "model.kv_heads": Entry(
        "{kv_heads} must divide num_attention_heads={heads}",
        "{kv_heads} 必须能整除 num_attention_heads={heads}"),
    "model.text_config": Entry(
        "{architecture} keeps its language model's config there; expected an object, got {py_value}",
        "{architecture} 把其语言模型的配置放在这里；应为对象，实际为 {py_value}",
        {"py_value": "py_value"}),
    "model.not_supported": Entry(
        "{py_value} is not supported; supported: {supported_names}",
        "不支持 {py_value}；支持：{supported_names}",
        {"py_value": "py_value", "supported_names": "names"}),
    "model.rotary_factor": Entry("must be in (0, 1], got {factor}", "必须在 (0, 1] 内，实际为 {factor}"),
    "model.rope_family": Entry(
        "{py_value} is not supported for {family}; supported: {supported_names}",
        "'{family}' 不支持 {py_value}；支持：{supported_names}",
        {"py_value": "py_value", "supported_names": "names"}),
    "model.sliding_rope": Entry("only 'default' is supported for sliding layers", "滑动窗口层只支持 'default'"),
    "model.rope_required": Entry("required for rope_type {rope_type}", "rope_type 为 {rope_type} 时必填"),
    "model.longrope_factors": Entry(
        "required for rope_type 'longrope': a list of positive numbers, got {py_value}",
        "rope_type 为 'longrope' 时必填：正数列表，实际为 {py_value}",
        {"py_value": "py_value"}),
    "model.longrope_original": Entry(
        "required for rope_type 'longrope' (an integer > 1), got {py_value}",
        "rope_type 为 'longrope' 时必填（大于 1 的整数），实际为 {py_value}",
        {"py_value": "py_value"}),
    "model.factor_count": Entry(
        "must list one factor per rotary frequency ({half} = head_dim · partial_rotary_factor / 2), got {count}",
        "必须为每个旋转频率列出一个因子（{half} = head_dim · partial_rotary_factor / 2），实际为 {count} 个"),
    "model.layer_types": Entry(
        "must list {full} or {sliding} for each of the {layers} layers",
        "必须为 {layers} 层中的每一层列出 {full} 或 {sliding}"),
    "model.bidirectional": Entry(
        "bidirectional (encoder-style, EmbeddingGemma) attention is not supported; only causal language models can "
        "be fine-tuned",
        "不支持双向（编码器式，EmbeddingGemma）注意力；只有因果语言模型可以微调"),
    # ... what a run asks of it (core.spec.model_args.run_problems)
    "model.above_context": Entry(
        "is above the model's context of {tokens} tokens ({architecture}, max_position_embeddings in its "
        "config.json); use at most {tokens}",
        "超过模型的上下文长度 {tokens} 个 token（{architecture}，见其 config.json 中的 max_position_embeddings）；最多用 {tokens}"),
    "model.targets_unmatched": Entry(
        "names {names} match no projection of this {family} model; its projections are {projections} (or "
        "'all-linear' for all of them)",
        "名称 {names} 不匹配该 '{family}' 模型的任何投影层；其投影层为 {projections}（或用 'all-linear' 表示全部）",
        {"projections": "projections"}),
    "model.targets_none": Entry(
        "matches no projection of this {family} model; its projections are {projections} (or 'all-linear' for all "
        "of them)",
        "不匹配该 '{family}' 模型的任何投影层；其投影层为 {projections}（或用 'all-linear' 表示全部）",
        {"projections": "projections"}),
    # ... its weight files (core.spec.model_args: the loader's refusals; app.data.catalog)
    "model.not_a_folder": Entry(
        "not a folder. Expected a Hugging Face folder with config.json and model.safetensors (or a sharded "
        "model.safetensors.index.json).",
        "不是目录。需要含 config.json 与 model.safetensors（或分片的 model.safetensors.index.json）的 Hugging Face 目录。"),
    "model.no_weights": Entry(
        "no model.safetensors or model.safetensors.index.json. Expected a Hugging Face folder with config.json and "
        "model.safetensors (or a sharded model.safetensors.index.json).",
        "没有 model.safetensors 或 model.safetensors.index.json。需要含 config.json 与 model.safetensors（或分片的 "
        "model.safetensors.index.json）的 Hugging Face 目录。"),
    "model.pickle_only": Entry(
        "only pickle weights found ({files}). mindtune loads safetensors only (pickle files can run code when "
        "loaded); convert with transformers: `AutoModelForCausalLM.from_pretrained(dir).save_pretrained(dir, "
        "safe_serialization=True)`.",
        "只找到 pickle 权重（{files}）。mindtune 只加载 safetensors（pickle 文件在加载时可能运行代码）；请用 transformers "
        "转换：`AutoModelForCausalLM.from_pretrained(dir).save_pretrained(dir, safe_serialization=True)`。"),
    "model.bad_index": Entry(
        "not a valid safetensors index (needs a 'weight_map'): {json_says}",
        "不是有效的 safetensors 索引（需要 'weight_map'）：{json_says}",
        {"json_says": "quoted"}),
    "model.shard_missing": Entry(
        "shard {shard} is listed but missing from {folder}.",
        "索引列出了分片 {shard}，但 {folder} 中没有。"),
    "model.no_tokenizer": Entry(
        "no tokenizer.json (a Hugging Face fast tokenizer is needed)",
        "没有 tokenizer.json（需要 Hugging Face 快速分词器）"),
    "model.unreadable_weights": Entry("unreadable weights: {reason}", "权重无法读取：{reason}", {"reason": "message"}),
    "model.short_weights": Entry("{file}: too short for a safetensors file", "{file}：太短，不是 safetensors 文件"),
    "model.huge_header": Entry("{file}: header of {size} bytes is implausible", "{file}：文件头有 {size} 字节，不可信"),
    # a mixture of experts' settings (core.spec.moe_args)
    "moe.experts_missing": Entry("missing (the number of experts per MoE layer)", "缺失（每个 MoE 层的专家数）"),
    "moe.top_k": Entry("{top_k} exceeds the {experts} experts", "{top_k} 超过了专家数 {experts}"),
    "moe.aux_loss": Entry(
        "must be a number >= 0, got {py_value}",
        "必须是 >= 0 的数字，实际为 {py_value}",
        {"py_value": "py_value"}),
    "moe.jitter": Entry(
        "{py_value} is not supported (only 0, as the hub's Mixtral checkpoints ship); set it to 0",
        "不支持 {py_value}（只支持 0，与模型中心发布的 Mixtral 检查点一致）；请设为 0",
        {"py_value": "py_value"}),
    "moe.qwen_window": Entry(
        "true is not supported for Qwen3-MoE (no hub checkpoint uses it); set it to false",
        "Qwen3-MoE 不支持 true（模型中心没有检查点使用它）；请设为 false"),
    "moe.dense_layers": Entry(
        "must be a list of layer indices in [0, {layers}), got {py_value}",
        "必须是 [0, {layers}) 内的层序号列表，实际为 {py_value}",
        {"py_value": "py_value"}),
    # a model folder's tokenizer files and chat template (core.data.tokenizer); `serde_says` is the tokenizers
    # library's reason, `jinja_says` jinja2's, `template_says` the template's own words (raise_exception)
    "tokenizer.not_a_folder": Entry(
        "not a folder; expected a Hugging Face model folder with tokenizer.json",
        "不是目录；需要含 tokenizer.json 的 Hugging Face 模型目录"),
    "tokenizer.no_file": Entry(
        "no tokenizer.json; a Hugging Face fast tokenizer (tokenizer.json) is required",
        "没有 tokenizer.json；需要 Hugging Face 快速分词器（tokenizer.json）"),
    "tokenizer.unreadable_json": Entry(
        "cannot read JSON ({json_says})",
        "无法读取 JSON（{json_says}）",
        {"json_says": "quoted"}),
    "tokenizer.not_object": Entry(
        "expected a JSON object, got {py_type}",
        "应为 JSON 对象，实际为{py_type}",
        {"py_type": "py_type"}),
    "tokenizer.invalid_file": Entry(
        "not a valid tokenizers file ({serde_says})",
        "不是有效的 tokenizers 文件（{serde_says}）",
        {"serde_says": "quoted"}),
    "tokenizer.token": Entry(
        "a token must be a string or an object with a string 'content', got {py_value}",
        "记号必须是字符串，或含字符串 'content' 的对象，实际为 {py_value}",
        {"py_value": "py_value"}),
    "tokenizer.added_token": Entry(
        "expected an object with a string 'content', got {py_value}",
        "应为含字符串 'content' 的对象，实际为 {py_value}",
        {"py_value": "py_value"}),
    "tokenizer.eos_ids": Entry(
        "expected an int or a list of ints, got {py_value}",
        "应为整数或整数列表，实际为 {py_value}",
        {"py_value": "py_value"}),
    "tokenizer.template_entry": Entry(
        "expected an object with string 'name' and 'template'",
        "应为含字符串 'name' 和 'template' 的对象"),
    "tokenizer.template_type": Entry(
        "expected a string or a list of {{name, template}} objects, got {py_type}",
        "应为字符串或 {{name, template}} 对象的列表，实际为{py_type}",
        {"py_type": "py_type"}),
    "tokenizer.no_template": Entry(
        "the model has no chat template (no 'chat_template' in tokenizer_config.json and no chat_template.jinja); "
        "use a raw-text data format or add a template",
        "该模型没有对话模板（tokenizer_config.json 中没有 'chat_template'，也没有 chat_template.jinja）；请用纯文本数据格式，或添加模板"),
    "tokenizer.no_default": Entry(
        "several chat templates but none named 'default' (found {names})",
        "有多个对话模板，但没有名为 'default' 的（找到 {names}）"),
    "tokenizer.refused": Entry(
        "the chat template refused these messages: {template_says}",
        "对话模板拒绝了这些消息：{template_says}"),
    "tokenizer.failed": Entry("chat template failed: {jinja_says}", "对话模板出错：{jinja_says}", {"jinja_says": "quoted"}),
    "tokenizer.syntax": Entry(
        "chat template syntax error at line {line}: {jinja_says}",
        "对话模板第 {line} 行有语法错误：{jinja_says}",
        {"jinja_says": "quoted"}),
    # `py_value` is a value as Python shows it (repr), `re_says` Python's re module's reason, `safetensors_says`
    # the safetensors library's, `os_error` the operating system's, `json_says` Python's json module's
    # LoRA's settings and target modules (core.engine.lora)
    "lora.rank": Entry(
        "lora rank must be a positive integer, got {py_value}.",
        "lora 的 rank 必须是正整数，实际为 {py_value}。",
        {"py_value": "py_value"}),
    "lora.alpha": Entry(
        "lora alpha must be a positive number, got {py_value}.",
        "lora 的 alpha 必须是正数，实际为 {py_value}。",
        {"py_value": "py_value"}),
    "lora.dropout": Entry(
        "lora dropout must be in [0, 1), got {py_value}.",
        "lora 的 dropout 必须在 [0, 1) 内，实际为 {py_value}。",
        {"py_value": "py_value"}),
    "lora.already_adapted": Entry(
        "{module} already has a LoRA adapter ({count} such modules); inject once, or load the adapter into the "
        "existing LoRA layers.",
        "{module} 已有 LoRA 适配器（共 {count} 个这样的模块）；只能注入一次，或把适配器加载到现有的 LoRA 层中。"),
    "lora.expert_dropout": Entry(
        "lora dropout {dropout} with target {module} (a mixture of experts' stacked projections): LoRA on expert "
        "weights has no dropout here, as in PEFT; set dropout to 0 or leave the experts out of target_modules.",
        "lora 的 dropout 为 {dropout}，而目标 {module} 是混合专家模型堆叠的投影层：这里专家权重上的 LoRA 没有 dropout（与 PEFT 相同）；请把 dropout 设为 "
        "0，或把专家从 target_modules 中去掉。"),
    "lora.bad_regex": Entry(
        "lora target_modules '{pattern}' is not a valid regex: {re_says}.",
        "lora 的 target_modules '{pattern}' 不是有效的正则表达式：{re_says}。",
        {"re_says": "quoted"}),
    "lora.bad_targets": Entry(
        "lora target_modules must be a non-empty list of module names, one regex string or 'all-linear', got "
        "{py_value}.",
        "lora 的 target_modules 必须是非空的模块名列表、一个正则表达式字符串或 'all-linear'，实际为 {py_value}。",
        {"py_value": "py_value"}),
    "lora.regex_matches_nothing": Entry(
        "lora target_modules regex '{pattern}' (re.fullmatch on dotted module names such as '{example}') matches "
        "no Dense layer of this model; its projections are {projections} ('all-linear': the family's own).",
        "lora 的 target_modules 正则表达式 '{pattern}'（用 re.fullmatch 匹配以点分隔的模块名，例如 '{example}'）不匹配该模型的任何全连接层；其投影层为 "
        "{projections}（'all-linear'：该模型系列自己的投影层）。",
        {"projections": "projections"}),
    "lora.name_matches_nothing": Entry(
        "lora target_modules name {names} matches no Dense layer of this model; its projections are {projections} "
        "('all-linear': the family's own).",
        "lora 的 target_modules 名称 {names} 不匹配该模型的任何全连接层；其投影层为 {projections}（'all-linear'：该模型系列自己的投影层）。",
        {"projections": "projections"}),
    "lora.names_match_nothing": Entry(
        "lora target_modules names {names} matches no Dense layer of this model; its projections are {projections} "
        "('all-linear': the family's own).",
        "lora 的 target_modules 名称 {names} 不匹配该模型的任何全连接层；其投影层为 {projections}（'all-linear'：该模型系列自己的投影层）。",
        {"projections": "projections"}),
    # ... an adapter's tensors loaded into the model's LoRA layers (a checkpoint's, a PEFT folder's)
    "lora.tensor_shape": Entry(
        "{source}: tensor {name} has shape {shape}, the model's LoRA layer needs {expected} (different rank or "
        "base model?).",
        "{source}：张量 {name} 的形状为 {shape}，而模型的 LoRA 层需要 {expected}（秩或基座模型不同？）。"),
    "lora.missing_tensor": Entry(
        "{source}: missing tensor {name} that the model's LoRA layers need.",
        "{source}：缺少模型的 LoRA 层需要的张量 {name}。"),
    "lora.missing_tensors": Entry(
        "{source}: missing tensor {name} (and {more} more) that the model's LoRA layers need.",
        "{source}：缺少模型的 LoRA 层需要的张量 {name}（另有 {more} 个）。"),
    "lora.unexpected_tensor": Entry(
        "{source}: unexpected tensor {name} that matches no LoRA layer of the model (different target_modules?).",
        "{source}：多余的张量 {name}，它不对应模型的任何 LoRA 层（不同的 target_modules?）。"),
    "lora.unexpected_tensors": Entry(
        "{source}: unexpected tensor {name} (and {more} more) that matches no LoRA layer of the model (different "
        "target_modules?).",
        "{source}：多余的张量 {name}（另有 {more} 个），它不对应模型的任何 LoRA 层（不同的 target_modules?）。"),
    # ... a PEFT adapter folder (core.engine.lora: read_peft_config, read_peft_tensors)
    "lora.no_adapter_config": Entry(
        "{file}: not found; a PEFT adapter folder has adapter_config.json and adapter_model.safetensors.",
        "{file}：未找到；PEFT 适配器目录应含 adapter_config.json 和 adapter_model.safetensors。"),
    "lora.not_lora": Entry(
        "{file}: peft_type is {py_value}; only LORA adapters are supported.",
        "{file}：peft_type 为 {py_value}；只支持 LORA 适配器。",
        {"py_value": "py_value"}),
    "lora.config_key_missing": Entry("{file}: {config_key} is missing.", "{file}：缺少 {config_key}。"),
    "lora.option_unsupported": Entry(
        "{file}: {config_key}={value} is not supported (only {supported_value}).",
        "{file}：不支持 {config_key}={value}（只支持 {supported_value}）。"),
    "lora.per_module": Entry(
        "{file}: {config_key} (per-module rank/alpha) is not supported.",
        "{file}：不支持 {config_key}（按模块设置 rank/alpha）。"),
    "lora.target_parameters": Entry(
        "{file}: target_parameters {value} (LoRA on expert weights) cannot be loaded into mindtune yet; load it "
        "with peft, or merge it into the base.",
        "{file}：target_parameters {value}（专家权重上的 LoRA）暂时无法加载到 mindtune；请用 PEFT 库加载，或把它合并进基座模型。"),
    "lora.no_adapter_weights": Entry("{file}: not found.", "{file}：未找到。"),
    "lora.pickle_adapter": Entry(
        "{file}: not found. Found {files}: pickle files can run code when loaded; re-save the adapter with "
        "safe_serialization=True.",
        "{file}：未找到。找到了 {files}：pickle 文件在加载时可能运行代码；请用 safe_serialization=True 重新保存适配器。"),
    "lora.foreign_tensor": Entry(
        "{file}: tensor {name} is not a PEFT LoRA tensor (expected base_model.model.<module>.lora_A.weight / "
        "lora_B.weight).",
        "{file}：张量 {name} 不是 PEFT 的 LoRA 张量（应为 base_model.model.<module>.lora_A.weight / lora_B.weight）。"),
    "lora.foreign_tensors": Entry(
        "{file}: tensor {name} (and {more} more) is not a PEFT LoRA tensor (expected "
        "base_model.model.<module>.lora_A.weight / lora_B.weight).",
        "{file}：张量 {name}（另有 {more} 个）不是 PEFT 的 LoRA 张量（应为 base_model.model.<module>.lora_A.weight / "
        "lora_B.weight）。"),
    # ... a mixture of experts' adapter in PEFT's layout (core.engine.moe.peft_moe_adapter)
    "lora.moe_remapped": Entry(
        "LoRA on {names} of the dense layers: PEFT 0.21 with transformers 5 reads these target_modules of a "
        "mixture-of-experts model as expert parameters, so the adapter would load onto other weights. Export "
        "'merged', or train without {names} in target_modules.",
        "稠密层的 '{names}' 上有 LoRA：PEFT 0.21 配合 transformers 5 会把混合专家模型 target_modules "
        "中的这些名称读作专家参数，适配器就会加载到别的权重上。请导出为 'merged'，或训练时不把 '{names}' 放进 target_modules。"),
    "lora.moe_modules": Entry(
        "PEFT resolves a mixture-of-experts model's target_modules to module names ({leaves}), which would also "
        "adapt {module}, untrained here. Export 'merged', or target every layer.",
        "PEFT 会把混合专家模型的 target_modules 解析为模块名（{leaves}），这也会适配这里未训练的 {module}。请导出为 'merged'，或以每一层为目标。"),
    "lora.moe_experts": Entry(
        "PEFT's target_parameters 'mlp.experts.{projection}' would also adapt {module}, untrained here. Export "
        "'merged', or target the experts of every sparse layer.",
        "PEFT 的 target_parameters 'mlp.experts.{projection}' 也会适配这里未训练的 {module}。请导出为 'merged'，或以每个稀疏层的专家为目标。"),
    # safetensors files (core.weights.safetensors_io's reader, core.engine.checkpoint); `reason` is the
    # reader's own (weights.short_file ...), the safetensors library's (weights.safetensors_says) or the OS's
    "weights.unreadable": Entry(
        "{file}: cannot read safetensors file (truncated or corrupt?): {reason}",
        "{file}：无法读取 safetensors 文件（文件被截断或已损坏？）：{reason}",
        {"reason": "message"}),
    "weights.unreadable_tensor": Entry(
        "{file}: cannot read tensor {name} (truncated or corrupt?): {reason}",
        "{file}：无法读取张量 {name}（文件被截断或已损坏？）：{reason}",
        {"reason": "message"}),
    "weights.safetensors_says": Entry("{safetensors_says}", "{safetensors_says}", {"safetensors_says": "quoted"}),
    "weights.os_error": Entry("{os_error}", "{os_error}", {"os_error": "os_error"}),
    "weights.short_file": Entry("file shorter than the 8-byte header length", "文件比 8 字节的文件头长度还短"),
    "weights.header_length": Entry(
        "header length {length} does not fit the file ({size} bytes)",
        "文件头长度 {length} 与文件大小（{size} 字节）不符"),
    "weights.header_json": Entry(
        "header is not valid JSON: {json_says}",
        "文件头不是有效的 JSON：{json_says}",
        {"json_says": "quoted"}),
    "weights.header_not_object": Entry("header is not a JSON object", "文件头不是 JSON 对象"),
    "weights.bad_entry": Entry(
        "tensor {name}: malformed header entry {py_value}",
        "张量 {name}：文件头条目格式错误 {py_value}",
        {"py_value": "py_value"}),
    "weights.bad_offsets": Entry(
        "tensor {name}: bytes [{begin}, {end}) do not hold {dtype}{shape} inside the file's {data_bytes} data "
        "bytes (truncated?)",
        "张量 {name}：字节区间 [{begin}, {end}) 装不下 {dtype}{shape}，文件只有 {data_bytes} 个数据字节（被截断？）"),
    "weights.ends_early": Entry(
        "tensor {name}: the file ends before its last byte (truncated?)",
        "张量 {name}：文件在其最后一个字节之前就结束了（被截断？）"),
    "weights.two_shards": Entry(
        "{file}: tensor {name} appears in more than one shard.",
        "{file}：张量 {name} 出现在多个分片中。"),
    # ... a Hugging Face checkpoint against the model its config.json describes (core.engine.checkpoint)
    "weights.missing_tensor": Entry(
        "{source}: missing tensor {name} required by {architecture}.",
        "{source}：缺少 {architecture} 需要的张量 {name}。"),
    "weights.missing_tensors": Entry(
        "{source}: missing tensor {name} (and {more} more) required by {architecture}.",
        "{source}：缺少 {architecture} 需要的张量 {name}（另有 {more} 个）。"),
    "weights.unexpected_tensor": Entry(
        "{source}: unexpected tensor {name} that {architecture} with this config.json does not have.",
        "{source}：多余的张量 {name}，按此 config.json 构建的 {architecture} 没有它。"),
    "weights.unexpected_tensors": Entry(
        "{source}: unexpected tensor {name} (and {more} more) that {architecture} with this config.json does not "
        "have.",
        "{source}：多余的张量 {name}（另有 {more} 个），按此 config.json 构建的 {architecture} 没有它们。"),
    "weights.shape": Entry(
        "{source}: tensor {name} has shape {shape}, config.json implies {expected}.",
        "{source}：张量 {name} 的形状为 {shape}，而 config.json 要求 {expected}。"),
    "weights.dtype": Entry(
        "dtype {py_value} is not supported; use one of {choices}.",
        "不支持数据类型 {py_value}；请使用以下之一：{choices}。",
        {"py_value": "py_value", "choices": "names"}),
    "weights.storage_dtype": Entry(
        "storage dtype {py_value} is not supported; use one of {choices}.",
        "不支持存储数据类型 {py_value}；请使用以下之一：{choices}。",
        {"py_value": "py_value", "choices": "names"}),
    "weights.cpu_bf16": Entry(
        "dtype bfloat16: MindSpore's CPU kernels do not support bf16 compute; load as float32 (or float16) on the "
        "CPU, or use a GPU/Ascend device.",
        "数据类型 bfloat16：MindSpore 的 CPU 算子不支持 bf16 计算；在 CPU 上请以 float32（或 float16）加载，或使用 GPU/Ascend 设备。"),
    "weights.base_tensor_gone": Entry(
        "{folder}: tensor {name} of the base checkpoint is gone; the export copies it from there.",
        "{folder}：基座检查点的张量 {name} 已不存在；导出需要从那里复制它。"),
    # a checkpoint (core.run.ckpt_store): its manifest, its files, the pointers
    "ckpt.dtype_unsupported": Entry(
        "tensor {name}: dtype {dtype} cannot be saved as safetensors",
        "张量 {name}：数据类型 {dtype} 无法保存为 safetensors"),
    "ckpt.no_step": Entry("{folder}: no checkpoint of step {step}", "{folder}：没有第 {step} 步的检查点"),
    "ckpt.unreadable_manifest": Entry(
        "{file}: unreadable manifest ({error}); the checkpoint cannot be trusted.",
        "{file}：无法读取清单（{error}）；该检查点不可信。"),
    "ckpt.not_manifest": Entry("{file}: not a checkpoint manifest (no 'files').", "{file}：不是检查点清单（没有 'files'）。"),
    "ckpt.incomplete": Entry(
        "{folder}: incomplete checkpoint, {missing_file} is missing.",
        "{folder}：检查点不完整，缺少 {missing_file}。"),
    "ckpt.manifest_omits": Entry("{file}: does not list {missing_file}.", "{file}：没有列出 {missing_file}。"),
    "ckpt.file_missing": Entry("{file}: missing (the manifest lists it).", "{file}：文件缺失（清单中列有它）。"),
    "ckpt.size_differs": Entry(
        "{file}: {size} bytes, the manifest recorded {expected} (truncated or changed after it was saved).",
        "{file}：{size} 字节，清单记录的是 {expected}（保存后被截断或改动）。"),
    "ckpt.sha_differs": Entry(
        "{file}: sha256 {actual}… differs from the manifest's {expected}… (corrupted or changed after it was "
        "saved).",
        "{file}：sha256 {actual}… 与清单中的 {expected}… 不同（保存后损坏或被改动）。"),
    "ckpt.no_last": Entry(
        "{folder}: no 'last' checkpoint to resume from; saved checkpoints that verify: {checkpoints}.",
        "{folder}：没有可恢复的 'last' 检查点；校验通过的已保存检查点：{checkpoints}。"),
    "ckpt.no_last_none": Entry(
        "{folder}: no 'last' checkpoint to resume from (the run saved none).",
        "{folder}：没有可恢复的 'last' 检查点（该运行没有保存过检查点）。"),
    "ckpt.not_found": Entry(
        "{folder}: checkpoint not found; give a run folder or runs/<id>/checkpoints/step-N.",
        "{folder}：找不到检查点；请给出运行目录或 runs/<id>/checkpoints/step-N。"),
    "ckpt.corrupt_others": Entry(
        "{reason} Checkpoints that verify: {checkpoints}; to resume from one, name it exactly: run.resume={path}",
        "{reason} 校验通过的检查点：{checkpoints}；要从其中之一恢复，请准确地指定：run.resume={path}",
        {"reason": "message"}),
    "ckpt.corrupt_none": Entry(
        "{reason} No other checkpoint of this run verifies.",
        "{reason} 该运行没有其他校验通过的检查点。",
        {"reason": "message"}),
    "ckpt.disk_full": Entry(
        "disk full: saving checkpoint step {step} in {folder} needs {needed}, {free} is free (short by {short}); "
        "{note}. Free space on that disk, or keep fewer checkpoints (train.keep_last_n).",
        "磁盘已满：在 {folder} 中保存第 {step} 步的检查点需要 {needed}，剩余 {free}（还差 "
        "{short}）；{note}。请释放该磁盘的空间，或少保留一些检查点（train.keep_last_n）。",
        {"note": "message"}),
    "ckpt.intact": Entry("earlier checkpoints are intact (last -> {checkpoint})", "之前的检查点完好（'last' -> {checkpoint}）"),
    "ckpt.untouched": Entry("no earlier checkpoint was touched", "之前的检查点均未改动"),
    # a family's key map (core.spec.families.KeyMap.to_ours), said after the checkpoint (model.at)
    "family.keys_collide": Entry(
        "tensors {name} and {other} both map to {target}",
        "张量 {name} 和 {other} 都映射到 {target}"),
    # `codec_says`)
    "weights.header_not_utf8": Entry(
        "header is not valid JSON: 'utf-8' codec can't decode byte {byte} in position {position}: {codec_says}",
        "文件头不是有效的 JSON：'utf-8' 解码器无法解码位置 {position} 的字节 {byte}：{codec_says}",
        {"codec_says": "codec_reason"}),
    "weights.header_not_utf8_bytes": Entry(
        "header is not valid JSON: 'utf-8' codec can't decode bytes in position {position}-{last}: {codec_says}",
        "文件头不是有效的 JSON：'utf-8' 解码器无法解码位置 {position}-{last} 的字节：{codec_says}",
        {"codec_says": "codec_reason"}),
}
