"""The console's texts: a Slurm cluster's jobs and Slurm's reasons.

Each key has its English and its 中文 side by side, in the class of core's messages
(core.spec.catalogue.entry.Entry)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

TEXTS: dict[str, Entry] = {
    "cluster.job": Entry("Slurm job", "Slurm 作业"),
    "cluster.partition": Entry("partition", "分区"),
    "cluster.nodes": Entry("nodes", "节点"),
    "cluster.no_nodes": Entry("not allocated yet", "尚未分配"),
    "cluster.never_ran": Entry("none (it never ran)", "无（未曾运行）"),
    "cluster.state": Entry("Slurm state", "Slurm 状态"),
    "cluster.reason": Entry("Pending because", "等待原因"),
    "cluster.queue_item": Entry("Slurm job {job} on {partition}", "Slurm 作业 {job}（分区 {partition}）"),
    "cluster.rank_on": Entry("rank {rank} on node {node}", "节点 {node} 上的 rank {rank}"),
    "slurm.reason.Resources": Entry("waiting for nodes to be free", "等待节点空闲"),
    "slurm.reason.Priority": Entry("jobs of higher priority are ahead", "前面有优先级更高的作业"),
    "slurm.reason.QOSMaxNodePerJobLimit": Entry("more nodes than the QOS allows one job", "节点数超过 QOS 对单个作业的限制"),
    "slurm.reason.PartitionNodeLimit": Entry("more nodes than the partition allows", "节点数超过分区上限"),
    "slurm.reason.PartitionTimeLimit": Entry("a longer time limit than the partition allows", "时间限制超过分区上限"),
    "slurm.reason.JobHeldUser": Entry(
        "held by its user (scontrol release to let it run)",
        "被用户挂起（用 scontrol release 放行）"),
    "slurm.reason.JobHeldAdmin": Entry("held by an administrator", "被管理员挂起"),
    "slurm.reason.ReqNodeNotAvail": Entry("a node it needs is down or reserved", "所需节点不可用或已被预留"),
    "slurm.reason.Dependency": Entry("waiting for another job to end", "等待其他作业结束"),
    "slurm.reason.BeginTime": Entry("its start time has not come yet", "尚未到开始时间"),
    "slurm.reason.AssocGrpNodeLimit": Entry("the account's node limit is reached", "账户的节点数限制已用满"),
    "slurm.end.CANCELLED": Entry(
        "Cancelled in Slurm (scancel): no rank crashed.",
        "已在 Slurm 中取消（scancel）：没有 rank 崩溃。"),
    "slurm.end.TIMEOUT": Entry(
        "Slurm ended the job at its time limit: resume it from its last checkpoint, with a longer limit.",
        "作业达到时间限制，被 Slurm 结束：可提高时间限制后从最后的检查点恢复。"),
    "slurm.end.NODE_FAIL": Entry(
        "A node of the job failed: Slurm ended the job; resume it from its last checkpoint.",
        "作业的某个节点故障，Slurm 结束了作业：可从最后的检查点恢复。"),
    "slurm.end.PREEMPTED": Entry(
        "Slurm preempted the job for another one; resume it from its last checkpoint.",
        "作业被 Slurm 抢占：可从最后的检查点恢复。"),
    "slurm.end.OUT_OF_MEMORY": Entry("Slurm killed the job: out of memory on a node.", "Slurm 结束了作业：某节点内存不足。"),
    "slurm.end.BOOT_FAIL": Entry("Slurm could not boot a node of the job.", "Slurm 无法启动作业的某个节点。"),
    "slurm.end.DEADLINE": Entry("Slurm ended the job at its deadline.", "作业到达截止时间，被 Slurm 结束。"),
}
