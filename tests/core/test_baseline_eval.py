"""The baseline evaluation (issue 19 item 5): optional (`eval.baseline: false` starts training at
once) and capped by tokens (`eval.baseline_max_tokens`), and the same figures as before by default."""
import json
from pathlib import Path

import pytest

from core.spec.config import ConfigError, load_config
from core.train import main as train_main
from tests.core.tiny_setup import make_workspace


def _metrics(root: Path, config: Path, *overrides: str) -> list[dict]:
    assert train_main(["--config", str(config), "train.max_steps=2", "train.eval_every=2", "train.warmup_steps=0",
                       "eval.downstream=false",
                       *overrides]) == 0
    run = max((p for p in (root / "runs").iterdir() if not p.is_symlink()), key=lambda p: p.stat().st_mtime)
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("baseline")
    return root, make_workspace(root)


@pytest.mark.slow
def test_baseline_reads_the_whole_set_or_stops_at_the_token_cap_or_is_skipped(workspace):
    root, config = workspace
    full = _metrics(root, config, "run.name=full")
    capped = _metrics(root, config, "run.name=capped", "eval.baseline_max_tokens=40")
    skipped = _metrics(root, config, "run.name=skipped", "eval.baseline=false")

    def baseline(records):
        return [r for r in records if r.get("event") == "baseline"]

    (whole,), (cut,) = baseline(full), baseline(capped)
    evals = [r for r in full if r.get("kind") == "eval" and not r.get("base")]
    assert whole["val_tokens"] == evals[-1]["val_tokens"] > 0  # by default: the whole validation set
    # 16 validation rows of 16-30 tokens, batches of 4: 40 tokens are reached within the first two batches
    assert 0 < cut["val_tokens"] < whole["val_tokens"] / 2
    assert cut["val_loss"] != whole["val_loss"]
    # without a baseline: no base record, training starts right after setup, later evaluations unchanged
    assert not baseline(skipped) and not [r for r in skipped if r.get("base")]
    kinds = [r.get("event") or r.get("kind") for r in skipped]
    assert kinds.index("setup") + 1 == kinds.index("train")
    assert [r["val_tokens"] for r in skipped if r.get("kind") == "eval"] == [e["val_tokens"] for e in evals]


def test_a_token_cap_below_one_is_refused(workspace):
    _, config = workspace
    with pytest.raises(ConfigError, match="eval.baseline_max_tokens"):
        load_config(config, ["eval.baseline_max_tokens=0"])
