"""The console's texts: the Train tab's model folders.

Each key has its English and its 中文 side by side, in the class of core's messages
(core.spec.catalogue.entry.Entry)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

TEXTS: dict[str, Entry] = {
    "model.table": Entry("Model folders found", "找到的模型目录"),
    "model.refresh": Entry("Rescan folders", "重新扫描"),
    # model folders table (app.data.catalog.ROW_HEADERS)
    "model.col.folder": Entry("folder", "目录"),
    "model.col.architecture": Entry("architecture", "架构"),
    "model.col.parameters": Entry("parameters", "参数量"),
    "model.col.stored dtype": Entry("stored dtype", "存储精度"),
    "model.col.context": Entry("context", "上下文长度"),
    "model.col.vocab": Entry("vocab", "词表大小"),
    "model.col.status": Entry("status", "状态"),
    "model.label": Entry(
        "{name} · {arch} · {params} params · {dtype} · ctx {ctx}",
        "{name} · {arch} · 参数 {params} · {dtype} · 上下文 {ctx}"),
    "model.not_loadable": Entry("⚠ {name}: not loadable", "⚠ {name}：无法加载"),
    "model.ok": Entry("ok", "可用"),
    "model.active": Entry("{active} active of {total}", "激活 {active} / 共 {total}"),
}
