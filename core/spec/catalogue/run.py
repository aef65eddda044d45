"""Core's messages: why a run ended, its folder's files, the checks before a launch, msrun's commands.

Each id has its English and its 中文 side by side, and the kind of each parameter that is
not plain text (core.spec.catalogue.entry.KINDS)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

MESSAGES: dict[str, Entry] = {
    # why a run ended: the worker's own account (core.train)
    "run.reached_steps": Entry("reached {steps} steps", "已达到 {steps} 步"),
    "run.no_improvement": Entry(
        "{monitor} did not improve by {min_delta} for {patience} evaluations (best {best} at step {step})",
        "{monitor} 连续 {patience} 次评估未改进 {min_delta} 以上（最佳 {best}，第 {step} 步）"),
    "run.stopped_by_user": Entry("stopped by the user", "用户停止"),
    "run.stopped_forced": Entry("stopped by the user (forced)", "用户强制停止"),
    # ... the console's or a rank supervisor's, when the worker could not say it (core.run.launcher, ranks)
    "run.cancelled": Entry("cancelled before it started", "启动前已取消"),
    "run.stop_timed_out": Entry(
        "stopped by the user: the graceful stop timed out after {seconds} s and the worker was terminated",
        "用户停止：正常停止 {seconds} 秒后超时，已强制结束 worker"),
    "run.stopped_before_status": Entry(
        "stopped by the user (the worker ended before writing its status)",
        "用户停止（worker 在写下状态前已结束）"),
    "run.with_note": Entry("{reason}; {note}", "{reason}；{note}", {"reason": "message", "note": "message"}),
    "run.resumable": Entry("newest resumable checkpoint: {checkpoint}", "最新可恢复的检查点：{checkpoint}"),
    "run.no_resumable": Entry("no checkpoint to resume from", "没有可恢复的检查点"),
    # ... or why it failed, when the worker could not say it (core.run.ranks, launcher)
    "run.crash": Entry(
        "worker exited without a final status (crashed or killed); see train.log",
        "worker 没有写下最终状态就退出了（崩溃或被杀）；请查看 train.log"),
    "run.crash_lines": Entry(
        "{reason}; last error lines:\n{lines}",
        "{reason}；最后的错误行：\n{lines}",
        {"reason": "message", "lines": "lines"}),
    "rank.rank": Entry("rank {rank}", "rank {rank}"),
    "rank.worker": Entry("the worker", "worker"),
    "rank.on_node": Entry("{who} on node {node}", "节点 {node} 上的 {who}", {"who": "message"}),
    "rank.oom_killed": Entry(
        "out of memory: {who} was killed by {signal}, by the kernel's out-of-memory killer ({evidence}). {advice}",
        "内存不足：{who} 被 {signal} 杀死，由内核的 OOM 终止机制执行（{evidence}）。{advice}",
        {"who": "message", "advice": "message"}),
    "rank.killed": Entry("{who} was killed by {signal}", "{who} 被 {signal} 杀死", {"who": "message"}),
    "rank.killed_no_oom": Entry(
        "{who} was killed by {signal} (no sign of the out-of-memory killer)",
        "{who} 被 {signal} 杀死（没有内核 OOM 终止机制的迹象）",
        {"who": "message"}),
    "rank.exited": Entry(
        "{who} exited with code {code} without a final status",
        "{who} 以退出码 {code} 退出，没有写下最终状态",
        {"who": "message"}),
    "rank.gone": Entry(
        "{who} is gone and left no exit status (its supervisor was killed too)",
        "{who} 已不存在，也没有留下退出状态（它的监护进程也被杀了）",
        {"who": "message"}),
    "rank.hung": Entry(
        "{who} stopped making progress: no step for {age} s (parallel.hang_timeout_s = {timeout}); its last step "
        "was {step} ({phase}), process state: {state}. The run was ended so it does not wait forever",
        "{who} 停止了进展：{age} 秒没有完成一步（parallel.hang_timeout_s = {timeout}）；最后一步是 "
        "{step}（{phase}），进程状态：{state}。已结束运行，以免一直等待",
        {"who": "message"}),
    "rank.stopped_by_slurm": Entry(
        "{who} was stopped by {signal} from Slurm (job {job_id})",
        "{who} 被 Slurm 的 {signal} 停止（作业 {job_id}）",
        {"who": "message"}),
    # core.run's checks before a launch: Slurm's shared folder, a tracker's package, this machine's cores, held devices
    "run.check.shared_needed": Entry(
        "a Slurm run needs its run folder on storage every node sees: start the console with {option} <a folder on "
        "shared storage> and a runs folder (--runs-dir) inside it",
        "Slurm 运行的运行目录必须位于每个节点都能访问的存储上：用 {option} <共享存储上的文件夹> 启动控制台，并把运行目录（--runs-dir）放在其中"),
    "run.check.shared_missing": Entry("{option} {folder}: no such folder", "{option} {folder}：没有这个文件夹"),
    "run.check.shared_outside": Entry(
        "the runs folder {runs} is not inside {option} {shared}: the cluster's nodes would not see the run's "
        "files; use a runs folder (--runs-dir) inside {shared}",
        "运行目录 {runs} 不在 {option} {shared} 之内：集群节点看不到运行的文件；请使用位于 {shared} 之内的运行目录（--runs-dir）"),
    "run.check.tracker_missing": Entry(
        "tracking: {tracker} needs the {package} package, which is not installed (pip install -r "
        "requirements-tracking.txt), or take {tracker} out of tracking",
        "tracking：{tracker} 需要 {package} 包，但尚未安装（用 'pip install -r requirements-tracking.txt' 安装），或从 'tracking' "
        "中去掉 {tracker}"),
    "run.check.cores": Entry(
        "this machine has {cores} CPU cores, so at most {cores} CPU workers can run (one process each); set "
        "parallel.data_parallel to {cores} or fewer",
        "本机有 {cores} 个 CPU 核，最多可运行 {cores} 个 CPU worker（每个一个进程）；请把 parallel.data_parallel 设为 {cores} 或更少"),
    "run.check.devices_held": Entry(
        "every {device} device ({ids}) is held by a run ({held}); check memory when one is free",
        "所有 parallel.device={device} 设备（{ids}）都被运行占用（{held}）；请在有空闲设备时再检查内存",
        {"held": "data_kind"}),
    # advice that ends a reason
    "advice.oom": Entry(
        "To fit in memory, lower train.micro_batch_size (and raise train.grad_accum_steps to keep the global "
        "batch) or data.max_seq_len, turn on recompute (recompute.policy), or train LoRA (method=lora) instead of "
        "a full fine-tune.",
        "要放进内存：调小 train.micro_batch_size（并调大 train.grad_accum_steps 以保持全局批量）或 "
        "data.max_seq_len，打开重计算（recompute.policy），或改用 LoRA（method=lora）代替全量微调。"),
    # ... with several ranks (core.train._fail, core.run.ranks): which rank, and a peer's trouble it follows
    "rank.said": Entry("rank {rank}: {reason}", "rank {rank}：{reason}", {"reason": "message"}),
    "rank.then_failed": Entry(
        "{note}; then rank {rank} failed: {reason}",
        "{note}；随后 rank {rank} 失败：{reason}",
        {"note": "message", "reason": "message"}),
    "rank.peer_exited": Entry("{who} exited with code {code}", "{who} 以退出码 {code} 退出", {"who": "message"}),
    "rank.peer_stopped": Entry(
        "{who} stopped making progress (process state: {state})",
        "{who} 停止了进展（进程状态：{state}）",
        {"who": "message"}),
    "rank.peer_behind": Entry(
        "{who} stopped making progress (its last step, {step}, was {age} s before rank {rank}'s)",
        "{who} 停止了进展（它的最后一步 {step} 比 rank {rank} 的早 {age} 秒）",
        {"who": "message"}),
    "rank.device_oom": Entry("out of {device} memory: {error}", "{device} 显存不足：{error}"),
    "rank.device_oom_figures": Entry(
        "out of {device} memory: {error} ({figures})",
        "{device} 显存不足：{error}（{figures}）"),
    "rank.resumable_unknown": Entry(
        "the newest resumable checkpoint could not be determined ({error})",
        "无法确定最新的可恢复检查点（{error}）"),
    # a run folder (core.run.rundir); `what` names its file
    "rundir.no_folder": Entry("{folder}: run directory does not exist", "{folder}：运行目录不存在"),
    "rundir.no_file": Entry("{file}: no {what} file", "{file}：没有{what}文件", {"what": "message"}),
    "rundir.unreadable": Entry(
        "{file}: cannot read {what} ({os_says})",
        "{file}：无法读取{what}（{os_says}）",
        {"what": "message", "os_says": "os_reason"}),
    "rundir.invalid_json": Entry(
        "{file}: {what} is not valid JSON ({json_says})",
        "{file}：{what}不是有效的 JSON（{json_says}）",
        {"what": "message", "json_says": "quoted"}),
    "rundir.not_object": Entry(
        "{file}: {what} must be a JSON object, not {py_type}",
        "{file}：{what}必须是 JSON 对象，而不是 {py_type}",
        {"what": "message", "py_type": "py_type"}),
    "rundir.what.status": Entry("status", "状态"),
    "rundir.what.control": Entry("control", "控制"),
    "rundir.what.profile": Entry("profile summary", "性能分析摘要"),
    "rundir.bad_run_id": Entry(
        "run id {run} may only use letters, digits, '.', '_' and '-'",
        "运行 ID {run} 只能使用字母、数字、'.'、'_' 和 '-'"),
    "rundir.exists": Entry(
        "{folder}: already exists and is not an empty folder; choose another run id",
        "{folder}：已存在且不是空目录；请换一个运行 ID"),
    "rundir.not_over": Entry(
        "{file}: only a run that is over can be resumed (state is {state}); stop it first",
        "{file}：只有已结束的运行可以恢复（当前状态为 {state}）；请先停止它"),
    "rundir.unusable_path": Entry("{path}: not a usable path ({error})", "{path}：不是可用的路径（{error}）"),
    "rundir.outside": Entry(
        "{path}: resolves to {real}, outside {root}; only paths inside that folder are allowed",
        "{path}：解析为 {real}，在 {root} 之外；只允许该目录之内的路径"),
    # starting a run's worker (core.run.launcher)
    "run.launch.not_queued": Entry(
        "run {run} is {state}; only a queued run can start (to continue a run that is over, resume it)",
        "运行 {run} 的状态为 {state}；只有排队中的运行可以启动（要继续已结束的运行，请恢复它）"),
    "run.launch.not_executable": Entry("{program}: not found or not executable", "{program}：找不到或不可执行"),
    "run.launch.msrun_missing": Entry(
        "{program}: not found or not executable (msrun comes with mindspore)",
        "{program}：找不到或不可执行（msrun 随 mindspore 一起安装）"),
    "run.launch.could_not_start": Entry("could not start {command}: {error}", "无法启动 {command}：{error}"),
    "run.launch.worker_not_started": Entry("could not start the worker: {error}", "无法启动 worker：{error}"),
    "run.launch.survived_kill": Entry(
        "run {run}: processes {pids} survived SIGKILL",
        "运行 {run}：进程 {pids} 在 SIGKILL 之后仍然存在"),
    # the msrun commands for several machines (core.run.launcher.multi_host_commands)
    "launch.workers_nodes": Entry(
        "workers per node ({per_node}) and nodes ({node_count}) must be >= 1",
        "每节点 worker 数（{per_node}）和节点数（{node_count}）都必须 >= 1"),
    "launch.master_port": Entry(
        "master port {port}: must be in 1024..65535 (msrun's range)",
        "主节点端口 {port}：必须在 1024..65535 之内（msrun 的范围）"),
}
