"""`train.profile_steps: [start, end]`: MindSpore's profiler around those optimizer steps, on rank 0
only, and a summary a person can read in the Monitor.

    runs/<id>/profile/
      summary.json     steps, total time, forward vs backward, the top operators by time
      vm_<pid>_<time>_ascend_ms/ASCEND_PROFILER_OUTPUT/trace_view.json   (chrome://tracing, Perfetto)
      vm_.../FRAMEWORK/cpu_op_detail_info_0.csv, cpu_op_type_info_0.csv  (MindSpore's own tables)
      vm_.../ASCEND_PROFILER_OUTPUT/kernel_details.csv                    (Ascend's kernels)
      gpu_op_detail_info_0.csv                                            (GPU's operators)

On the CPU MindSpore records every kernel launch with its scope: kernels of the backward pass are
under `Gradients/`; the forward pass and the optimizer update share the `Default/` scope (the
layers run as shared per-layer graphs, so no module path survives), so the summary says
"backward" and "forward + update". The summary is a `core.run.records.ProfileSummary`, which the
Monitor reads back (`RunDir.read_profile_summary`); `summarize` reads MindSpore's tables only (no
MindSpore import: only `StepProfiler.before_step` imports it).
"""
from __future__ import annotations

import csv
from pathlib import Path

from core.spec.device_paths import profiler_activities
from core.run.records import ProfiledOperator, ProfileSummary
from core.run.rundir import RunDir

DETAIL_GLOB = "*/FRAMEWORK/cpu_op_detail_info_*.csv"
# Ascend: the device kernels' table (mindspore/profiler/analysis/viewer/ascend_kernel_details_viewer.py:
# columns "Name", "Type", "Duration(us)"); MindSpore writes no CPU tables when the target is not the CPU
KERNEL_GLOB = "*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
# GPU: MindSpore 2.10's GPU path has no Python analyser (mindspore/profiler/platform/gpu_profiler.py:68-70,
# `analyse` only logs); its C++ profiler, initialised with the profile's output_path (gpu_profiler.py:38;
# that is tensorboard_trace_handler's folder, profiler/common/profiler_context.py:79-84; the CPU one writes
# into FRAMEWORK, cpu_profiler.py:52), writes "gpu_op_detail_info_<dev>.csv" (DataSaver::WriteOpDetail,
# ccsrc/tools/profiler/data_saver.cc, name "<op_side>_op_detail_info_" and header
# "op_side,op_type,op_name,op_full_name,op_occurrences,op_total_time(us),op_avg_time(us),total_proportion,
# cuda_activity_cost_time(us),cuda_activity_call_count", strings of mindspore/lib/libmindspore_profiler.so;
# the CPU table's header beside it has full_op_name and ms) and gpu_op_type_info_<dev>.csv,
# gpu_activity_data_<dev>.csv, gpu_framework_<dev>.txt, which Profiler.op_analyse reads from the FRAMEWORK
# folder (profiler.py:678, common/profiler_op_analyse.py:112-117, 212-238); both places are read.
GPU_GLOBS = ("gpu_op_detail_info_*.csv", "*/FRAMEWORK/gpu_op_detail_info_*.csv")
TRACE_GLOB = "*/ASCEND_PROFILER_OUTPUT/trace_view.json"
TOP = 15
BACKWARD, FORWARD = "backward", "forward + update"


class StepProfiler:
    """Starts MindSpore's profiler before step `start` and stops it after step `end` (1-based
    optimizer steps), on the main rank only, into the run's profile folder; writes its summary
    when it stops. Inactive when `steps` is None or this is not the main rank."""

    def __init__(self, steps: list[int] | None, run: RunDir, is_main: bool, device: str = "cpu"):
        self.steps = steps if is_main else None
        self.device = device
        self.run = run
        self.folder = run.profile_dir
        self._profiler = None
        self.summary: ProfileSummary | None = None

    def before_step(self, step: int) -> None:
        """`step`: the number of the step about to run."""
        if self.steps is None or step != self.steps[0] or self._profiler is not None:
            return
        from mindspore.profiler import ProfilerActivity, profile, tensorboard_trace_handler
        self.folder.mkdir(parents=True, exist_ok=True)
        activities = [ProfilerActivity[name] for name in profiler_activities(self.device)]
        self._profiler = profile(activities=activities,
                                 on_trace_ready=tensorboard_trace_handler(str(self.folder)))
        self._profiler.start()

    def after_step(self, step: int, last: bool = False) -> ProfileSummary | None:
        """Stops (and analyses) after the end step, or at the run's last step; returns the summary then."""
        if self._profiler is None:
            return None
        self._profiler.step()
        if step < self.steps[1] and not last:
            return None
        self._profiler.stop()
        self._profiler = None
        self.summary = write_summary(self.run, [self.steps[0], step], self.device)
        return self.summary


def write_summary(run: RunDir, steps: list[int], device: str | None = None) -> ProfileSummary:
    """Summarize the tables in the run's profile folder and write the summary there."""
    summary = summarize(run.profile_dir, steps, device)
    run.write_profile_summary(summary)
    return summary


def _device_tables(folder: Path, device: str | None) -> tuple[str | None, list[Path]]:
    """The device whose kernel tables are read ("gpu", "ascend" or None) and those tables; `device`
    None: whichever device's tables are there."""
    gpu = sorted({p for pattern in GPU_GLOBS for p in folder.glob(pattern)})
    ascend = sorted(folder.glob(KERNEL_GLOB))
    if device in ("gpu", "ascend"):
        return device, gpu if device == "gpu" else ascend
    if device is None and (gpu or ascend):
        return ("gpu", gpu) if gpu else ("ascend", ascend)
    return None, []


def _scope_phase(name: str) -> str:
    return BACKWARD if name.startswith("Gradients/") or "/Gradients/" in name else FORWARD


def summarize(folder: Path, steps: list[int], device: str | None = None) -> ProfileSummary:
    """Operator time by type and phase from MindSpore's cpu_op_detail_info tables under `folder`, and
    the device's kernel table: kernel_details.csv (Ascend) or gpu_op_detail_info (GPU). `device`: the
    run's parallel.device; None reads whichever device table is there."""
    folder = Path(folder)
    totals: dict[tuple[str, str], list[float]] = {}
    for table in sorted(folder.glob(DETAIL_GLOB)):
        with open(table, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                phase = BACKWARD if row["full_op_name"].startswith("Gradients/") else FORWARD
                entry = totals.setdefault((row["op_type"], phase), [0.0, 0])
                entry[0] += float(row["op_total_time(ms)"])
                entry[1] += int(row["op_occurrences"])
    kind, devices = _device_tables(folder, device)
    for table in devices:
        with open(table, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                if kind == "ascend":  # one row per kernel launch
                    key, us, calls = (row["Type"], _scope_phase(row["Name"])), float(row["Duration(us)"]), 1
                else:  # one row per operator: its launches and their total time
                    key = (row["op_type"], _scope_phase(row["op_full_name"]))
                    us, calls = float(row["op_total_time(us)"]), int(row["op_occurrences"])
                entry = totals.setdefault(key, [0.0, 0])
                entry[0] += us / 1000.0
                entry[1] += calls
    total = sum(ms for ms, _ in totals.values())
    phases = {phase: round(sum(v[0] for (_, p), v in totals.items() if p == phase), 3) for phase in (FORWARD, BACKWARD)}
    top = sorted(totals.items(), key=lambda item: -item[1][0])[:TOP]
    if kind == "ascend" and devices:
        note = "Ascend kernels (kernel_details.csv) and host-side CPU kernels as MindSpore's profiler timed them."
    elif kind == "gpu" and devices:
        note = ("GPU operators (gpu_op_detail_info, MindSpore's GPU op timing) and host-side CPU kernels as "
                "MindSpore's profiler timed them.")
    elif kind is not None:
        table = "kernel_details.csv" if kind == "ascend" else "gpu_op_detail_info_<device>.csv"
        note = (f"No {kind} kernels: MindSpore wrote no {table} under the profile folder; only the host-side "
                "CPU kernels (if any) are counted.")
    else:
        note = ("CPU kernels as MindSpore's profiler timed them; 'Custom' are mindtune's fused kernels "
                "(attention, norms, gates, loss, LoRA).")
    return ProfileSummary(
        steps=list(steps), total_ms=round(total, 3), phases=phases,
        top=[ProfiledOperator(op_type=op, phase=phase, ms=round(ms, 3), share=round(ms / total, 4) if total else 0.0,
                              calls=calls) for (op, phase), (ms, calls) in top],
        files=[str(p.relative_to(folder)) for p in sorted(folder.glob(TRACE_GLOB))] +
              [str(p.relative_to(folder)) for p in sorted(folder.glob(DETAIL_GLOB))] +
              [str(p.relative_to(folder)) for p in devices],
        note=note,
    )


def profile_message(summary: ProfileSummary) -> str:
    """One line for train.log and the Monitor's events."""
    first, last = summary.steps
    top = ", ".join(f"{t.op_type} ({t.phase}) {100 * t.share:.0f}%" for t in summary.top[:3])
    phases = summary.phases
    return (f"profiled steps {first}-{last}: {summary.total_ms:.0f} ms of kernels, "
            f"backward {phases[BACKWARD]:.0f} ms, forward + update {phases[FORWARD]:.0f} ms; top: {top} "
            f"(runs/<id>/profile/)")
