"""The Monitor's profiler view (issue 19 item 8): a profiled run's top operators and its trace
file, sent to the page once (and again only when they change)."""
from __future__ import annotations

import html

from core.engine.profiling import BACKWARD, FORWARD, write_summary
from core.run.records import ProfileSummary

from app.tabs import monitor_callbacks as cb
from tests.app.test_monitor_callbacks import make_run

DETAIL = ("op_side,op_type,op_name,full_op_name,op_occurrences,op_total_time(ms),op_avg_time(ms),"
          "total_proportion,subgraph,pid\n"
          "Host,Custom,Custom-op6,Default/Custom-op6,2,6.0,3.0,0.5,Default,1\n"
          "Host,Custom,Custom-op9,Gradients/Default/Grad_Custom/Custom-op9,2,3.0,1.5,0.25,Default,1\n"
          "Host,MatMul,MatMul-op1,Gradients/Default/Grad_MatMul/MatMul-op1,4,2.0,0.5,0.2,Default,1\n"
          "Host,MatMul,MatMul-op7,Default/MatMul-op7,2,1.0,0.5,0.05,Default,1\n"
          "Host,Adam,Adam-op1,Default/Adam-op1,2,0.5,0.25,0.02,Default,1\n")


def _profile(run, steps=(2, 3)) -> ProfileSummary:
    folder = run.path / "profile" / "vm_1_2_ascend_ms"
    (folder / "FRAMEWORK").mkdir(parents=True)
    (folder / "ASCEND_PROFILER_OUTPUT").mkdir()
    (folder / "FRAMEWORK" / "cpu_op_detail_info_0.csv").write_text(DETAIL)
    (folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_text("[]")
    return write_summary(run, list(steps))  # the worker's code (core.engine.profiling), read with the console's


def test_the_profile_shows_once_with_its_trace(console):
    run = make_run(console)
    session = cb.MonitorSession()
    assert cb.controls(session, run.run_id, console).profile == ("", None)  # not profiled: an empty slot
    _profile(run)
    shown = cb.controls(session, run.run_id, console).profile
    table, trace = shown
    assert trace == str(run.path / "profile" / "vm_1_2_ascend_ms" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    assert "steps 2–3" in table and "12 ms of kernels" in table
    # ranked by time: Custom forward 6 ms first, then Custom backward 3, MatMul backward 2, ...
    order = [table.index(f"<td>{op}</td><td>{phase}</td><td>{ms}</td>") for op, phase, ms in
             [("Custom", FORWARD, "6.0"), ("Custom", BACKWARD, "3.0"), ("MatMul", BACKWARD, "2.0"),
              ("MatMul", FORWARD, "1.0")]]
    assert order == sorted(order)
    assert f"{BACKWARD} 5 ms" in table and f"{FORWARD} 8 ms" in table  # 6 + 1 + 0.5 (the update is in forward)
    assert cb.controls(session, run.run_id, console).profile is None  # unchanged: not sent again


def test_operator_names_are_escaped(console):
    run = make_run(console)
    folder = run.path / "profile" / "x" / "FRAMEWORK"
    folder.mkdir(parents=True)
    (folder / "cpu_op_detail_info_0.csv").write_text(DETAIL.replace("MatMul", "<script>"))
    write_summary(run, [1, 1])
    table, trace = cb.profile_view(run, "en")
    assert "<script>" not in table and "&lt;script&gt;" in table and trace is None


def test_the_console_reads_the_summary_the_worker_wrote(console):
    run = make_run(console)
    written = _profile(run)
    assert run.read_profile_summary() == written and written.extra == {}
    table, _ = cb.profile_view(run, "en")
    assert html.escape(written.note) in table and all(f"<td>{t.calls}</td>" in table for t in written.top)
