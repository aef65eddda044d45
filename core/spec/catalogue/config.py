"""Core's messages: a config file and its fields (core.spec.config), and where in it a problem is.

Each id has its English and its 中文 side by side, and the kind of each parameter that is
not plain text (core.spec.catalogue.entry.KINDS)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

MESSAGES: dict[str, Entry] = {
    # a config's rules across fields (core.spec.config); the key, value and file are said around them
    "config.resume_and_fork": Entry(
        "set run.resume (continue this run) or run.fork_from (start a new run from a checkpoint), not both",
        "只能设置 run.resume（继续此运行）或 run.fork_from（从检查点开始新运行）之一"),
    "config.steps_or_epochs": Entry(
        "set exactly one of train.max_steps and train.epochs (epochs = {epochs})",
        "train.max_steps 与 train.epochs 必须恰好设置一个（train.epochs = {epochs}）"),
    "config.below_max_steps": Entry("must be < train.max_steps ({steps})", "必须 < train.max_steps（{steps}）"),
    "config.packing_and_grouping": Entry(
        "packing already removes the padding; set data.packing or data.group_by_length, not both",
        "打包已经去掉了填充；data.packing 与 data.group_by_length 只能设置一个"),
    "config.score_needs_test": Entry(
        "scores the generated test answers: needs eval.downstream true and a data.test_file (or watch val_loss)",
        "要给生成的测试回答评分：需要 eval.downstream 为 true 并设置 data.test_file（或改为监控 val_loss）"),
    "config.no_validation": Entry(
        "no validation data: set data.validation_file or data.validation_fraction in (0, 0.5]",
        "没有验证数据：请设置 data.validation_file，或把 data.validation_fraction 设在 (0, 0.5] 内"),
    "config.cpu_bf16_compute": Entry(
        "bf16 compute is not supported by MindSpore's CPU kernels (amp_level {level}); use float16 or amp_level O0 "
        "(fp32), or run on parallel.device gpu/ascend",
        "MindSpore 的 CPU 算子不支持 bf16 计算（amp_level {level}）；请用 float16 或 amp_level O0（fp32），或在 parallel.device "
        "gpu/ascend 上运行"),
    "config.cpu_bf16_full": Entry(
        "full fine-tuning on the CPU trains every weight, and MindSpore's CPU kernels have no bf16 compute, so the "
        "master weights must be float32: use model.dtype float32 (a bf16 checkpoint loads exactly), or method lora "
        "(the frozen base weights then stay bf16)",
        "在 CPU 上全量微调会训练每个权重，而 MindSpore 的 CPU 算子没有 bf16 计算，所以主权重必须是 float32：请用 model.dtype float32（bf16 "
        "检查点可精确加载），或 method=lora（冻结的基座权重保持 bf16）"),
    "config.bf16_full": Entry(
        "full fine-tuning would keep the trained weights in bf16 (MindSpore's nn.Adam writes each update back into "
        "a bf16 parameter, losing the small ones); keep float32 master weights with bf16 compute: model.dtype "
        "float32 (a bf16 checkpoint loads exactly) with precision.amp_level O2 and precision.compute_dtype "
        "bfloat16, or method lora",
        "全量微调会把训练的权重保存为 bf16（MindSpore 的 nn.Adam 把每次更新写回 bf16 参数，小的更新会丢失）；请保留 float32 主权重、以 bf16 计算：model.dtype "
        "float32（bf16 检查点可精确加载）配合 precision.amp_level O2 与 precision.compute_dtype bfloat16，或使用 method=lora"),
    "config.lora_16bit_amp": Entry(
        "with LoRA on the CPU, model.dtype {dtype} keeps the frozen base weights in 16 bits and computes in "
        "float32; AMP would compute in float16 instead (slower on the CPU): use amp_level O0, or model.dtype "
        "float32 with AMP",
        "在 CPU 上用 LoRA 时，model.dtype {dtype} 以 16 位保存冻结的基座权重并以 float32 计算；AMP 会改用 float16 计算（在 CPU 上更慢）：请用 "
        "amp_level O0，或 model.dtype float32 配合 AMP"),
    "config.optimizer_shard": Entry(
        "not supported: MindSpore shards optimizer state only for Lamb/AdamWeightDecay/AdaFactor (its parallel "
        "optimizer, Ascend data parallel), and this engine's optimizer is nn.Adam with bias correction, which "
        "AdamWeightDecay lacks (without it fine-tunes stalled); set it to false. To save memory use method lora, "
        "recompute.policy full or a smaller train.micro_batch_size",
        "不支持：MindSpore 只为 Lamb/AdamWeightDecay/AdaFactor 切分优化器状态（其并行优化器，昇腾数据并行），而本引擎的优化器是带偏差修正的 "
        "nn.Adam，AdamWeightDecay 没有偏差修正（没有它微调会停滞）；请设为 false。要省内存请用 method=lora、recompute.policy full 或更小的 "
        "train.micro_batch_size"),
    "config.slurm_workers": Entry(
        "launch.nodes x launch.workers_per_node ({nodes} x {per_node} = {workers}) must equal "
        "parallel.data_parallel ({data_parallel}): every worker is one data-parallel rank",
        "launch.nodes × launch.workers_per_node（{nodes} × {per_node} = {workers}）必须等于 "
        "parallel.data_parallel（{data_parallel}）：每个工作进程是一个数据并行的 rank"),
    "config.reward_accuracy_sft": Entry(
        "reward accuracy needs a preference objective (train.objective dpo, simpo, orpo or kto)",
        "奖励准确率需要偏好目标（train.objective dpo、simpo、orpo 或 kto）"),
    "config.no_ppl_to_watch": Entry(
        "train.objective {objective} has no perplexity to watch (its loss is not a language-model loss): watch "
        "reward_accuracy, val_loss or val_loss_ema",
        "train.objective {objective} 没有可监控的困惑度（它的损失不是语言模型损失）：请监控 reward_accuracy、val_loss 或 val_loss_ema"),
    "config.packing_preference": Entry(
        "train.objective {objective} scores whole answers; packed rows are not supported for preference data: set "
        "data.packing false",
        "train.objective {objective} 按整个回答评分；偏好数据不支持打包的行：请把 data.packing 设为 false"),
    "config.router_loss_preference": Entry(
        "the router's balancing loss is not combined with train.objective {objective}: set it false",
        "路由器的均衡损失不能与 train.objective {objective} 一起使用：请设为 false"),
    "config.adapter_off_full": Entry(
        "needs method lora (full fine-tuning has no adapter to switch off): use frozen_copy or auto",
        "需要 method=lora（全量微调没有可关闭的适配器）：请用 frozen_copy 或 auto"),
    # ... a config file that cannot be read (core.spec.config); `os_says`, `codec_says` and `yaml_says`
    # are the operating system's, Python's UTF-8 decoder's and PyYAML's own reasons
    "config.unreadable": Entry(
        "{file}: cannot read config file ({os_says})",
        "{file}：无法读取配置文件（{os_says}）",
        {"os_says": "os_reason"}),
    "config.not_utf8": Entry(
        "{file}: cannot read config file (not UTF-8 text: {codec_says})",
        "{file}：无法读取配置文件（不是 UTF-8 文本：{codec_says}）",
        {"codec_says": "codec_reason"}),
    "config.invalid_yaml": Entry(
        "{file}: invalid YAML: {yaml_says}",
        "{file}：YAML 无效：{yaml_says}",
        {"yaml_says": "quoted"}),
    "config.invalid_yaml_line": Entry(
        "{file}: line {line}: invalid YAML: {yaml_says}",
        "{file} 第 {line} 行：YAML 无效：{yaml_says}",
        {"yaml_says": "quoted"}),
    "config.yaml_character": Entry(
        "{file}: line {line}: invalid YAML: the control character {character} is not allowed",
        "{file} 第 {line} 行：YAML 无效：不允许控制字符 {character}"),
    "config.not_sections": Entry(
        "{file}: must be a mapping of sections (run:, model:, train:, ...), not a {py_type}",
        "{file}：必须是各节（run:、model:、train:……）的映射，而不是{py_type}",
        {"py_type": "py_type"}),
    "config.empty_file": Entry(
        "{file}: empty; a config is a mapping of sections (run:, model:, train:, ...)",
        "{file}：文件为空；配置是各节（run:、model:、train:……）的映射"),
    "config.bad_override": Entry(
        "override {text} must look like key=value, e.g. train.learning_rate=1e-4",
        "覆盖项 {text} 必须写成 key=value，例如 train.learning_rate=1e-4"),
    "config.bad_base": Entry("must be a file name or a list of file names", "必须是文件名或文件名列表"),
    "config.base_cycle": Entry("inheritance cycle: {cycle}", "继承成环：{cycle}"),
    "config.base_missing": Entry("file not found: {file}", "文件不存在：{file}"),
    # what a field accepts (core.spec.config's FieldInfo.rule), said after "must be"
    "field.rule.bool": Entry("true or false", "true 或 false"),
    "field.rule.string": Entry("a string", "字符串"),
    "field.rule.integer": Entry("an integer", "整数"),
    "field.rule.number": Entry("a number", "数字"),
    "field.rule.integer_bound": Entry("an integer {op} {bound}", "整数，且 {op} {bound}"),
    "field.rule.number_bound": Entry("a number {op} {bound}", "数字，且 {op} {bound}"),
    "field.rule.integer_in": Entry("an integer in {range}", "整数，取值范围 {range}"),
    "field.rule.number_in": Entry("a number in {range}", "数字，取值范围 {range}"),
    "field.rule.one_of": Entry("one of {options}", "以下之一：{options}"),
    "field.rule.or_null": Entry("{reason}, or null", "{reason}，或 null", {"reason": "message"}),
    "field.rule.target_modules": Entry(
        "a non-empty list of module names, 'q_proj,v_proj', or one regular expression",
        "非空的模块名列表、'q_proj,v_proj' 形式的文本，或一个正则表达式"),
    "field.rule.profile_steps": Entry(
        "two step numbers [start, end] with 1 <= start <= end (text: '3,5')",
        "两个步数 [起, 止]，且 1 <= 起 <= 止（文本形式：'3,5'）"),
    "field.rule.trackers": Entry(
        "a list of {trackers} (each at most once), or []",
        "由 {trackers} 组成的列表（每个至多一次），或 []"),
    "field.rule.columns": Entry(
        "a mapping of format fields to the dataset's column names, e.g. {{instruction: question, output: answer}}",
        "格式字段到数据集列名的映射，例如 {{instruction: question, output: answer}}"),
    "field.rule.dataset": Entry(
        "a dataset name of the dataset_info.json catalogue, a list of them (text: 'a, b')",
        "dataset_info.json 目录中的数据集名称，或其列表（文本形式：'a, b'）"),
    "field.rule.data_files": Entry(
        "a file, a dataset folder, folder#split, or a list of files (text: '[a.jsonl, b.jsonl]' or 'a.jsonl, "
        "b.jsonl')",
        "一个文件、数据集目录、目录#划分，或文件列表（文本形式：'[a.jsonl, b.jsonl]' 或 'a.jsonl, b.jsonl'）"),
    "field.rule.time_limit": Entry(
        "a Slurm time limit ({forms}, e.g. 30, 1:30:00, 2-12)",
        "Slurm 时间限制（{forms}，例如 30、1:30:00、2-12）"),
    "field.rule.sbatch_options": Entry(
        "a list of sbatch options, each one item '--name=value' or '--name' (long form; no shell characters; not "
        "the ones the launcher sets: --output, --error, --chdir, --nodes, ...)",
        "sbatch 选项的列表，每项一个 '--name=value' 或 '--name'（长格式；不含命令行特殊字符；不能是启动器自己设置的选项：--output、--error、--chdir、"
        "--nodes……）"),
    "field.rule.env": Entry(
        "a mapping of environment variable names ([A-Za-z_][A-Za-z0-9_]*) to values, e.g. {{HF_HOME: /data/hf}}",
        "环境变量名（[A-Za-z_][A-Za-z0-9_]*）到值的映射，例如 {{HF_HOME: /data/hf}}"),
    "field.rule.slurm_name": Entry("a Slurm name (letters, digits, '_', '.', '-')", "Slurm 名称（字母、数字、'_'、'.'、'-'）"),
    # ... why a field's value is refused (`re_says`: Python's re module's own reason)
    "field.must_be": Entry("must be {reason}", "必须是{reason}", {"reason": "message"}),
    "field.must_be_suggest": Entry(
        "must be {reason} (did you mean {suggestion}?)",
        "必须是{reason}（是否想写 {suggestion}？）",
        {"reason": "message"}),
    "field.not_empty": Entry("must not be empty", "不能为空"),
    "field.bad_regex": Entry(
        "is not a valid regular expression: {re_says}",
        "不是有效的正则表达式：{re_says}",
        {"re_says": "quoted"}),
    "field.unknown_key": Entry(
        "unknown key; valid keys: {valid_names}",
        "未知的键；有效的键：{valid_names}",
        {"valid_names": "names"}),
    "field.unknown_key_suggest": Entry(
        "unknown key (did you mean {suggestion}?); valid keys: {valid_names}",
        "未知的键（是否想写 {suggestion}？）；有效的键：{valid_names}",
        {"valid_names": "names"}),
    "field.section_mapping": Entry("must be a mapping of {section} settings", "必须是 {section} 设置的映射"),
    "field.unknown_tracker": Entry(
        "has unknown tracker {name}; must be {reason}",
        "含未知的跟踪工具 {name}；必须是{reason}",
        {"reason": "message"}),
    "field.unknown_tracker_suggest": Entry(
        "has unknown tracker {name} (did you mean {suggestion}?); must be {reason}",
        "含未知的跟踪工具 {name}（是否想写 {suggestion}？）；必须是{reason}",
        {"reason": "message"}),
    "field.tracker_twice": Entry(
        "names a tracker twice; must be {reason}",
        "同一个跟踪工具出现了两次；必须是{reason}",
        {"reason": "message"}),
    "field.unknown_column_field": Entry(
        "has unknown field {name}; valid fields: {valid_names}",
        "含未知字段 {name}；有效字段：{valid_names}",
        {"valid_names": "names"}),
    "field.unknown_column_field_suggest": Entry(
        "has unknown field {name} (did you mean {suggestion}?); valid fields: {valid_names}",
        "含未知字段 {name}（是否想写 {suggestion}？）；有效字段：{valid_names}",
        {"valid_names": "names"}),
    "field.column_not_string": Entry(
        "maps {name} to {column}; the column name must be a non-empty string",
        "把 {name} 映射到 {column}；列名必须是非空字符串"),
    "field.data_file_items": Entry(
        "must be {reason}; every item a non-empty file name",
        "必须是{reason}；每一项都须是非空文件名",
        {"reason": "message"}),
    "field.time_limit_zero": Entry("must be a time limit above zero", "必须是大于零的时间限制"),
    "field.sbatch_not_text": Entry("{item} is not an option string", "{item} 不是选项文本"),
    "field.sbatch_shell": Entry(
        "{item} contains {characters}: no shell characters or newlines",
        "{item} 含有 {characters}：不能有命令行特殊字符或换行"),
    "field.sbatch_form": Entry(
        "{item} is not one '--name=value' item (use the long form, one option per item, e.g. --mem=4G)",
        "{item} 不是单个 '--name=value' 项（请用长格式，每项一个选项，例如 --mem=4G）"),
    "field.sbatch_reserved": Entry(
        "{item} sets {option}, which the launcher sets itself",
        "{item} 设置了 {option}，而启动器会自己设置它"),
    "field.sbatch_reserved_use": Entry(
        "{item} sets {option}, which the launcher sets itself; use {instead}",
        "{item} 设置了 {option}，而启动器会自己设置它；请用 {instead}"),
    "field.env_name": Entry(
        "has the name {name}; a variable name is letters, digits and '_', not starting with a digit",
        "变量名为 {name}；变量名由字母、数字和 '_' 组成，且不能以数字开头"),
    "field.env_value": Entry(
        "gives {name} the value {py_value}; a value must be a string or a number",
        "给 {name} 的值为 {py_value}；值必须是字符串或数字",
        {"py_value": "py_value"}),
    "field.env_newline": Entry("gives {name} a value with a newline; values are one line", "给 {name} 的值含换行；值只能是一行"),
    # ... as the console's form says it: a paired widget names its part ({widget}: steps, epochs, target modules,
    # where to run, partition) before the reason
    "field.named": Entry("{widget} {reason}", "{widget}{reason}", {"widget": "widget", "reason": "message"}),
    "field.give_length": Entry("give the number of steps or epochs", "请填写步数或轮数"),
    # ... and where a problem is: its setting (a dotted key), the value it has and the file that set it
    "problem.got": Entry("{reason} (got {value})", "{reason}（当前值 {value}）", {"reason": "message"}),
    "problem.empty": Entry("{reason} (the field is empty)", "{reason}（该字段为空）", {"reason": "message"}),
    "problem.and": Entry("{reason}; {note}", "{reason}；{note}", {"reason": "message", "note": "message"}),
    "problem.at_key": Entry("{setting}: {reason}", "{setting}：{reason}", {"reason": "message"}),
    "problem.at_value": Entry("{setting} = {value}: {reason}", "{setting} = {value}：{reason}", {"reason": "message"}),
    "problem.at_key_in": Entry(
        "{setting} in {source}: {reason}",
        "{setting}（{source} 中）：{reason}",
        {"reason": "message"}),
    "problem.at_value_in": Entry(
        "{setting} = {value} in {source}: {reason}",
        "{setting} = {value}（{source} 中）：{reason}",
        {"reason": "message"}),
    # objectives (core.spec.objectives) and GRPO's settings (core.spec.config's grpo: section)
    "config.monitor_not_for_objective": Entry(
        "train.objective {objective} does not log {monitor}; early stopping can watch {monitors}",
        "train.objective {objective} 不记录 {monitor}；早停可以监控 {monitors}"),
    "config.grpo_epsilon_high": Entry(
        "grpo.epsilon_high {high} is below grpo.epsilon {low}: the upper clip must not be tighter",
        "grpo.epsilon_high {high} 小于 grpo.epsilon {low}：上侧裁剪范围不能更窄"),
    "config.grpo_too_long": Entry(
        "grpo.max_prompt_len {prompt} + grpo.max_new_tokens {new} is more than data.max_seq_len {total}: raise "
        "data.max_seq_len or lower one of them",
        "grpo.max_prompt_len {prompt} + grpo.max_new_tokens {new} 超过了 data.max_seq_len {total}：请调大 "
        "data.max_seq_len 或调小其中之一"),
    "config.grpo_temperature_16bit": Entry(
        "grpo.temperature must be 1 with a {dtype} model.dtype under LoRA on the CPU: the frozen 16-bit head "
        "computes its loss in one kernel at temperature 1; set grpo.temperature 1 or model.dtype float32",
        "在 CPU 上以 LoRA 训练 {dtype} 的 model.dtype 时 grpo.temperature 必须为 1：冻结的 16 位输出头在一个内核里按温度 1 计算损失；请把 "
        "grpo.temperature 设为 1，或把 model.dtype 设为 float32"),
    "field.rule.rewards": Entry(
        "a list of reward functions, each {{function: NAME, weight: W, ...}} with NAME one of {functions}",
        "奖励函数列表，每项为 {{function: 名称, weight: 权重, ...}}，名称为 {functions} 之一"),
    "field.rewards_empty": Entry(
        "names no reward function; must be {reason}",
        "没有任何奖励函数；必须是{reason}",
        {"reason": "message"}),
    "field.reward_item": Entry(
        "reward {index} is not a mapping; must be {reason}",
        "第 {index} 个奖励不是映射；必须是{reason}",
        {"reason": "message"}),
    "field.reward_function": Entry(
        "reward {index}: unknown function {name}; one of {functions}",
        "第 {index} 个奖励：未知函数 {name}；应为 {functions} 之一"),
    "field.reward_function_suggest": Entry(
        "reward {index}: unknown function {name} (did you mean {suggestion}?); one of {functions}",
        "第 {index} 个奖励：未知函数 {name}（是否想写 {suggestion}？）；应为 {functions} 之一"),
    "field.reward_needs": Entry(
        "reward {index} ({function}) needs '{setting}'",
        "第 {index} 个奖励（{function}）需要 '{setting}'"),
    "field.reward_unknown_key": Entry(
        "reward {index} ({function}) has unknown setting '{setting}'; it takes {keys}",
        "第 {index} 个奖励（{function}）有未知设置 '{setting}'；可用的设置为 {keys}"),
    "field.reward_weight": Entry(
        "reward {index} ({function}): weight {value} is not a finite number",
        "第 {index} 个奖励（{function}）：权重 {value} 不是有限数"),
    "field.reward_regex": Entry(
        "reward {index}: the pattern is not a regular expression ({re_says})",
        "第 {index} 个奖励：模式不是正则表达式（{re_says}）",
        {"re_says": "quoted"}),
    "problem.lines": Entry("{lines}", "{lines}", {"lines": "lines"}),
}
