"""train.profile_steps (issue 19 item 8): MindSpore's profiler runs for those steps on rank 0 and
leaves a summary (top operators by time, forward vs backward) and the trace files in the run."""
import json

import pytest

from core.spec.config import ConfigError, load_config
from core.engine.profiling import BACKWARD, FORWARD
from core.run.rundir import RunDir
from core.train import main as train_main
from tests.core.tiny_setup import make_workspace


@pytest.mark.slow
def test_profiled_steps_leave_a_summary_and_the_trace_files(tmp_path):
    config = make_workspace(tmp_path)
    assert train_main(["--config", str(config), "train.max_steps=4", "train.warmup_steps=0", "train.eval_every=4",
                       "eval.downstream=false", "eval.baseline=false", "train.profile_steps=[2, 3]"]) == 0
    run = next(p for p in (tmp_path / "runs").iterdir() if not p.is_symlink())
    summary = RunDir(run).read_profile_summary()
    assert summary.steps == [2, 3]
    assert summary.phases[BACKWARD] > 0 and summary.phases[FORWARD] > 0
    assert summary.total_ms == pytest.approx(sum(summary.phases.values()), rel=1e-3)
    top = summary.top
    assert top and all(a.ms >= b.ms for a, b in zip(top, top[1:]))
    assert {"MatMul", "Custom"} & {t.op_type for t in top}  # the projections or the fused kernels
    trace = next(f for f in summary.files if f.endswith("trace_view.json"))
    events = json.loads((run / "profile" / trace).read_text())
    assert isinstance(events, list) and any(e.get("ph") == "X" for e in events)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    (event,) = [r for r in records if r.get("event") == "profile"]
    assert event["step"] == 3 and "profiled steps 2-3" in event["message"]
    assert len([r for r in records if r.get("kind") == "train"]) == 4  # the run itself went on


@pytest.mark.parametrize("value", ["[3, 2]", "[0, 2]", "[1]", "a,b", "[1, 2, 3]"])
def test_a_bad_step_range_is_refused_with_the_rule(tmp_path, value):
    config = make_workspace(tmp_path)
    with pytest.raises(ConfigError, match=r"train.profile_steps.*1 <= start <= end"):
        load_config(config, [f"train.profile_steps={value}"])


def test_a_step_range_reads_from_text(tmp_path):
    config = make_workspace(tmp_path)
    assert load_config(config, ["train.profile_steps=3,5"]).train.profile_steps == [3, 5]
    assert load_config(config).train.profile_steps is None
