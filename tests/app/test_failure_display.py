"""The Monitor's failure box: every failure kind the worker, the rank supervisors and the launcher
write is named in words, and a failed rank's own log tail is shown (a data-parallel rank logs to
logs/worker_N.log, which the run's train.log below does not hold)."""
from __future__ import annotations

import pytest

from core.run.records import Status

from app.i18n import text
from app.runs.run_status import failure_html, failure_kind


@pytest.mark.parametrize("kind", ["oom", "nonfinite", "data", "config", "crash", "disk_full", "checkpoint",
                                  "loss_scale", "hang", "rank_died"])
def test_each_failure_kind_is_named(kind):
    status = Status(state="failed", failure_kind=kind, reason="why\nmore")
    assert failure_kind(status) == kind
    shown = failure_html(status, "", "en")
    assert text(f"failure.{kind}", "en") in shown and "<code>why</code>" in shown
    assert text(f"failure.{kind}", "zh") != text(f"failure.{kind}", "en")


def test_a_failed_ranks_log_tail_is_shown_escaped():
    status = Status(state="failed", failure_kind="rank_died", failed_rank=1,
                    reason="rank 1 was killed by SIGKILL; newest resumable checkpoint: step-4",
                    error_lines=["rank 1 of 2: pid 42 on vm", "<oops> & more"])
    shown = failure_html(status, "", "en")
    assert '<pre class="mt-failure-log" data-rank="rank 1">rank 1 of 2: pid 42 on vm\n&lt;oops&gt; &amp; more</pre>' in shown
    assert "mt-failure-log" not in failure_html(status.replace(error_lines=[]), "", "en")
    assert failure_html(Status(state="stopped", reason="stopped by the user (forced)"), "", "en") == ""
