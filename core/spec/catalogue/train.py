"""Core's messages: the trainer's refusals, its state and GRPO's reward functions.

Each id has its English and its 中文 side by side, and the kind of each parameter that is
not plain text (core.spec.catalogue.entry.KINDS)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

MESSAGES: dict[str, Entry] = {
    # a run's training checkpoint (core.engine.checkpoint, core.engine.export)
    "engine.state_no_step": Entry("{file}: missing 'step'.", "{file}：缺少 'step'。"),
    "engine.params_mismatch": Entry(
        "{source}: does not match this run's parameters (missing {missing_keys}, unexpected {unexpected_keys}).",
        "{source}：与本次运行的参数不符（缺少 {missing_keys}，多出 {unexpected_keys}）。"),
    "engine.param_shape": Entry(
        "{source}: {name} has shape {shape}, expected {expected}.",
        "{source}：{name} 的形状为 {shape}，应为 {expected}。"),
    # lm-evaluation-harness's model (core.engine.lm_eval_model) and the preference objectives (core.engine.preference)
    "engine.eval_base_missing": Entry(
        "{folder}: its base model {base} (adapter_config.json) is not a folder here.",
        "{folder}：其基座模型 {base}（见 adapter_config.json）在这里不是目录。"),
    "engine.eval_gen_tokens": Entry(
        "max_gen_toks {max_gen_toks} must be below the model's context of {limit} tokens",
        "max_gen_toks {max_gen_toks} 必须小于模型的上下文长度 {limit} 个 token"),
    "engine.objective": Entry(
        "preference objective must be one of {choices}, got {py_value}",
        "偏好目标必须是以下之一：{choices}，实际为 {py_value}",
        {"choices": "names", "py_value": "py_value"}),
    "engine.loss_type": Entry(
        "preference.loss_type must be sigmoid or ipo, got {py_value}",
        "preference.loss_type 必须是 sigmoid 或 ipo，实际为 {py_value}",
        {"py_value": "py_value"}),
    # why the worker failed (core.train); `error` is a library's or Python's own text ("RuntimeError: boom"),
    # `os_says` the OS's reason
    "train.needs_msrun": Entry(
        "parallel.data_parallel = {data_parallel}: the worker must be started by msrun (python -m core.train "
        "--config ... does this for you).",
        "parallel.data_parallel = {data_parallel}：worker 必须由 msrun 启动（'python -m core.train --config ...' 会替你这样做）。"),
    "train.not_moe": Entry(
        "train.router_aux_loss: {architecture} is not a mixture of experts (it has no router); set it to false.",
        "train.router_aux_loss：{architecture} 不是混合专家模型（没有路由器）；请把它设为 false。"),
    "train.method_resume": Entry(
        "{path}: a {method} checkpoint cannot resume a {run_method} run.",
        "{path}：{method} 检查点不能恢复 {run_method} 运行。"),
    "train.method_fork": Entry(
        "{path}: a {method} checkpoint cannot start a {run_method} run; a fork keeps the method of its parent",
        "{path}：{method} 检查点不能开始 {run_method} 运行；分叉须保持其父运行的方法"),
    "train.other_base": Entry(
        "{path}: trained on another base model than {model}; a fork keeps the base model of its parent",
        "{path}：训练所用的基础模型不是 {model}；分叉须保持其父运行的基础模型"),
    "train.fork_parameters": Entry(
        "{reason} A fork keeps the trainable parameters of its parent (for LoRA: lora.rank and "
        "lora.target_modules).",
        "{reason} 分叉须保持其父运行的可训练参数（LoRA：lora.rank 和 lora.target_modules）。",
        {"reason": "message"}),
    "train.fork_steps": Entry(
        "must be more than the checkpoint's step {step}: a fork continues counting from there (give the total, "
        "e.g. {example})",
        "必须大于检查点的步数 {step}：分叉从那里接着计数（请给出总步数，例如 {example}）"),
    "train.nonfinite_loss": Entry("non-finite loss at step {step}", "第 {step} 步的损失不是有限值（NaN/Inf）"),
    "train.nonfinite_gradients": Entry(
        "non-finite gradients at step {step} (the loss, {loss}, was finite): lower train.learning_rate or set "
        "train.max_grad_norm",
        "第 {step} 步的梯度不是有限值（损失 {loss} 是有限值）：请调低 train.learning_rate 或设置 train.max_grad_norm"),
    "train.loss_scale_collapse": Entry(
        "fp16 loss scale collapse: the gradients overflowed {count} times in a row (steps {first_step}-{step}), "
        "every loss was finite; the dynamic loss scale fell from {first_scale} to {scale}. Use fp32 "
        "(precision.amp_level=O0) or a lower train.learning_rate.",
        "fp16 损失缩放崩溃：梯度连续 {count} 次溢出（第 {first_step}-{step} 步），损失都是有限值；动态损失缩放从 {first_scale} 降到了 {scale}。请使用 "
        "fp32（precision.amp_level=O0）或调低 train.learning_rate。"),
    "train.out_of_memory": Entry("out of memory: {error}. {advice}", "内存不足：{error}。{advice}", {"advice": "message"}),
    "train.device_out_of_memory": Entry(
        "out of {device} memory: {error}. {advice}",
        "{device} 显存不足：{error}。{advice}",
        {"advice": "message"}),
    "train.device_out_of_memory_figures": Entry(
        "out of {device} memory: {error} ({figures}). {advice}",
        "{device} 显存不足：{error}（{figures}）。{advice}",
        {"advice": "message"}),
    "train.disk_full": Entry(
        "disk full writing {file}: {os_says}; {free} free in {folder}. Free space on that disk.",
        "写入 {file} 时磁盘已满：{os_says}；{folder} 中剩余 {free}。请释放该磁盘的空间。",
        {"os_says": "os_reason"}),
    "train.disk_full_run_file": Entry(
        "disk full writing a run file: {os_says}; {free} free in {folder}. Free space on that disk.",
        "写入运行文件时磁盘已满：{os_says}；{folder} 中剩余 {free}。请释放该磁盘的空间。",
        {"os_says": "os_reason"}),
    "train.crashed": Entry("worker crashed: {error}", "worker 崩溃：{error}"),
    "train.dry_steps": Entry("--steps {steps}: must be >= 1", "--steps {steps}：必须 >= 1"),
    # a reward function that fails stops the run (core.eval.rewards: never a silent zero)
    "reward.file_import": Entry(
        "reward {function}: {file} does not import: {error}",
        "奖励函数 {function}：{file} 无法导入：{error}"),
    "reward.file_no_function": Entry(
        "reward {function}: {file} has no function {name}",
        "奖励函数 {function}：{file} 中没有函数 {name}"),
    "reward.file_not_callable": Entry(
        "reward {function}: {name} in {file} is a {py_type}, not a function",
        "奖励函数 {function}：{file} 中的 {name} 是 {py_type}，不是函数",
        {"py_type": "py_type"}),
    "reward.raised": Entry("reward {function} raised {error}", "奖励函数 {function} 抛出了异常 {error}"),
    "reward.not_a_list": Entry(
        "reward {function} returned a {py_type}, not a list of numbers",
        "奖励函数 {function} 返回的是 {py_type}，不是数字列表",
        {"py_type": "py_type"}),
    "reward.wrong_count": Entry(
        "reward {function} returned {count} values for {expected} completions",
        "奖励函数 {function} 为 {expected} 个补全返回了 {count} 个值"),
    "reward.not_a_number": Entry(
        "reward {function}: value {index} is {value}, a {py_type}, not a number",
        "奖励函数 {function}：第 {index} 个值是 {value}（{py_type}），不是数字",
        {"py_type": "py_type"}),
    "reward.not_finite": Entry(
        "reward {function}: value {index} is {value}, not a finite number",
        "奖励函数 {function}：第 {index} 个值是 {value}，不是有限数"),
    "reward.timeout": Entry(
        "reward {function} ran longer than grpo.reward_timeout_s = {seconds} s on one batch and was stopped",
        "奖励函数 {function} 在一个批次上运行超过 grpo.reward_timeout_s = {seconds} 秒，已被停止"),
    "reward.process_ended": Entry(
        "the reward process ended (exit code {code}) while it ran reward {function}",
        "奖励进程在运行奖励函数 {function} 时结束了（退出码 {code}）"),
    "reward.no_value": Entry(
        "reward {function}: {record} has no value in column {column}",
        "奖励函数 {function}：{record} 的列 {column} 没有值"),
    "reward.math_answer": Entry(
        "reward {function}: the answer {value} in column {column} ({record}) is nothing math-verify can read as a "
        "mathematical expression",
        "奖励函数 {function}：列 {column} 中的答案 {value}（{record}）无法被 'math-verify' 读取为数学表达式"),
    "reward.no_scorer": Entry(
        "reward {function}: a reward model (run {run}) is scored by the training engine, which gave no scorer here",
        "奖励函数 {function}：奖励模型（运行 {run}）由训练引擎打分，但这里没有提供打分器"),
    "reward.setting_not_count": Entry(
        "reward {function}: {setting} must be a whole number of tokens >= 1, not {value}",
        "奖励函数 {function}：{setting} 必须是不小于 1 的整数（token 数），而不是 {value}"),
    "reward.setting_not_bool": Entry(
        "reward {function}: {setting} must be true or false, not {value}",
        "奖励函数 {function}：{setting} 必须是 true 或 false，而不是 {value}"),
    "reward.soft_over_max": Entry(
        "reward {function}: soft_tokens {soft} is more than max_tokens {limit}",
        "奖励函数 {function}：soft_tokens {soft} 大于 max_tokens {limit}"),
    "reward.check_column": Entry(
        "reward {index} ({function}) reads column {column}, which the data lacks (its columns: {field_names})",
        "第 {index} 个奖励（{function}）读取列 {column}，但数据中没有这一列（现有的列：{field_names}）",
        {"field_names": "names"}),
    "reward.check_no_math": Entry(
        "reward {index} (math) needs the math-verify package: pip install math-verify",
        "第 {index} 个奖励（'math'）需要 'math-verify' 包：'pip install math-verify'"),
    "reward.check_file_missing": Entry(
        "reward {index} (file): {path} does not exist",
        "第 {index} 个奖励（file）：{path} 不存在"),
    "reward.check_file_outside": Entry(
        "reward {index} (file): {path} is outside the folders reward code may run from ({folders})",
        "第 {index} 个奖励（file）：{path} 不在允许运行奖励代码的文件夹中（{folders}）"),
    "reward.check_file_syntax": Entry(
        "reward {index} (file): {path} line {line} is not valid Python ({py_says})",
        "第 {index} 个奖励（file）：{path} 第 {line} 行不是有效的 Python（{py_says}）"),
    "reward.check_file_no_def": Entry(
        "reward {index} (file): {path} defines no function {name}",
        "第 {index} 个奖励（file）：{path} 没有定义函数 {name}"),
    "reward.check_run_missing": Entry(
        "reward {index} (reward_model): no run {run} in {runs}",
        "第 {index} 个奖励（reward_model）：{runs} 中没有运行 {run}"),
    "reward.check_run_unfinished": Entry(
        "reward {index} (reward_model): run {run} is {state}; a reward model must have finished",
        "第 {index} 个奖励（reward_model）：运行 {run} 的状态是 {state}；奖励模型必须已完成"),
    "reward.check_run_objective": Entry(
        "reward {index} (reward_model): run {run} trained train.objective {objective}, not a reward model "
        "(train.objective reward)",
        "第 {index} 个奖励（reward_model）：运行 {run} 训练的是 train.objective {objective}，不是奖励模型（train.objective 'reward'）"),
    "reward.check_setting": Entry("reward {index}: {reason}", "第 {index} 个奖励：{reason}", {"reason": "message"}),
    # the reward model (train.objective reward): its checkpoints, its scorer as a GRPO reward function, its
    # export (core.engine.reward_model, reward_scorer, export)
    "reward.no_head": Entry(
        "{file} has no {name}: it is not a reward model's checkpoint",
        "{file} 中没有 {name}：它不是奖励模型的检查点"),
    "reward.no_run": Entry(
        "{run} is not a run folder (it has no status.json): name a finished reward model run",
        "{run} 不是运行文件夹（没有 status.json）：请指定一个已完成的奖励模型运行"),
    "reward.not_finished": Entry(
        "reward model run {run} is '{state}', not finished: only a finished (or early-stopped) run can score "
        "completions; wait for it to end or name another run",
        "奖励模型运行 {run} 的状态是 '{state}'，尚未完成：只有已完成（或早停）的运行才能为补全打分；请等它结束，或指定另一个运行"),
    "reward.not_reward_run": Entry(
        "{run} is a train.objective {objective} run, not a reward model: name a run trained with train.objective "
        "'reward'",
        "{run} 是 train.objective {objective} 的运行，不是奖励模型：请指定以 train.objective 'reward' 训练的运行"),
    "reward.no_best": Entry(
        "reward model run {run} has no best checkpoint (checkpoints/best)",
        "奖励模型运行 {run} 没有最佳检查点（checkpoints/best）"),
    "reward.counts": Entry(
        "the reward model got {prompts} prompts and {completions} completions: it scores one completion per prompt",
        "奖励模型收到 {prompts} 个提示词和 {completions} 个补全：它为每个提示词的一个补全打分"),
    "reward.prompt_not_text": Entry(
        "prompt {index} is of type '{kind}': the reward model takes a prompt as text or a list of chat messages",
        "第 {index} 个提示词的类型是 '{kind}'：奖励模型接受文本或聊天消息列表作为提示词"),
    "reward.completion_not_text": Entry(
        "completion {index} is of type '{kind}': the reward model takes a completion as text or [{{role: "
        "assistant, content: text}}]",
        "第 {index} 个补全的类型是 '{kind}'：奖励模型接受文本或 [{{role: assistant, content: text}}] 作为补全"),
    # GRPO's loss, step and rollouts (core.engine.grpo), the reference pass shared with the preference
    # objectives (core.engine.preference.LogProbPass) and generation's top-k (core.engine.generate)
    "engine.grpo_loss_type": Entry(
        "grpo.loss_type must be one of {choices}, got {py_value}",
        "grpo.loss_type 必须是以下之一：{choices}，实际为 {py_value}",
        {"choices": "names", "py_value": "py_value"}),
    "engine.grpo_sampling_level": Entry(
        "grpo.importance_sampling_level must be one of {choices}, got {py_value}",
        "grpo.importance_sampling_level 必须是以下之一：{choices}，实际为 {py_value}",
        {"choices": "names", "py_value": "py_value"}),
    "engine.grpo_scale_rewards": Entry(
        "grpo.scale_rewards must be one of {choices}, got {py_value}",
        "grpo.scale_rewards 必须是以下之一：{choices}，实际为 {py_value}",
        {"choices": "names", "py_value": "py_value"}),
    "engine.grpo_group_size": Entry(
        "{count} rewards do not make whole groups of grpo.num_generations = {generations} completions (at least 2 "
        "a group)",
        "{count} 个奖励无法分成每组 grpo.num_generations = {generations} 个补全的完整组（每组至少 2 个）"),
    "engine.grpo_batch_rows": Entry(
        "a GRPO batch of {prompts} prompts × {generations} completions needs as many completions, truncation flags "
        "and advantages; got {completions}, {flags} and {advantages}",
        "由 {prompts} 个提示词 × {generations} 个补全组成的 GRPO 批次需要同样数量的补全、截断标记和优势值；实际为 {completions}、{flags} 和 {advantages}"),
    "engine.grpo_empty_row": Entry("a GRPO batch has an empty prompt or an empty completion", "GRPO 批次中有空的提示词或空的补全"),
    "engine.grpo_too_wide": Entry(
        "a prompt of {prompt} tokens or a completion of {completion} tokens does not fit the batch's widths of "
        "{prompt_width} + {completion_width} tokens",
        "{prompt} 个 token 的提示词或 {completion} 个 token 的补全放不进该批次的宽度 {prompt_width} + {completion_width} 个 token"),
    "engine.temperature_in_head": Entry(
        "grpo.temperature = {temperature} with a 16-bit frozen LM head: its loss kernel scores the tokens at "
        "temperature 1; set grpo.temperature to 1, or model.dtype to float32",
        "grpo.temperature = {temperature} 时 LM 头是冻结的 16 位权重：其损失内核按温度 1 为 token 打分；请将 grpo.temperature 设为 1，或将 "
        "model.dtype 设为 float32"),
    "engine.adapter_off_without_lora": Entry(
        "{objective} with the adapter switched off as its reference needs LoRA layers in the model; with full "
        "fine-tuning use a frozen reference copy",
        "{objective} 以关闭适配器的模型为参考，模型中需要有 LoRA 层；全量微调请使用冻结的参考副本"),
    "train.dry_out_of_memory": Entry("out of memory during the dry run: {error}", "试运行时内存不足：{error}"),
}
