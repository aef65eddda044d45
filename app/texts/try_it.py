"""The console's texts: the Try tab.

Each key has its English and its 中文 side by side, in the class of core's messages
(core.spec.catalogue.entry.Entry)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

TEXTS: dict[str, Entry] = {
    # try tab
    "try.base": Entry("Base model", "基座模型"),
    "try.checkpoint": Entry("Fine-tuned checkpoint", "微调检查点"),
    "try.checkpoint_choice": Entry("{run} · {which} ({state})", "{run} · {which}（{state}）"),
    "try.pointer.best": Entry("best", "最佳"),
    "try.pointer.last": Entry("last", "最新"),
    "try.prompt": Entry("Prompt", "提示词"),
    "try.chat": Entry("Use the chat template", "使用对话模板"),
    "try.max_new_tokens": Entry("Max new tokens", "最多生成 token 数"),
    "try.generate": Entry("Generate both", "同时生成"),
    "try.base_out": Entry("Base model says", "基座模型输出"),
    "try.tuned_out": Entry("Fine-tuned says", "微调模型输出"),
    # the Try tab's own answers (app.tabs.try_callbacks)
    "try.no_prompt": Entry("type a prompt first", "请先输入提示词"),
    "try.no_base": Entry("pick a loadable base model", "请选择可加载的基座模型"),
    "try.no_checkpoint": Entry(
        "pick a fine-tuned checkpoint (runs appear here once they saved one)",
        "请选择微调检查点（运行保存检查点后会出现在这里）"),
    "try.no_such_checkpoint": Entry("{checkpoint}: no such checkpoint folder", "{checkpoint}：没有这个检查点目录"),
    "try.exited": Entry("core.generate exited with {code}", "core.generate 退出码为 {code}"),
    "try.tokens_in": Entry("[{tokens} tokens in {seconds} s]", "[{tokens} 个 token，用时 {seconds} 秒]"),
}
