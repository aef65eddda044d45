"""The console's texts: the Train tab's data: picking, uploading, previewing.

Each key has its English and its 中文 side by side, in the class of core's messages
(core.spec.catalogue.entry.Entry)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

TEXTS: dict[str, Entry] = {
    "data.picker": Entry("Dataset", "数据集"),
    "data.upload": Entry(
        "Upload a data file (JSONL, JSON, CSV, Parquet, Arrow, TXT, .gz) or a zipped dataset folder",
        "上传数据文件（JSONL、JSON、CSV、Parquet、Arrow、TXT、.gz）或压缩的数据集目录"),
    "data.preview": Entry("Preview: the first samples through the chat template", "预览：经过对话模板渲染的前几条样本"),
    "data.histogram": Entry("Token lengths of the training samples", "训练样本的 token 长度分布"),
    "data.stats": Entry("Data statistics", "数据统计"),
    # The dataset's preview, histogram and statistics (app.data.data_preview, app.tabs.data_callbacks).
    "dp.legend_masked": Entry("prompt, system and tool turns (masked, no loss)", "提示、系统和工具轮次（屏蔽，不计损失）"),
    "dp.legend_trained": Entry("assistant turns (trained)", "助手轮次（参与训练）"),
    "dp.cut": Entry("… {n} tokens cut by max_seq_len", "… {n} 个 token 被 max_seq_len 截掉"),
    "dp.mapped": Entry("mapped by data.columns", "由 data.columns 映射"),
    "dp.absent": Entry("absent", "缺失"),
    "dp.fields": Entry("fields in the data:", "数据中的字段："),
    "dp.ignored": Entry(
        "field {name} ignored in {count} of {total} records",
        "字段 {name} 在 {total} 条记录中有 {count} 条被忽略"),
    "dp.ignored_head": Entry(
        "⚠ format {fmt} does not read these fields (map its own fields to them with data.columns, or pick another "
        "format):",
        "⚠ 格式 {fmt} 不读取这些字段（用 data.columns 映射，或换一种格式）："),
    "dp.format": Entry(
        "format: {fmt} ({how}){split} · first {n} of {total} records · trained: {trained}",
        "格式：{fmt}（{how}）{split} · 共 {total} 条记录中的前 {n} 条 · 训练：{trained}"),
    "dp.auto": Entry("auto-detected", "自动识别"),
    "dp.as_set": Entry("as set", "按设置"),
    "dp.split": Entry(" · split {split}", " · 划分 {split}"),
    "dp.every_token": Entry("every token", "全部 token"),
    "dp.text_trained": Entry(
        "every token of the raw text ({split}; documents over max_seq_len cut into {max}-token chunks)",
        "原始文本的全部 token（{split}；超过 max_seq_len 的文档切成 {max} token 的块）"),
    "dp.split.line": Entry("one record per line", "每行一条记录"),
    "dp.split.paragraph": Entry("one record per blank-line paragraph", "每个空行分隔的段落一条记录"),
    "dp.split.document": Entry("one record per file", "每个文件一条记录"),
    "dp.skipped_sample": Entry(
        "{where} · {full} tokens: skipped (over max_seq_len; data.overlong: skip)",
        "{where} · {full} 个 token：已跳过（超过 max_seq_len；data.overlong: skip）"),
    "dp.truncated_sample": Entry(
        "{where} · {full} tokens, cut to {kept} ({trained} trained; data.overlong: truncate)",
        "{where} · {full} 个 token，截断为 {kept}（{trained} 个参与训练；data.overlong: truncate）"),
    "data.files_label": Entry("{name} ({parts})", "{name}（{parts}）"),
    "data.part.train": Entry("train", "训练"),
    "data.part.validation": Entry("validation", "验证"),
    "data.part.test": Entry("test", "测试"),
    "data.catalog_entry": Entry("{name} ({formatting}, {size})", "{name}（{formatting}，{size}）"),
    "data.catalog_samples": Entry("{n} samples", "抽样 {n} 条"),
    "data.catalog_broken": Entry("{name} (not loadable: {reason})", "{name}（无法加载：{reason}）"),
    "dp.all_assistant": Entry("all assistant", "全部助手轮次"),
    "dp.last": Entry("last", "最后一轮助手"),
    "dp.sample": Entry("{where} · {full} tokens, {trained} trained", "{where} · {full} 个 token，{trained} 个参与训练"),
    "dp.axis": Entry("tokens per sample", "每条样本的 token 数"),
    "dp.no_model": Entry(
        "pick a loadable base model to preview the data with its tokenizer",
        "请选择可加载的基座模型，以用它的分词器预览数据"),
    "dp.stats_unavailable": Entry("statistics unavailable: {err}", "无法统计：{err}"),
    "dp.st_train": Entry(
        "- **train**: {n} samples ({fmt}), {tokens} trained tokens, length {lo}–{hi} (mean {mean})",
        "- **训练集**：{n} 条样本（{fmt}），{tokens} 个参与训练的 token，长度 {lo}–{hi}（平均 {mean}）"),
    "dp.st_validation": Entry(
        "- **validation** ({source}): {n} samples, length {lo}–{hi}",
        "- **验证集**（{source}）：{n} 条样本，长度 {lo}–{hi}"),
    "dp.source.file": Entry("file", "文件"),
    "dp.source.fraction": Entry("fraction", "从训练集按比例划分"),
    "dp.st_truncated": Entry(
        "- **truncated** at max_seq_len {max}: {train} train ({share}), {validation} validation",
        "- **截断**（max_seq_len {max}）：训练集 {train} 条（{share}），验证集 {validation} 条"),
    "dp.st_padding": Entry(
        "- **padding efficiency** (real / padded tokens): {one} one sample per row (rows of {seq}), {packed} with "
        "data.packing (rows of {packed_seq})",
        "- **填充效率**（真实 / 补齐后 token）：每行一条样本 {one}（行长 {seq}），data.packing 打包后 {packed}（行长 {packed_seq}）"),
    "dp.st_gain": Entry(": {gain}× the real tokens per padded token", "：每个补齐 token 中的真实 token 为 {gain} 倍"),
    "dp.st_overlap": Entry(
        "- **overlap**: {overlap} of {n} validation samples also occur in train",
        "- **重叠**：{n} 条验证样本中有 {overlap} 条也出现在训练集中"),
    "dp.st_overlap_warn": Entry(" ⚠ validation loss will look better than it is", " ⚠ 验证损失会显得比实际更好"),
    "dp.st_test": Entry("- **test**: {n} records for exact-match scoring", "- **测试集**：{n} 条记录用于精确匹配评分"),
    # preference objectives (train.objective dpo/simpo/orpo/kto): app.data.data_preview.preference_stats_markdown
    "dp.pst_pairs": Entry(
        "- **{split}**: {n} pairs; chosen {c_mean} tokens on average (longest {c_max}), rejected {r_mean} (longest "
        "{r_max}), prompt included",
        "- **{split}**：{n} 对；chosen 平均 {c_mean} 个 token（最长 {c_max}），rejected 平均 {r_mean}（最长 {r_max}），含提示"),
    "dp.pst_kto": Entry(
        "- **{split}**: {n} KTO answers: {good} desirable ({c_mean} tokens on average, longest {c_max}), {bad} "
        "undesirable ({r_mean}, longest {r_max}), prompt included",
        "- **{split}**：{n} 条 KTO 回答：{good} 条可取（平均 {c_mean} 个 token，最长 {c_max}），{bad} 条不可取（平均 {r_mean}，最长 "
        "{r_max}），含提示"),
    "dp.pst_split.train": Entry("train", "训练集"),
    "dp.pst_split.validation": Entry("validation", "验证集"),
    "dp.pst_dropped": Entry(
        "- **identical pairs dropped** (no preference to learn): {train} train, {validation} validation",
        "- **丢弃的相同对**（无偏好可学）：训练集 {train} 对，验证集 {validation} 对"),
    "dp.pst_truncated": Entry(
        "- **over max_seq_len {max}** (data.overlong: {policy}): {train} train, {validation} validation",
        "- **超过 max_seq_len {max} 的记录**（data.overlong={policy}）：训练集 {train} 条，验证集 {validation} 条"),
    "dp.pst_rows": Entry(
        "- **rows**: {rows} per pair, {seq} tokens each ({objective}: train.micro_batch_size counts pairs)",
        "- **行**：每对 {rows} 行，每行 {seq} 个 token（{objective}：train.micro_batch_size 按对计）"),
    "dp.pst_rows_kto": Entry("- **rows**: one per answer, {seq} tokens each", "- **行**：每条回答一行，每行 {seq} 个 token"),
    "dp.saved": Entry("saved as `{file}`; {found}", "已保存为 `{file}`；{found}"),
    "dp.detected": Entry("format **{fmt}** (detected)", "格式 **{fmt}**（自动识别）"),
    "dp.pairs": Entry(
        "Preference pairs: the first {n} of {total}, chosen and rejected answers side by side (prompt masked, each "
        "answer trained); identical pairs among them: {identical} (dropped)",
        "偏好对：共 {total} 条中的前 {n} 条，chosen 与 rejected 回答并排显示（提示被屏蔽，各自训练回答）；其中完全相同的对：{identical}（丢弃）"),
    "dp.kto": Entry(
        "KTO answers: the first {n} of {total}, each with its label (prompt masked, answer trained)",
        "KTO 回答：共 {total} 条中的前 {n} 条，各自带标签（提示被屏蔽，训练回答）"),
    "dp.chosen": Entry("chosen", "chosen（选中）"),
    "dp.rejected": Entry("rejected", "rejected（拒绝）"),
    "dp.desirable": Entry("desirable (label true)", "可取（label 为 true）"),
    "dp.undesirable": Entry("undesirable (label false)", "不可取（label 为 false）"),
    "upload.unsupported": Entry(
        "{file}: unsupported file type {ext}; upload one of {accepted} (a .zip of a dataset folder)",
        "{file}：不支持的文件类型 {ext}；请上传 {accepted} 之一（或数据集目录的 .zip）"),
    "upload.no_extension": Entry("(none)", "（无）"),
    "upload.too_big": Entry(
        "{file}: {mb} MB is over the upload limit of {limit} MB (start the console with --max-upload-mb to change "
        "it)",
        "{file}：{mb} MB 超过上传上限 {limit} MB（启动控制台时用 --max-upload-mb 修改）"),
    "upload.not_zip": Entry("{file}: not a readable zip archive ({zip_says})", "{file}：不是可读取的 zip 压缩包（{zip_says}）"),
    "upload.too_many_files": Entry("{file}: {n} files; at most {limit}", "{file}：有 {n} 个文件；最多 {limit} 个"),
    "upload.unpacks_too_big": Entry(
        "{file}: unpacks to {mb} MB, over the upload limit of {limit} MB",
        "{file}：解压后 {mb} MB，超过上传上限 {limit} MB"),
    "upload.refused_member": Entry(
        "{file}: refused member {member} (absolute path, '..' or a link)",
        "{file}：拒绝成员 {member}（绝对路径、'..' 或链接）"),
    # Python's zipfile's own reason
    "upload.zip.not_zip": Entry("File is not a zip file", "文件不是 zip 格式"),
    "upload.no_dataset": Entry(
        "{file}: no dataset inside (expected train.<ext> files, a save_to_disk folder or Parquet shards)",
        "{file}：其中没有数据集（应为 train.<ext> 文件、save_to_disk 目录或 Parquet 分片）"),
    "dp.detected_pairs": Entry(
        "**preference pairs** (chosen/rejected): {n} records, shown side by side in the preview",
        "**偏好对**（chosen/rejected）：{n} 条记录，预览中并排显示"),
    "dp.detected_kto": Entry(
        "**KTO answers** (a boolean label): {n} records, shown with their labels in the preview",
        "**KTO 回答**（布尔 label）：{n} 条记录，预览中显示各自的标签"),
    "dp.pst_pairs_one": Entry(
        "- **{split}**: 1 pair; chosen {c_mean} tokens (longest {c_max}), rejected {r_mean} (longest {r_max}), "
        "prompt included",
        "- **{split}**：1 对；chosen {c_mean} 个 token（最长 {c_max}），rejected {r_mean}（最长 {r_max}），含提示"),
    "dp.pst_kto_one": Entry(
        "- **{split}**: 1 KTO answer: {good} desirable ({c_mean} tokens, longest {c_max}), {bad} undesirable "
        "({r_mean}, longest {r_max}), prompt included",
        "- **{split}**：1 条 KTO 回答：{good} 条可取（{c_mean} 个 token，最长 {c_max}），{bad} 条不可取（{r_mean}，最长 {r_max}），含提示"),
    # the data preview's hover texts (app.data.sample_html, the length histogram's bars)
    "dp.run_trained": Entry("{n} tokens, trained", "{n} 个 token，参与训练"),
    "dp.run_masked": Entry("{n} tokens, masked (no loss)", "{n} 个 token，已屏蔽（不计损失）"),
    "dp.bin": Entry("{lo}–{hi} tokens: {count}", "{lo}–{hi} 个 token：{count} 条"),
    # the data preview of a grpo run's prompts (app.data.data_preview)
    "dp.prompts": Entry(
        "GRPO prompts: the first {n} of {total} records as the rollouts get them (the chat template and the "
        "generation prompt; at most grpo.max_prompt_len {max} tokens)",
        "GRPO 提示词：{total} 条记录中的前 {n} 条，按采样时的样子显示（聊天模板加生成提示；最多 grpo.max_prompt_len {max} 个 token）"),
    "dp.prompt_about": Entry(
        "{tokens} prompt tokens ({cut} cut from the left)",
        "提示词 {tokens} 个 token（从左侧截去 {cut} 个）"),
    "dp.prompt_skipped": Entry(
        "over grpo.max_prompt_len: skipped (data.overlong skip)",
        "超过 grpo.max_prompt_len：已跳过（data.overlong skip）"),
    "dp.prompt_columns": Entry("the columns the reward functions get:", "奖励函数得到的列："),
    "dp.prompt_split": Entry(
        "- **{split}**: {n} prompts of {records} records; {lo}–{hi} tokens, {mean} on average; {cut} cut, "
        "{skipped} skipped",
        "- **{split}**：{records} 条记录中的 {n} 条提示词；{lo}–{hi} 个 token，平均 {mean}；截断 {cut} 条，跳过 {skipped} 条"),
    "dp.prompt_reward_columns": Entry(
        "- **columns every record hands the rewards**: {columns}",
        "- **每条记录都交给奖励函数的列**：{columns}"),
}
