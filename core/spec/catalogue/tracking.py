"""Core's messages: the experiment trackers (TensorBoard, MLflow, SwanLab, ...).

Each id has its English and its 中文 side by side, and the kind of each parameter that is
not plain text (core.spec.catalogue.entry.KINDS)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

MESSAGES: dict[str, Entry] = {
    # experiment trackers (core.run.tracking): one that cannot start or stops working; the run goes on
    "tracking.server_silent": Entry(
        "mlflow.tracking_uri = {uri} does not answer ({os_error}); start the MLflow server, or set "
        "mlflow.tracking_uri (or MLFLOW_TRACKING_URI) to one that runs",
        "mlflow.tracking_uri = {uri} 没有应答（{os_error}）；请启动 MLflow 服务器，或把 mlflow.tracking_uri（或 "
        "MLFLOW_TRACKING_URI）设为正在运行的服务器",
        {"os_error": "os_error"}),
    "tracking.mlflow_failed": Entry("mlflow at {uri}: {error}", "mlflow（{uri}）：{error}"),
    "tracking.swanlab_failed": Entry(
        "swanlab (swanlab.mode = {mode}): {error}",
        "swanlab（swanlab.mode = {mode}）：{error}"),
    "tracking.stopped_working": Entry("{tracker} stopped working ({error})", "{tracker} 停止工作（{error}）"),
    "tracking.goes_on": Entry(
        "{reason}; training goes on without {tracker} (the run folder has every figure)",
        "{reason}；训练继续，但不再使用 {tracker}（运行目录中有全部数据）",
        {"reason": "message"}),
    "tracking.mirroring": Entry("tracking: mirroring the metrics to {tracker_names}", "实验跟踪：指标同步到 {tracker_names}"),
}
