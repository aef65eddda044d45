"""A run's status in words: state, progress, elapsed time, ETA, best so far, and why it failed.

Plain functions over a run's `Status` (core.run.rundir) and the chart data, so the Monitor and Runs tabs say the same
thing and tests need no browser.
"""
from __future__ import annotations

import html
import math
import re
import time
from dataclasses import dataclass

from core.run.records import FAILURE_KINDS, TERMINAL_STATES, Status
from core.spec.messages import Message, ids_of
from core.spec.objectives import SFT, ObjectiveSpec

from app.charts.figures import figure_label, figure_value
from app.i18n import TEXTS, reason_text, text

# Why a failed run failed, for runs whose worker wrote no failure_kind (killed, out of memory; older
# versions): our own messages by their id (the status' reason_message), and regular expressions over
# what libraries and the OS say only (kind, ids or id prefixes, pattern over the reason and the log's
# error lines: a CUDA/Ascend out-of-memory, a segmentation fault); first match wins
_FAILURES = (
    ("oom", ("train.out_of_memory", "train.device_out_of_memory", "train.device_out_of_memory_figures",
             "rank.device_oom", "rank.device_oom_figures",
             "rank.oom_killed", "slurm.out_of_memory"),
     re.compile(r"(?i)out of memory|\boom\b|memoryerror|cannot allocate memory|malloc .*fail|failed to allocate")),
    ("nonfinite", ("train.nonfinite_loss", "train.nonfinite_gradients"), re.compile(r"(?i)\bnan\b|\binf\b")),
    ("loss_scale", ("train.loss_scale_collapse",), None),
    ("disk_full", ("train.disk_full", "train.disk_full_run_file", "ckpt.disk_full"), None),
    ("data", ("data.", "tokenizer.", "stats."), None),
    ("checkpoint", ("ckpt.",), None),
    ("hang", ("rank.hung", "rank.peer_stopped", "rank.peer_behind"), None),
    ("crash", ("run.crash", "run.crash_lines", "train.crashed", "rank.killed", "rank.killed_no_oom", "rank.exited",
               "rank.gone", "rank.peer_exited"),
     re.compile(r"(?i)segmentation fault|core dumped|signal")),
)


def reason_ids(status: Status) -> list[str]:
    """The message ids of why the run ended, from status.json's reason_message ([] for a run folder
    written before the ids: its reason is shown as it is, never read back)."""
    return ids_of(Message.from_json(status.reason_message)) if status.reason_message else []


# Icons as inline SVG, not emoji: a machine without an emoji font (Debian's chromium with DejaVu
# and Noto CJK, as CI has) drew the hourglass and cross-mark emoji as empty boxes.
ICON_BUSY = ('<svg class="mt-icon mt-icon-busy" viewBox="0 0 16 16" aria-hidden="true"><path d="M4 1.5h8M4 14.5h8'
             'M5 1.5v2.5l3 4-3 4v2.5M11 1.5v2.5l-3 4 3 4v2.5" fill="none" stroke="currentColor" stroke-width="1.4"/></svg>')
ICON_FAILED = ('<svg class="mt-icon mt-icon-failed" viewBox="0 0 16 16" aria-hidden="true"><circle cx="8" cy="8" r="7" '
               'fill="#dc2626"/><path d="M5 5l6 6M11 5l-6 6" stroke="#fff" stroke-width="1.8"/></svg>')


def failure_kind(status: Status, log_tail: str = "") -> str | None:
    """'oom', 'nonfinite', 'data', 'config', 'crash' or 'other' for a failed run; None when it did
    not fail. The worker's own `failure_kind` wins; the patterns cover runs whose worker died before
    it could write one (killed, out of memory) and runs written by older versions."""
    if status.state != "failed":
        return None
    if status.failure_kind in FAILURE_KINDS:
        return status.failure_kind
    reason = status.reason or ""
    lines = "\n".join(status.error_lines)
    ids = reason_ids(status)
    for kind, ours, pattern in _FAILURES:
        if any(key == mark or (mark.endswith(".") and key.startswith(mark)) for key in ids for mark in ours):
            return kind
        if pattern is not None and (pattern.search(reason) or pattern.search(lines)):
            return kind
    _, _, oom = _FAILURES[0]  # an OOM kill often leaves only the log
    return "oom" if oom.search(log_tail[-4000:]) else "other"


def failure_html(status: Status, log_tail: str, lang: str, node: str | None = None) -> str:
    """The failure in plain words above the raw log ('' when the run did not fail); `node`: the
    cluster node the failed rank ran on (named beside the rank)."""
    kind = failure_kind(status, log_tail)
    if kind is None:
        return ""
    reason = reason_text(status.reason, lang, status.reason_message).strip().splitlines()
    first = html.escape(reason[0] if reason else "")
    lines = [str(line) for line in status.error_lines]
    where = f"rank {status.failed_rank}" if status.failed_rank is not None else ""
    on_node = ""
    if node and status.failed_rank is not None:
        where = f"{where} on {node}"
        on_node = (f'<p class="mt-failure-node" id="failure-node" data-node="{html.escape(node)}">'
                   f'{html.escape(text("cluster.rank_on", lang).format(rank=status.failed_rank, node=node))}</p>')
    tail = (f'<pre class="mt-failure-log" data-rank="{html.escape(where)}">{html.escape(chr(10).join(lines))}</pre>'
            if lines else "")  # the failed rank's own log tail (a data-parallel rank logs to logs/worker_N.log)
    return (f'<h3 class="mt-failure">{ICON_FAILED} {html.escape(text(f"failure.{kind}", lang))}</h3>'
            f'<p>{html.escape(text("failure.reason", lang))}: <code>{first}</code></p>{on_node}{tail}')


def fmt_duration(seconds: float | None) -> str:
    """3725 -> '1h 02m', 95 -> '1m 35s', None -> '-'."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "-"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def elapsed_s(status: Status, now: float | None = None) -> float | None:
    if status.started_at is None:
        return None
    end = status.ended_at if status.state in TERMINAL_STATES else None
    return (end if end is not None else (now or time.time())) - status.started_at


def total_elapsed_s(status: Status, now: float | None = None) -> float | None:
    """Time spent running over every attempt of a resumed run (earlier attempts from `history`),
    not only the last one."""
    current = elapsed_s(status, now)
    earlier = [a.ended_at - a.started_at for a in status.history
               if a.started_at is not None and a.ended_at is not None and a.ended_at >= a.started_at]
    if current is None and not earlier:
        return None
    return (current or 0.0) + sum(earlier)


def eta_s(status: Status, seconds_per_step: float | None) -> float | None:
    """Remaining steps × the measured time per step (None until two timed steps exist)."""
    if status.state in TERMINAL_STATES or seconds_per_step is None:
        return None
    if status.step is None or status.total_steps is None:
        return None
    return max(status.total_steps - status.step, 0) * seconds_per_step


def best_text(status: Status, spec: ObjectiveSpec = SFT, lang: str = "en") -> str:
    """The best evaluation so far by the metric early stopping watches, with the run's headline
    figure (core.spec.objectives: perplexity for SFT, reward accuracy for a preference run) when
    that is another figure: 'val_loss 1.234 at step 200 (ppl 3.43)', 'reward_accuracy 0.78 at
    step 350'; '-' before the first evaluation."""
    best = status.best
    if best is None or best.value is None:
        return "-"
    said = {"metric": best.metric or "?", "value": f"{best.value:.4g}", "step": best.step}
    headline = getattr(best, spec.headline, None)
    if spec.headline != best.metric and figure_value(spec.headline, headline) != "-":
        return text("status.best_with", lang).format(**said, figure=figure_label(spec.headline, lang),
                                                     figure_value=figure_value(spec.headline, headline))
    return text("status.best_at", lang).format(**said)


@dataclass(frozen=True)
class StatusLine:
    state: str
    step: int | None
    total_steps: int | None
    elapsed: str
    eta: str
    best: str


def reached_step(status: Status, checkpoint_steps: list[int]) -> Status:
    """The status with the step the run reached: a run that ended keeps its newest checkpoint's
    step when that is later than the status's (Stop now kills the worker between a checkpoint and
    its next status line: "step 30" beside checkpoint step-31, issue 20 bug 9)."""
    newest = max(checkpoint_steps, default=None)
    if status.state in TERMINAL_STATES and newest is not None and newest > (status.step or 0):
        return status.replace(step=newest)
    return status


def status_line(status: Status, seconds_per_step: float | None, now: float | None = None, spec: ObjectiveSpec = SFT,
                lang: str = "en") -> StatusLine:
    return StatusLine(status.state or "unknown", status.step, status.total_steps,
                      fmt_duration(elapsed_s(status, now)), fmt_duration(eta_s(status, seconds_per_step)),
                      best_text(status, spec, lang))


def state_word(state: str, lang: str) -> str:
    """A run state as the page shows it: the state itself in English ('early_stopped', as the run
    folder and the CLI say it), its word in 中文 ('已早停'); a state no text knows as it is."""
    return text(f"state.{state}", lang) if lang != "en" and f"state.{state}" in TEXTS else state


def state_html(state: str, lang: str) -> str:
    """The state as a coloured badge in `lang`; the raw state word is always in its `data-state`
    (and class), which the page's scripts and the tests may read."""
    raw = html.escape(state)
    return f'<span class="mt-state mt-state-{raw}" data-state="{raw}">{html.escape(state_word(state, lang))}</span>'


def phase(state: str, has_setup: bool, has_eval: bool, has_train: bool) -> str | None:
    """What a starting run is busy with before its first logged step (the first step compiles)."""
    if state == "queued":
        return "phase.queued"
    if state not in ("starting", "running") or has_train:
        return None
    if not has_setup:
        return "phase.loading"
    return "phase.baseline" if not has_eval else "phase.compiling"


def status_html(line: StatusLine, lang: str, phase_key: str | None = None) -> str:
    step = f"{line.step if line.step is not None else 0} / {line.total_steps or '?'}"
    parts = [(text("status.step", lang), step), (text("status.elapsed", lang), line.elapsed),
             (text("status.eta", lang), line.eta), (text("status.best", lang), line.best)]
    text_line = " · ".join(f"<b>{html.escape(name)}</b> {html.escape(value)}" for name, value in parts)
    return text_line + (f" · {ICON_BUSY} {html.escape(text(phase_key, lang))}" if phase_key else "")
