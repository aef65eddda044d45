"""Core's messages: Slurm's refusals and the jobs it ended (core.run.slurm).

Each id has its English and its 中文 side by side, and the kind of each parameter that is
not plain text (core.spec.catalogue.entry.KINDS)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

MESSAGES: dict[str, Entry] = {
    # ... Slurm's, for a job it ended (core.run.slurm)
    "slurm.cancelled_pending": Entry(
        "{reason}: {job} was cancelled while pending (scancel)",
        "{reason}：{job} 在排队时被取消（scancel）",
        {"reason": "message", "job": "message"}),
    "slurm.cancelled_outside": Entry(
        "{job} was cancelled outside the console (scancel); the run did not crash",
        "{job} 在控制台之外被取消（scancel）；运行并未崩溃",
        {"job": "message"}),
    "slurm.preempted": Entry(
        "{job} was preempted by Slurm (a higher-priority job took its nodes)",
        "{job} 被 Slurm 抢占（更高优先级的作业占用了它的节点）",
        {"job": "message"}),
    "slurm.timeout": Entry(
        "{job} reached its time limit and Slurm ended it (launch.time_limit)",
        "{job} 达到时间限制，被 Slurm 结束（launch.time_limit）",
        {"job": "message"}),
    "slurm.node_fail": Entry(
        "{job}: a node failed (NODE_FAIL) and Slurm ended the job",
        "{job}：节点故障（NODE_FAIL），Slurm 结束了作业",
        {"job": "message"}),
    "slurm.out_of_memory": Entry(
        "out of memory: Slurm ended {job} (OUT_OF_MEMORY). {advice}",
        "内存不足：Slurm 结束了 {job}（OUT_OF_MEMORY）。{advice}",
        {"job": "message", "advice": "message"}),
    "slurm.ended": Entry(
        "{job} ended ({state}, exit code {code}) without the run's final status; see slurm.out and logs/",
        "{job} 已结束（{state}，退出码 {code}），但运行没有写下最终状态；请查看 slurm.out 和 logs/",
        {"job": "message"}),
    "slurm.job": Entry("Slurm job {id}", "Slurm 作业 {id}"),
    "slurm.job_on": Entry("Slurm job {id} on {nodes}", "Slurm 作业 {id}（节点 {nodes}）"),
    # `slurm_says` is a Slurm client's own words (sbatch's, scontrol's, sinfo's stderr), `error` a library's
    # ("ConnectionError: ..."), `os_error` the OS's reason, `codec_says` Python's UTF-8 decoder's
    # talking to Slurm (core.run.slurm)
    "slurm.not_installed": Entry(
        "{program}: not found (Slurm's client commands are not installed on this machine)",
        "{program}：未找到（本机没有安装 Slurm 的客户端命令）"),
    "slurm.no_answer": Entry(
        "{command}: no answer from Slurm within {seconds} s",
        "{command}：Slurm 在 {seconds} 秒内没有应答"),
    "slurm.no_controller": Entry(
        "no Slurm controller answers (sinfo: {slurm_says})",
        "没有应答的 Slurm 控制器（sinfo：{slurm_says}）"),
    "slurm.partitions_failed": Entry(
        "scontrol show partition: {slurm_says}",
        "'scontrol show partition'：{slurm_says}"),
    "slurm.job_query_failed": Entry(
        "scontrol show job {job_id}: {slurm_says}",
        "'scontrol show job' {job_id}：{slurm_says}"),
    # ... submitting a run (SlurmBackend.launch): the refusal raised, and the reason its status keeps
    "slurm.refused": Entry("sbatch refused run {run}: {slurm_says}", "sbatch 拒绝了运行 {run}：{slurm_says}"),
    "slurm.refused_job": Entry("sbatch refused the job: {slurm_says}", "sbatch 拒绝了该作业：{slurm_says}"),
    "slurm.not_submitted": Entry("not submitted: {reason}", "未提交：{reason}", {"reason": "message"}),
    "slurm.not_submitted_config": Entry(
        "not submitted to Slurm: {reason}",
        "未提交到 Slurm：{reason}",
        {"reason": "message"}),
    "slurm.already_submitted": Entry(
        "run {run} is already Slurm job {job_id}; not submitted again",
        "运行 {run} 已经是 Slurm 作业 {job_id}；不会再次提交"),
    "slurm.not_queued": Entry(
        "run {run} is {state}; only a queued run can be submitted (to continue a run that is over, resume it)",
        "运行 {run} 的状态是 {state}；只有排队中的运行才能提交（要继续已结束的运行，请恢复它）"),
    # ... what Slurm would refuse, said before submitting (check_submission), after the field it names
    "slurm.no_partition": Entry(
        "Slurm has no partition by that name; its partitions: {partition_names}",
        "Slurm 没有这个名字的分区；它的分区：{partition_names}",
        {"partition_names": "partition_names"}),
    "slurm.partition_state": Entry(
        "the partition is {state} in Slurm; jobs cannot start there",
        "该分区在 Slurm 中的状态是 {state}；作业无法在那里启动"),
    "slurm.partition_nodes": Entry(
        "partition {partition} has {count} node(s); ask for at most {limit}",
        "分区 {partition} 有 {count} 个节点；最多请求 {limit} 个",
        {"partition": "partition"}),
    "slurm.partition_nodes_per_job": Entry(
        "partition {partition} has {count} node(s) and allows {max_nodes} per job; ask for at most {limit}",
        "分区 {partition} 有 {count} 个节点，每个作业最多允许 {max_nodes} 个；最多请求 {limit} 个",
        {"partition": "partition"}),
    "slurm.partition_time": Entry(
        "is over partition {partition}'s limit of {max_time}",
        "超过了分区 {partition} 的时间上限 {max_time}",
        {"partition": "partition"}),
    "slurm.no_account": Entry("Slurm's accounting has no account by that name", "Slurm 的记账系统中没有这个名字的账户"),
    # ... a job Slurm ended, and the workers took its SIGTERM as a stop (SlurmBackend.refresh)
    "slurm.sigterm_stop": Entry(
        "{reason} (the workers took Slurm's SIGTERM as a stop)",
        "{reason}（各 worker 把 Slurm 的 SIGTERM 当作停止请求）",
        {"reason": "message"}),
    "slurm.sigterm_stop_saved": Entry(
        "{reason} (the workers took Slurm's SIGTERM as a stop and saved {checkpoint})",
        "{reason}（各 worker 把 Slurm 的 SIGTERM 当作停止请求，并保存了 {checkpoint}）",
        {"reason": "message"}),
    "slurm.cancelled_while_pending": Entry(
        "{job} was cancelled while pending (scancel)",
        "{job} 在排队时被取消（scancel）",
        {"job": "message"}),
}
