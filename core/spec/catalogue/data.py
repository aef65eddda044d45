"""Core's messages: the data's files, records and statistics (core.data, core.spec.stats).

Each id has its English and its 中文 side by side, and the kind of each parameter that is
not plain text (core.spec.catalogue.entry.KINDS)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

MESSAGES: dict[str, Entry] = {
    # where in a data file (a record's line, its index in a JSON array or a table's row), around a reason
    "data.at_line": Entry("{file} line {line}: {reason}", "{file} 第 {line} 行：{reason}", {"reason": "message"}),
    "data.at_record": Entry(
        "{file} record {prefix}[{index}]: {reason}",
        "{file} 记录 {prefix}[{index}]：{reason}",
        {"reason": "message"}),
    "data.at_row": Entry(
        "{file} row index {row}: {reason}",
        "{file} 第 {row} 行（行号从 0 起）：{reason}",
        {"reason": "message"}),
    "data.at": Entry("{file}: {reason}", "{file}：{reason}", {"reason": "message"}),
    # a file that cannot be read (core.data.files); `os_error` is the operating system's reason (its
    # strerror, or Python's "[Errno 2] No such file or directory: 'x'"), `codec_says` and `json_says`
    # the UTF-8 decoder's and Python's json module's own reasons, `reader_says` gzip's or pyarrow's,
    # `csv_says` Python's csv module's
    "data.file_not_found": Entry("{file}: file not found", "{file}：文件不存在"),
    "data.unreadable": Entry("{file}: cannot read ({os_error})", "{file}：无法读取（{os_error}）", {"os_error": "os_error"}),
    "data.files_unreadable": Entry(
        "cannot read the data files ({os_error})",
        "无法读取数据文件（{os_error}）",
        {"os_error": "os_error"}),
    "data.not_readable": Entry(
        "{file}: not a readable {file_type} file ({reader_says})",
        "{file}：不是可读取的 {file_type} 文件（{reader_says}）"),
    "data.not_utf8": Entry(
        "not UTF-8 text ({codec_says}); save the file as UTF-8",
        "不是 UTF-8 文本（{codec_says}）；请把文件另存为 UTF-8",
        {"codec_says": "codec_reason"}),
    "data.invalid_json_line": Entry(
        "invalid JSON ({json_says} at column {column}); each line must be one JSON object",
        "JSON 无效（{json_says}，第 {column} 列）；每行必须是一个 JSON 对象",
        {"json_says": "quoted"}),
    "data.invalid_json": Entry(
        "invalid JSON ({json_says} at column {column})",
        "JSON 无效（{json_says}，第 {column} 列）",
        {"json_says": "quoted"}),
    "data.invalid_json_lines": Entry(
        "invalid JSON ({json_says} at column {column}); one object per line is JSON Lines: name the file .jsonl",
        "JSON 无效（{json_says}，第 {column} 列）；每行一个对象的是 JSONL 格式：请把文件命名为 .jsonl",
        {"json_says": "quoted"}),
    "data.not_an_object": Entry(
        "expected a JSON object with named fields, got {json_type}",
        "应为带命名字段的 JSON 对象，实际为{json_type}",
        {"json_type": "json_type"}),
    "data.not_an_array": Entry(
        '{file}: expected an array of objects, or an object with a list under "data"; found {json_type}',
        "{file}：应为对象数组，或在 'data' 下含列表的对象；实际为{json_type}",
        {"json_type": "json_type"}),
    "data.not_an_array_keys": Entry(
        '{file}: expected an array of objects, or an object with a list under "data"; found an object with keys '
        "{keys}",
        "{file}：应为对象数组，或在 'data' 下含列表的对象；实际为含键 {keys} 的对象"),
    "data.csv_values": Entry(
        "{count} values but the header has {columns} columns ({header_names}); quote values that contain commas",
        "有 {count} 个值，但表头有 {columns} 列（{header_names}）；含逗号的值请加引号",
        {"header_names": "names"}),
    "data.csv_malformed": Entry("malformed CSV ({csv_says})", "CSV 格式有误（{csv_says}）"),
    "data.csv_unnamed": Entry(
        "column {column} of the header has no name; name every column",
        "表头第 {column} 列没有名称；请给每列命名"),
    "data.csv_duplicates": Entry("duplicate column names {duplicates}", "列名重复：{duplicates}"),
    "data.unsupported_type": Entry(
        "{file}: unsupported file type {suffix}; supported: {supported}, or a Hugging Face dataset folder",
        "{file}：不支持的文件类型 {suffix}；支持：{supported}，或 Hugging Face 数据集目录"),
    "data.no_split": Entry(
        "{file}: no split {split}; splits: {split_names}",
        "{file}：没有划分 {split}；已有划分：{split_names}",
        {"split_names": "names"}),
    "data.no_records": Entry(
        "{file}: no records (the file is empty); expected records with the fields of a format (alpaca: "
        "instruction, output; sharegpt: conversations; chat: messages; text: text)",
        "{file}：没有记录（文件为空）；应为带某种格式字段的记录（alpaca: 'instruction', 'output'; sharegpt: 'conversations'; chat: "
        "'messages'; text: 'text'）"),
    # a setting of the data with a value it does not take (data.train_on, data.text_split, data.overlong)
    "data.not_valid": Entry(
        "{setting}: {value} is not valid; valid: {valid_names}",
        "{setting}：{value} 无效；有效值：{valid_names}",
        {"valid_names": "names"}),
    "data.not_a_format": Entry(
        "data.format: {value} is not a format; valid: {valid_names}",
        "data.format：{value} 不是一种格式；有效值：{valid_names}",
        {"valid_names": "names"}),
    # the records' format (core.data.formats); `formats` is format_help()'s list of each format's fields
    "data.unknown_format_keys": Entry(
        "cannot tell the format from the keys {keys}; expected {formats}; {note}",
        "无法从键 {keys} 判断格式；应为 {formats}；{note}",
        {"formats": "formats", "note": "message"}),
    "data.unknown_format_columns": Entry(
        "cannot tell the format from the columns {keys}; expected {formats}; {note}",
        "无法从列 {keys} 判断格式；应为 {formats}；{note}",
        {"formats": "formats", "note": "message"}),
    "data.map_these": Entry(
        "map these columns with data.columns, e.g. data.columns={{{pairs}}}",
        "可用 data.columns 映射这些列，例如 data.columns={{{pairs}}}"),
    "data.map_others": Entry(
        "map other column names with data.columns, e.g. data.columns={{instruction: question, output: answer}}",
        "其他列名可用 data.columns 映射，例如 data.columns={{instruction: question, output: answer}}"),
    "data.missing_columns": Entry(
        "{file}: found columns {found}; format {fmt} needs {required_names}, missing {missing_names}. Columns by "
        "format: {formats}; {note}",
        "{file}：找到的列 {found}；格式 {fmt} 需要 {required_names}，缺少 {missing_names}。各格式的列：{formats}；{note}",
        {"required_names": "names", "missing_names": "names", "formats": "formats", "note": "message"}),
    "data.missing_columns_optional": Entry(
        "{file}: found columns {found}; format {fmt} needs {required_names} ({optional_names} optional), missing "
        "{missing_names}. Columns by format: {formats}; {note}",
        "{file}：找到的列 {found}；格式 {fmt} 需要 {required_names}（可选 {optional_names}），缺少 "
        "{missing_names}。各格式的列：{formats}；{note}",
        {"required_names": "names", "optional_names": "names", "missing_names": "names", "formats": "formats",
         "note": "message"}),
    "data.column_not_used": Entry(
        "data.columns.{column}: format {fmt} does not use {column_shown} (it reads {read_names})",
        "data.columns.{column}：格式 {fmt} 不使用 {column_shown}（它读取 {read_names}）",
        {"read_names": "names"}),
    "data.mapped_column_missing": Entry(
        "data.columns maps {column} to {source}, but no record has a field {source}; fields: {field_names}",
        "data.columns 把 '{column}' 映射到 {source}，但没有记录含字段 {source}；字段：{field_names}",
        {"field_names": "names"}),
    "data.mapped_column_missing_close": Entry(
        "data.columns maps {column} to {source}, but no record has a field {source} (did you mean {close}?); "
        "fields: {field_names}",
        "data.columns 把 '{column}' 映射到 {source}，但没有记录含字段 {source}（是否想写 {close}？）；字段：{field_names}",
        {"field_names": "names"}),
    # a record's fields (core.data.formats)
    "data.missing_field": Entry(
        "missing field {field}; {fmt} records need {needs_fields} (strings)",
        "缺少字段 {field}；{fmt} 格式的记录需要 {needs_fields}（字符串）",
        {"needs_fields": "and_list"}),
    "data.missing_turns": Entry(
        "missing field {field}; {fmt} records need a list of {item} turns",
        "缺少字段 {field}；{fmt} 格式的记录需要 {item} 轮次的列表"),
    "data.not_a_string": Entry(
        "field {field} must be a string, got {json_type}",
        "字段 {field} 必须是字符串，实际为{json_type}",
        {"json_type": "json_type"}),
    "data.not_a_string_or_calls": Entry(
        "field {field} must be a string (or null with tool_calls), got {json_type}",
        "字段 {field} 必须是字符串（有 tool_calls 时可为 null），实际为{json_type}",
        {"json_type": "json_type"}),
    "data.not_turns": Entry(
        "field {field} must be a list of {item} objects, got {json_type}",
        "字段 {field} 必须是 {item} 对象的列表，实际为{json_type}",
        {"json_type": "json_type"}),
    "data.not_tools": Entry(
        "field {field} must be a list of tool schemas (objects), got {json_type}",
        "字段 {field} 必须是工具定义（对象）的列表，实际为{json_type}",
        {"json_type": "json_type"}),
    "data.not_history": Entry(
        "field {field} must be a list of [prompt, response] pairs, got {json_type}",
        "字段 {field} 必须是 [提示, 回答] 对的列表，实际为{json_type}",
        {"json_type": "json_type"}),
    "data.not_calls": Entry(
        "field {field} must be a list of objects, got {json_type}",
        "字段 {field} 必须是对象的列表，实际为{json_type}",
        {"json_type": "json_type"}),
    "data.not_a_turn": Entry(
        "field {field} must be an object with {role_tag} and {content_tag}, got {json_type}",
        "字段 {field} 必须是含 {role_tag} 和 {content_tag} 的对象，实际为{json_type}",
        {"json_type": "json_type"}),
    "data.empty_field": Entry("field {field} is empty; nothing to learn from", "字段 {field} 为空；没有可学习的内容"),
    "data.empty_conversation": Entry(
        "field {field} is empty; a conversation needs a user turn and an assistant turn",
        "字段 {field} 为空；对话至少需要一个用户轮次和一个助手轮次"),
    "data.assistant_first": Entry(
        "field {field} is an assistant turn before any user turn; a conversation starts with a system or user turn",
        "字段 {field} 是出现在任何用户轮次之前的助手轮次；对话应以系统或用户轮次开始"),
    "data.no_assistant": Entry(
        "field {field} has no assistant turn; a conversation needs at least one to learn from",
        "字段 {field} 没有助手轮次；对话至少需要一个用于学习"),
    "data.bad_role": Entry(
        "field {field} is {role}; valid roles: {role_names}",
        "字段 {field} 的值为 {role}；有效角色：{role_names}",
        {"role_names": "names"}),
    "data.bad_role_tags": Entry(
        "field {field} is {role}; valid roles: {role_names} (map other names with data.columns user_tag, "
        "assistant_tag, system_tag, function_tag, observation_tag)",
        "字段 {field} 的值为 {role}；有效角色：{role_names}（其他名称可用 data.columns 的 'user_tag', 'assistant_tag', 'system_tag', "
        "'function_tag', 'observation_tag' 映射）",
        {"role_names": "names"}),
    "data.needs_pyarrow": Entry(
        "{file}: reading {file_type} needs pyarrow (pip install 'pyarrow<26'); or convert the file to JSONL "
        "({reader_says})",
        "{file}：读取 {file_type} 需要 'pyarrow' 包（安装 'pyarrow<26'）；或把文件转换为 JSONL（{reader_says}）"),
    "data.only_blank_lines": Entry(
        "{file}: no records: no text left after splitting by {text_split} (data.text_split): the file holds only "
        "blank lines",
        "{file}：没有记录：按 '{text_split}' 切分（data.text_split）后没有剩下文本：文件只有空行"),
    "data.catalogue_as_file": Entry(
        "{file}: a dataset catalogue (dataset_info.json); choose its datasets with data.dataset (a name or a list "
        "of names) and name the folder as data.train_file",
        "{file}：这是数据集目录（dataset_info.json）；请用 data.dataset 选择其中的数据集（一个名称或名称列表），并把该目录设为 data.train_file"),
    # a dataset folder (core.data.files): `datasets`' save_to_disk, its shards, its splits
    "data.state_no_files": Entry(
        "{file}: no '_data_files' list; is this a folder written by datasets' save_to_disk?",
        "{file}：没有 '_data_files' 列表；这是 'datasets' 的 save_to_disk? 写出的目录吗？"),
    "data.state_bad_name": Entry(
        "{file}: '_data_files[{index}].filename' must be a file name, got {value}",
        "{file}：'_data_files[{index}].filename' 必须是文件名，实际为 {value}"),
    "data.shard_missing": Entry(
        "{file}: shard {shard} is missing (state.json lists {count} shards: {shard_names}); copy the whole folder "
        "again",
        "{file}：缺少分片 {shard}（state.json 列出了 {count} 个分片：{shard_names}）；请重新复制整个目录"),
    "data.split_shard_missing": Entry(
        "{file}: split {split} is missing shard {shard} ({missing} of {total} missing); copy the whole folder again",
        "{file}：划分 {split} 缺少分片 {shard}（共 {total} 个，缺 {missing} 个）；请重新复制整个目录"),
    "data.bad_dataset_dict": Entry('{file}: expected {{"splits": [names]}}', '{file}：应为 {{"splits": [名称]}}'),
    "data.cannot_list": Entry(
        "{file}: cannot list ({os_error})",
        "{file}：无法列出目录内容（{os_error}）",
        {"os_error": "os_error"}),
    "data.which_split": Entry(
        "{file}: cannot tell which split to use for {split_role} among {split_names}; name one as {file}#<split>",
        "{file}：无法确定{split_role}数据用 {split_names} 中的哪个划分；请写成 {file}#<split> 指定一个",
        {"split_role": "split_role", "split_names": "names"}),
    "data.no_role_split": Entry(
        "{file}: no {split_role} split (splits: {split_names}); name one as {file}#<split>",
        "{file}：没有{split_role}划分（已有划分：{split_names}）；请写成 {file}#<split> 指定一个",
        {"split_role": "split_role", "split_names": "names"}),
    "data.no_validation_split": Entry(
        "{file}: no validation split (splits: {split_names}); name one as {file}#<split>; or set "
        "data.validation_file to null and data.validation_fraction",
        "{file}：没有验证划分（已有划分：{split_names}）；请写成 {file}#<split> 指定一个；或把 data.validation_file 设为 null 并设置 "
        "data.validation_fraction",
        {"split_names": "names"}),
    "data.no_data_files": Entry(
        "{file}: no data files in this folder (looked {depth} levels deep for {supported}) and no state.json or "
        "dataset_dict.json",
        "{file}：该目录中没有数据文件（在 {depth} 层内查找 {supported}），也没有 state.json 或 dataset_dict.json"),
    # a format the data contradicts; its setting said by `reason` (data.format, a catalogue's 'formatting')
    "data.looks_like": Entry(
        "{reason}; the data looks like {detected} ({record_at} has the fields {field_names}, not {lacks_names}). "
        "Set data.format to auto (or {detected})",
        "{reason}；数据看起来是 {detected} 格式（{record_at} 的字段为 {field_names}，没有 {lacks_names}）。请把 data.format 设为 auto（或 "
        "{detected}）",
        {"reason": "message", "record_at": "place", "field_names": "names", "lacks_names": "names"}),
    "data.format_is": Entry("data.format is {value}", "data.format 为 {value}"),
    "data.format_set_in": Entry("data.format is {value} (set in {origin})", "data.format 为 {value}（在 {origin} 中设置）"),
    "data.formatting_is": Entry(
        "{entry}: 'formatting' is {value}",
        "{entry}：'formatting' 为 {value}",
        {"entry": "place"}),
    "data.preference_column": Entry(
        "data.columns.{column}: {column} is a column of preference data (chosen/rejected) or KTO data (label), "
        "which trains with train.objective dpo, simpo, orpo or kto, never as plain answers",
        "data.columns.{column}：'{column}' 是偏好数据（chosen/rejected）或 KTO 数据（'label'）的列，只能用 train.objective "
        "dpo、simpo、orpo 或 kto 训练，不能当作普通回答"),
    "data.mixed_formats": Entry(
        "{file}: the records are {fmt}, but {first_file} (the first file of {setting}) is {first_fmt}; the files "
        "of one list must share a format",
        "{file}：记录是 {fmt} 格式，但 {first_file}（{setting} 的第一个文件）是 {first_fmt} 格式；同一列表中的文件必须是同一格式"),
    # a field that holds JSON text, tools and function calls (core.data.formats)
    "data.text_not_json_tools": Entry(
        "field {field} is text but not JSON ({json_says}); expected a JSON list of tool schemas",
        "字段 {field} 是文本但不是 JSON（{json_says}）；应为工具定义的 JSON 列表",
        {"json_says": "quoted"}),
    "data.text_not_json_history": Entry(
        "field {field} is text but not JSON ({json_says}); expected a list of [prompt, response] pairs",
        "字段 {field} 是文本但不是 JSON（{json_says}）；应为 [提示, 回答] 对的列表",
        {"json_says": "quoted"}),
    "data.text_not_json_turns": Entry(
        "field {field} is text but not JSON ({json_says}); expected a JSON list of {item} objects",
        "字段 {field} 是文本但不是 JSON（{json_says}）；应为 {item} 对象的 JSON 列表",
        {"json_says": "quoted"}),
    "data.tool_no_name": Entry(
        'field {field} has no string \'name\'; a tool schema is {{"name", "description", "parameters"}} or '
        '{{"type": "function", "function": {{...}}}}',
        '字段 {field} 没有字符串 \'name\'；工具定义为 {{"name", "description", "parameters"}} 或 {{"type": "function", '
        '"function": {{...}}}}'),
    "data.bad_history_pair": Entry(
        "field {field} must be a [prompt, response] pair of strings, got {got_json}",
        "字段 {field} 必须是由两个字符串组成的 [提示, 回答] 对，实际为 {got_json}"),
    "data.call_not_json": Entry(
        'field {field} (a function_call turn) is not JSON ({json_says}); expected JSON {{"name": ..., "arguments": '
        "{{...}}}} or a list of them",
        '字段 {field}（function_call 轮次）不是 JSON（{json_says}）；应为 JSON {{"name": ..., "arguments": {{...}}}} 或其列表',
        {"json_says": "quoted"}),
    "data.call_shape": Entry(
        'field {field} (a function_call turn) must be JSON {{"name": ..., "arguments": {{...}}}} or a list of them',
        '字段 {field}（function_call 轮次）必须是 JSON {{"name": ..., "arguments": {{...}}}} 或其列表'),
    # the chat template and the data (core.data.pipeline); `reason` the template's own refusal
    "data.two_assistant_turns": Entry(
        "field {field}: two assistant turns in a row ({first_field} and {field}), which the chat template forbids "
        "({reason}); merge them or insert the user turn between them",
        "字段 {field}：连续两个助手轮次（{first_field} 和 {field}），对话模板不允许（{reason}）；请合并它们，或在中间插入用户轮次",
        {"reason": "message"}),
    "data.template_no_tools": Entry(
        "field {field}: the chat template of {model} does not render tools (the tool {tool} does not appear in its "
        "rendering); use a model whose template supports tools, or data without them",
        "字段 {field}：{model} 的对话模板不渲染工具（工具 {tool} 没有出现在渲染结果中）；请使用模板支持工具的模型，或不含工具的数据"),
    "data.template_no_calls": Entry(
        "field {field}: the chat template of {model} does not render tool calls (the call to {tool} does not "
        "appear in its rendering); use a model whose template supports tools",
        "字段 {field}：{model} 的对话模板不渲染工具调用（对 {tool} 的调用没有出现在渲染结果中）；请使用模板支持工具的模型"),
    "data.template_drops_turns": Entry(
        "field {field}: the chat template of {model} drops {turn_role} turns (this turn's text does not appear in "
        "its rendering)",
        "字段 {field}：{model} 的对话模板丢弃了{turn_role}轮次（该轮次的文本没有出现在渲染结果中）",
        {"turn_role": "turn_role"}),
    "data.template_rewrites": Entry(
        "cannot locate the assistant turn {field}: the chat template renders {note} as text that is not a prefix "
        "of the whole conversation (it rewrites earlier turns or the generation prompt). Use a template whose "
        "renderings only append, or set data.mask_prompt=false to train on every token",
        "无法定位助手轮次 {field}：对话模板把{note}渲染成的文本不是整段对话的前缀（它改写了前面的轮次或生成提示）。请使用只在末尾追加的模板，或设置 data.mask_prompt=false 训练全部 "
        "token",
        {"note": "message"}),
    "data.turns_before": Entry("the turns before {field} with the generation prompt", " {field} 之前的轮次（含生成提示）"),
    "data.turns_through": Entry("the turns through {field}", "到 {field} 为止的轮次"),
    "data.test_answer_not_text": Entry(
        "field {field}: the last assistant turn of a test record must be a text answer to compare with (this one "
        "is a tool call or empty)",
        "字段 {field}：测试记录的最后一个助手轮次必须是可供比较的文本回答（这一个是工具调用或为空）"),
    "data.overlong_one": Entry(
        "{count} record is longer than data.max_seq_len={max_seq_len} tokens (data.overlong: error): {listed}. "
        "Raise data.max_seq_len, or set data.overlong to truncate (cut prompt and answer in proportion) or skip "
        "(leave them out)",
        "{count} 条记录超过 data.max_seq_len={max_seq_len} 个 token（data.overlong: error）：{listed}。请调大 "
        "data.max_seq_len，或把 data.overlong 设为 'truncate'（按比例截断提示和回答）或 'skip'（跳过这些记录）",
        {"listed": "message"}),
    "data.overlong_many": Entry(
        "{count} records are longer than data.max_seq_len={max_seq_len} tokens (data.overlong: error): {listed}. "
        "Raise data.max_seq_len, or set data.overlong to truncate (cut prompt and answer in proportion) or skip "
        "(leave them out)",
        "{count} 条记录超过 data.max_seq_len={max_seq_len} 个 token（data.overlong: error）：{listed}。请调大 "
        "data.max_seq_len，或把 data.overlong 设为 'truncate'（按比例截断提示和回答）或 'skip'（跳过这些记录）",
        {"listed": "message"}),
    # preference data (core.data.preference)
    "data.prompt_fills": Entry(
        "field {field}: the prompt alone is {count} tokens, which fills data.max_seq_len={max_seq_len}; raise "
        "data.max_seq_len or shorten the prompt",
        "字段 {field}：仅提示就有 {count} 个 token，占满了 data.max_seq_len={max_seq_len}；请调大 data.max_seq_len 或缩短提示"),
    "data.supervised_not_preference": Entry(
        "{entry}: this dataset is supervised data (no 'ranking: true', no 'kto_tag' column); train.objective dpo, "
        "simpo, orpo or kto needs preference data. Choose a preference dataset or set train.objective sft",
        "{entry}：这是监督数据（没有 'ranking: true'，也没有 'kto_tag' 列）；train.objective dpo、simpo、orpo 或 kto "
        "需要偏好数据。请选择偏好数据集，或设置 train.objective sft",
        {"entry": "place"}),
    "data.objective_needs": Entry(
        "field {field}: train.objective {objective} needs {wanted}, but {held_by} holds {held}",
        "字段 {field}：train.objective {objective} 需要{wanted}，但 {held_by} 中是{held}",
        {"wanted": "data_kind", "held": "data_kind"}),
    "data.no_pairs_left": Entry(
        "{file}: no pairs left after dropping the identical ones",
        "{file}：丢弃完全相同的对之后没有剩下偏好对"),
    # a dataset catalogue (core.data.catalog: LLaMA-Factory's dataset_info.json) and its entries
    "data.at_entry": Entry("{file}: dataset {name}: {reason}", "{file}：数据集 {name}：{reason}", {"reason": "message"}),
    "data.catalogue_not_json": Entry(
        "not JSON ({json_says} at column {column}); a dataset catalogue is one object of named datasets",
        "不是 JSON（{json_says}，第 {column} 列）；数据集目录是由命名数据集组成的一个对象",
        {"json_says": "quoted"}),
    "data.catalogue_not_object": Entry(
        "{file}: expected an object of named datasets, got {py_type}",
        "{file}：应为由命名数据集组成的对象，实际为{py_type}",
        {"py_type": "py_type"}),
    "data.catalogue_choose": Entry(
        "{file}: a dataset catalogue (dataset_info.json); choose its datasets with data.dataset (a name or a list "
        "of names): {dataset_names}",
        "{file}：这是数据集目录（dataset_info.json）；请用 data.dataset 选择其中的数据集（一个名称或名称列表）：{dataset_names}",
        {"dataset_names": "dataset_names"}),
    "data.no_such_dataset": Entry(
        "data.dataset: no dataset {name} in {file}; datasets: {dataset_names}",
        "data.dataset：{file} 中没有数据集 {name}；已有数据集：{dataset_names}",
        {"dataset_names": "dataset_names"}),
    "data.entry_not_object": Entry(
        "expected an object with 'file_name', got {got_json}",
        "应为含 'file_name' 的对象，实际为 {got_json}"),
    "data.entry_on_hub": Entry(
        "field {field}: {url} is on {hub_place}; this console reads local files only; download it and name it in "
        "'file_name'",
        "字段 {field}：{url} 位于{hub_place}；本控制台只读取本地文件；请下载后在 'file_name' 中填写",
        {"hub_place": "hub"}),
    "data.entry_script": Entry(
        "field 'script_url': {url} is a loading script; scripts are not run here; convert its data to a file and "
        "name it in 'file_name'",
        "字段 'script_url'：{url} 是加载脚本；这里不运行脚本；请把其数据转换为文件并在 'file_name' 中填写"),
    "data.entry_no_file": Entry(
        "no field 'file_name' (the data file inside {folder})",
        "没有字段 'file_name'（{folder} 中的数据文件）"),
    "data.entry_formatting": Entry(
        "field 'formatting' is {value}; valid: {valid_names}",
        "字段 'formatting' 的值为 {value}；有效值：{valid_names}",
        {"valid_names": "names"}),
    "data.entry_bad_file_name": Entry(
        "field 'file_name' must be a file name or a list of them, got {value}",
        "字段 'file_name' 必须是文件名或文件名列表，实际为 {value}"),
    "data.entry_outside": Entry(
        "field 'file_name': {given} lies outside the catalogue folder {folder}",
        "字段 'file_name'：{given} 位于数据集目录 {folder} 之外"),
    "data.entry_file_missing": Entry("field 'file_name': {file} not found", "字段 'file_name'：{file} 不存在"),
    "data.entry_tags_alpaca": Entry(
        "field 'tags' applies to sharegpt formatting only (this entry is alpaca)",
        "字段 'tags' 只适用于 sharegpt 格式（该条目是 alpaca）"),
    "data.entry_num_samples": Entry(
        "field 'num_samples' must be a positive whole number, got {value}",
        "字段 'num_samples' 必须是正整数，实际为 {value}"),
    "data.entry_not_mapping": Entry(
        "field {field} must be an object, got {got_json}",
        "字段 {field} 必须是对象，实际为 {got_json}"),
    "data.entry_unknown_name": Entry(
        "field {field} is not a {mapping_kind} name of {fmt} formatting; valid: {valid_names}",
        "字段 {field} 不是 {fmt} 格式的{mapping_kind}名；有效值：{valid_names}",
        {"mapping_kind": "mapping_kind", "valid_names": "names"}),
    "data.entry_not_column": Entry("field {field} must name a column, got {value}", "字段 {field} 必须是列名，实际为 {value}"),
    "data.entry_ranking": Entry(
        "this is preference data, chosen/rejected pairs (ranking: true); it trains with train.objective dpo, "
        "simpo, orpo or kto, not as supervised answers. Choose another dataset",
        "这是偏好数据，chosen/rejected 偏好对（'ranking: true'）；只能用 train.objective dpo、simpo、orpo 或 kto 训练，不能作为监督回答。请选择其他数据集"),
    "data.entry_kto": Entry(
        "this is preference data, KTO data (a {column_shown} label column); it trains with train.objective dpo, "
        "simpo, orpo or kto, not as supervised answers. Choose another dataset",
        "这是偏好数据，KTO 数据（标签列 {column_shown}）；只能用 train.objective dpo、simpo、orpo 或 kto 训练，不能作为监督回答。请选择其他数据集"),
    "data.entry_column_missing": Entry(
        "field {field} names the column {column_shown}, which {files} lacks (fields: {field_names})",
        "字段 {field} 指定的列 {column_shown} 在 {files} 中不存在（字段：{field_names}）",
        {"field_names": "names"}),
    # media in a record (core.data.content): refused, `reason` saying which
    "data.media_refused": Entry(
        "{reason}; this console trains text-only models. Set data.media: drop to train on the text with the media "
        "and their <image>/<audio>/<video> placeholders removed, or use records without media",
        "{reason}；本控制台只训练纯文本模型。设置 data.media=drop 可去掉媒体及其 <image>/<audio>/<video> 占位符后训练文本，或使用不含媒体的记录",
        {"reason": "message"}),
    "data.media_part": Entry(
        "field {field} is {article} {media} part",
        "字段 {field} 是{article}{media}内容",
        {"article": "article", "media": "media"}),
    "data.media_column": Entry(
        "field {field} holds {count} {media}",
        "字段 {field} 含 {count} 个{media}",
        {"media": "media"}),
    "data.bad_part": Entry(
        'field {field} is a content part of type {part_type}; expected {{"type": "text", "text": ...}} (or an '
        "image, audio or video part)",
        '字段 {field} 是类型为 {part_type} 的内容；应为 {{"type": "text", "text": ...}}（或图像、音频、视频内容）'),
    # preference pairs and KTO answers (core.data.pairs)
    "data.pair_not_message": Entry(
        "field {field}: expected a message object, got {json_type}",
        "字段 {field}：应为消息对象，实际为{json_type}",
        {"json_type": "json_type"}),
    "data.pair_bad_role": Entry(
        "field {field}: role {role} is not system, user or assistant",
        "字段 {field}：角色 {role} 不是 'system'、'user' 或 'assistant'"),
    "data.pair_content": Entry(
        "field {field}: the content must be a string, got {json_type}",
        "字段 {field}：内容必须是字符串，实际为{json_type}",
        {"json_type": "json_type"}),
    "data.answer_missing": Entry("field {field}: the answer is missing", "字段 {field}：缺少回答"),
    "data.answer_not_last": Entry(
        "field {field}: a message list must end with the assistant's answer",
        "字段 {field}：消息列表必须以助手的回答结尾"),
    "data.not_text_or_messages": Entry(
        "field {field}: expected a string or messages, got {json_type}",
        "字段 {field}：应为字符串或消息列表，实际为{json_type}",
        {"json_type": "json_type"}),
    "data.answer_empty": Entry("field {field}: the answer is empty", "字段 {field}：回答为空"),
    "data.prompt_empty": Entry("field {field}: the prompt is empty", "字段 {field}：提示为空"),
    "data.no_prompt": Entry(
        "no prompt: expected 'prompt', 'conversations'/'messages' or 'instruction' (map other names with "
        "data.columns)",
        "没有提示：应有 'prompt'、'conversations'/'messages' 或 'instruction'（其他名称可用 data.columns 映射）"),
    "data.prompt_not_user": Entry("the prompt must end with a user turn (field {field})", "提示必须以用户轮次结尾（字段 {field}）"),
    "data.prompts_differ": Entry(
        "field {field}: the conversation before the answer differs from '{chosen_field}'s; a pair shares its prompt",
        "字段 {field}：回答之前的对话与 '{chosen_field}' 的不同；一个偏好对共用同一个提示"),
    "data.kto_label": Entry(
        "field {field}: a KTO label must be true or false, got {value} ({json_type})",
        "字段 {field}：KTO 标签必须是 true 或 false，实际为 {value}（{json_type}）",
        {"json_type": "json_type"}),
    "data.kto_conversation_end": Entry(
        "field {field}: a KTO conversation must end with a non-empty assistant answer",
        "字段 {field}：KTO 对话必须以非空的助手回答结尾"),
    "data.kto_no_answer": Entry(
        "a KTO record needs its answer: 'completion', 'output' or a conversation ending with the assistant's turn",
        "KTO 记录需要回答：'completion'、'output'，或以助手轮次结尾的对话"),
    "data.mixed_kinds": Entry(
        "this record is {record_kind} but {record_at} is {first_kind}; a file holds one kind of data (field "
        "{field})",
        "这条记录是{record_kind}，但 {record_at} 是{first_kind}；一个文件只能有一种数据（字段 {field}）",
        {"record_kind": "record_kind", "record_at": "place", "first_kind": "record_kind"}),
    "data.no_desirable": Entry(
        "{file}: no desirable answer (label true) to train on with train.objective sft",
        "{file}：没有可取的回答（'label' 为 true）可用 train.objective sft 训练"),
    # the samples, the split and the batches (core.data.pipeline)
    "data.nothing_of_the_answer": Entry(
        "the sample is {tokens} tokens; with max_seq_len={max_seq_len} nothing of the answer remains — raise "
        "data.max_seq_len or shorten the prompt",
        "该样本有 {tokens} 个 token；max_seq_len={max_seq_len} 时回答部分全被截掉——请调大 data.max_seq_len 或缩短提示"),
    "data.test_raw_text": Entry(
        "{file}: a test file needs prompts and reference answers (alpaca, sharegpt or chat format); this one is "
        "raw text",
        "{file}：测试文件需要提示和参考答案（alpaca、sharegpt 或 chat 格式）；这个文件是纯文本"),
    "data.no_validation_samples": Entry(
        "{file}: data.validation_fraction={fraction} of {records} records is 0 validation samples; raise "
        "data.validation_fraction or set data.validation_file",
        "{file}：data.validation_fraction={fraction} 在 {records} 条记录中得到 0 条验证样本；请调大 data.validation_fraction 或设置 "
        "data.validation_file"),
    "data.nothing_to_train": Entry(
        "{file}: data.validation_fraction={fraction} of {records} records leaves nothing to train on; lower it or "
        "set data.validation_file",
        "{file}：data.validation_fraction={fraction} 在 {records} 条记录中没有留下训练数据；请调小它或设置 data.validation_file"),
    "data.no_validation_data": Entry(
        "data.validation_file: no validation data; set data.validation_file or data.validation_fraction in (0, 0.5]",
        "data.validation_file：没有验证数据；请设置 data.validation_file，或把 data.validation_fraction 设在 (0, 0.5] 内"),
    "data.fewer_samples_than_a_batch": Entry(
        "train: {count} samples are fewer than one global batch of {batch} (train.micro_batch_size {micro} × "
        "train.grad_accum_steps {accum} × data parallel {world}); lower them or add data",
        "train：{count} 条样本不足一个全局批 {batch}（train.micro_batch_size {micro} × train.grad_accum_steps {accum} × 数据并行 "
        "{world}）；请调小它们或增加数据"),
    "data.fewer_rows_than_a_batch": Entry(
        "train: {count} packed rows are fewer than one global batch of {batch} (train.micro_batch_size {micro} × "
        "train.grad_accum_steps {accum} × data parallel {world}); lower them or add data",
        "train：{count} 个打包行不足一个全局批 {batch}（train.micro_batch_size {micro} × train.grad_accum_steps {accum} × 数据并行 "
        "{world}）；请调小它们或增加数据"),
    # ... what the data statistics report beside the figures (core.spec.stats: warnings, never errors)
    "stats.ignored_field": Entry(
        "{split_role}: field `{field}` ignored in {count} of {records} records",
        "{split_role}：{records} 条记录中有 {count} 条的字段 '{field}' 未被使用",
        {"split_role": "split_role"}),
    "stats.overlong_truncated": Entry(
        "{split_role}: {count} of {records} records are longer than max_seq_len {max_seq_len} tokens and were "
        "truncated (the starts of prompt and answer kept in proportion) (data.overlong: {policy}): {listed}",
        "{split_role}：{records} 条记录中有 {count} 条超过 max_seq_len {max_seq_len} 个 "
        "token，已截断（按比例保留提示和回答的开头）（data.overlong={policy}）：{listed}",
        {"split_role": "split_role", "listed": "message"}),
    "stats.overlong_skipped": Entry(
        "{split_role}: {count} of {records} records are longer than max_seq_len {max_seq_len} tokens and were "
        "skipped (data.overlong: {policy}): {listed}",
        "{split_role}：{records} 条记录中有 {count} 条超过 max_seq_len {max_seq_len} 个 "
        "token，已跳过（data.overlong={policy}）：{listed}",
        {"split_role": "split_role", "listed": "message"}),
    "stats.chunked": Entry(
        "{split_role}: {count} text records longer than max_seq_len {max_seq_len} were cut into "
        "{max_seq_len}-token chunks ({samples} samples from {records} records)",
        "{split_role}：{count} 条超过 max_seq_len {max_seq_len} 的文本记录被切成 {max_seq_len} 个 token 的块（{records} 条记录得到 "
        "{samples} 个样本）",
        {"split_role": "split_role"}),
    "stats.media_dropped": Entry(
        "{split_role}: media dropped in {count} records (data.media: drop), their <image>/<audio>/<video> "
        "placeholders removed",
        "{split_role}：已在 {count} 条记录中丢弃媒体（data.media=drop），并删除其 <image>/<audio>/<video> 占位符",
        {"split_role": "split_role"}),
    "stats.identical_pairs": Entry(
        "{split_role}: {count} pairs with identical chosen and rejected answers dropped (no preference to learn)",
        "{split_role}：丢弃了 {count} 个 chosen 与 rejected 回答相同的偏好对（没有可学习的偏好）",
        {"split_role": "split_role"}),
    "stats.pairs_as_sft": Entry(
        "{file}: preference pairs trained as SFT on the {count} chosen answers only (the rejected ones are not "
        "used); set train.objective dpo, simpo or orpo to learn the preference",
        "{file}：偏好对按 SFT 训练，只用 {count} 个 chosen 回答（不用 rejected 回答）；要学习偏好请把 train.objective 设为 dpo、simpo 或 orpo"),
    "stats.kto_as_sft": Entry(
        "{file}: KTO data trained as SFT on the {count} desirable answers only ({skipped} undesirable answers not "
        "used); set train.objective kto to learn from both",
        "{file}：KTO 数据按 SFT 训练，只用 {count} 个合意的回答（{skipped} 个不合意的回答未用）；要从两者学习请把 train.objective 设为 kto"),
    # the first over-long records named in a statistic or an error (core.spec.stats.listing): items is a list
    "stats.listed_record": Entry(
        "{record_at} ({tokens} tokens)",
        "{record_at}（{tokens} 个 token）",
        {"record_at": "place"}),
    "stats.listing": Entry("{items}", "{items}", {"items": "list"}),
    "stats.listing_more": Entry("{items}, and {more} more", "{items}，另有 {more} 条", {"items": "list"}),
    # GRPO's prompt sets (core.data.prompts) and reward functions (core.eval.rewards)
    "data.grpo_pairs": Entry(
        "field {field}: this record is a preference pair (chosen/rejected); train.objective grpo reads prompts and "
        "the columns its rewards use (a 'prompt' and an 'answer', say): choose a prompt set, or train.objective "
        "dpo, simpo or orpo for pairs",
        "字段 {field}：这条记录是偏好对（chosen/rejected）；train.objective grpo 读取提示以及奖励函数使用的列（例如 'prompt' 和 "
        "'answer'）：请选择提示集，或对偏好对使用 train.objective dpo、simpo 或 orpo"),
    "data.grpo_kto": Entry(
        "field {field}: this record is a KTO answer (a boolean label); train.objective grpo reads prompts and the "
        "columns its rewards use (a 'prompt' and an 'answer', say): choose a prompt set, or train.objective kto",
        "字段 {field}：这条记录是 KTO 回答（带布尔标签）；train.objective grpo 读取提示以及奖励函数使用的列（例如 'prompt' 和 'answer'）：请选择提示集，或使用 "
        "train.objective kto"),
    "data.grpo_text": Entry(
        "a raw-text record has no prompt (data.format text); train.objective grpo reads 'prompt', "
        "'messages'/'conversations' or alpaca 'instruction'",
        "纯文本记录没有提示（data.format text）；train.objective grpo 读取 'prompt'、'messages'/'conversations' 或 alpaca 的 "
        "'instruction'"),
    "data.grpo_no_prompt": Entry(
        "field {field}: no prompt; train.objective grpo reads 'prompt' (text or messages), "
        "'messages'/'conversations' (the turns before the answer) or alpaca 'instruction', and this record has "
        "{field_names} (map other names with data.columns)",
        "字段 {field}：没有提示；train.objective grpo 读取 'prompt'（文本或消息）、'messages'/'conversations'（回答之前的轮次）或 alpaca 的 "
        "'instruction'，而这条记录只有 {field_names}（其他名称可用 data.columns 映射）",
        {"field_names": "names"}),
    "data.grpo_preference_entry": Entry(
        "this is preference data (chosen/rejected pairs or a KTO label); train.objective grpo reads prompts. "
        "Choose another dataset",
        "这是偏好数据（chosen/rejected 对或 KTO 标签）；train.objective grpo 读取提示。请选择其他数据集"),
    "data.prompts_overlong": Entry(
        "{count} prompts are longer than grpo.max_prompt_len {max_prompt_len} tokens (data.overlong: error): "
        "{listed}; raise grpo.max_prompt_len, or set data.overlong to truncate (cut from the left) or skip",
        "{count} 条提示超过 grpo.max_prompt_len {max_prompt_len} 个 token（data.overlong: error）：{listed}；请调大 "
        "grpo.max_prompt_len，或把 data.overlong 设为 'truncate'（从左侧截断）或 'skip'",
        {"listed": "message"}),
    "data.no_prompts_left": Entry(
        "{file}: no prompt is left: every one is longer than grpo.max_prompt_len {max_prompt_len} tokens and "
        "data.overlong is skip",
        "{file}：没有剩下任何提示：每条都超过 grpo.max_prompt_len {max_prompt_len} 个 token，且 data.overlong 为 'skip'"),
    "stats.prompts_cut": Entry(
        "{split_role}: {count} of {records} prompts are longer than grpo.max_prompt_len {max_prompt_len} tokens "
        "and were cut from the left, their ends kept (data.overlong: {policy}): {listed}",
        "{split_role}：{records} 条提示中有 {count} 条超过 grpo.max_prompt_len {max_prompt_len} 个 "
        "token，已从左侧截断，保留结尾（data.overlong: {policy}）：{listed}",
        {"split_role": "split_role", "listed": "message"}),
    "stats.prompts_skipped": Entry(
        "{split_role}: {count} of {records} prompts are longer than grpo.max_prompt_len {max_prompt_len} tokens "
        "and were skipped (data.overlong: {policy}): {listed}",
        "{split_role}：{records} 条提示中有 {count} 条超过 grpo.max_prompt_len {max_prompt_len} 个 token，已跳过（data.overlong: "
        "{policy}）：{listed}",
        {"split_role": "split_role", "listed": "message"}),
    "stats.column_in_some": Entry(
        "{split_role}: column {column} has a value in only {count} of {records} records; a reward that reads it "
        "stops the run at the others",
        "{split_role}：列 {column} 只在 {records} 条记录中的 {count} 条里有值；读取它的奖励函数会在其余记录处中止训练",
        {"split_role": "split_role"}),
    "stats.answer_from": Entry(
        "{split_role}: the 'answer' column of {count} of {records} records is their {field}",
        "{split_role}：{records} 条记录中有 {count} 条的 'answer' 列取自其 {field}",
        {"split_role": "split_role"}),
    "stats.final_turn_dropped": Entry(
        "{split_role}: {count} of {records} conversations end with an assistant turn and have an 'answer' column "
        "of their own: that turn was left out of the prompt",
        "{split_role}：{records} 段对话中有 {count} 段以助手轮次结尾且自带 'answer' 列：该轮次未放入提示",
        {"split_role": "split_role"}),
    "stats.pairs_overlong_truncated": Entry(
        "{split_role}: {count} of {records} records are longer than max_seq_len {max_seq_len} tokens and were "
        "truncated (the end of the prompt kept, the answers cut to what is left) (data.overlong: {policy}): "
        "{listed}",
        "{split_role}：{records} 条记录中有 {count} 条超过 max_seq_len {max_seq_len} 个 "
        "token，已截断（保留提示的末尾，回答截到剩余长度）（data.overlong={policy}）：{listed}",
        {"split_role": "split_role", "listed": "message"}),
    "data.problems": Entry(
        "{count} problems in {file}: {listed}",
        "{file} 中有 {count} 个问题：{listed}",
        {"listed": "message"}),
}
