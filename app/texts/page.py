"""The console's texts: the page: title, language, tabs.

Each key has its English and its 中文 side by side, in the class of core's messages
(core.spec.catalogue.entry.Entry)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

TEXTS: dict[str, Entry] = {
    # page
    "app.title": Entry("## mindtune — fine-tune LLMs on MindSpore", "## mindtune — 基于 MindSpore 的大模型微调"),
    "app.subtitle": Entry(
        "Pick a base model and a dataset, press **Start**, watch the curves, download the adapter.",
        "选择基座模型和数据集，点击**开始训练**，观察曲线，下载适配器。"),
    "lang": Entry("Language", "语言"),
    "tab.train": Entry("Train", "训练"),
    "tab.monitor": Entry("Monitor", "监控"),
    "tab.runs": Entry("Runs", "运行记录"),
    "tab.try": Entry("Try it", "试用"),
    "lang.toggle": Entry("Language · 语言", "语言 · Language"),
}
