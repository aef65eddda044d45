"""Soak test of the console: a long demo LoRA run watched by N live-feed clients (the Monitor tab's
poll, over HTTP, as the page sends it), with a console restart in the middle. Every minute: the
console's RSS, open file descriptors, threads and TCP connections, the feed's latency (p50, p95,
max) and errors, and the run's step. At the end: per console process, RSS and descriptors of its
last minute against its minute 5 (target: within 10%), the feed's p95 (target: < 1 s), how long the
restart took, and whether the run kept going and the feed followed it after the restart.

The run is started with core.run.launcher (as the console starts it, in its own session), so it lives
through the console's restart; the restarted console finds it through the run folder (reattach).

    .venv/bin/python bench/soak.py                       # the full hour, 10 clients, restart at 30 min
    .venv/bin/python bench/soak.py --minutes 12          # a short check (restart at 6 min)
    .venv/bin/python bench/soak.py --minutes 60 --json soak.json

Runs the worker at `--nice` (default 10) so that other work on a shared machine goes first: the
figures are the console's, not the training's.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

import core.run.launcher as launcher  # noqa: E402
from core.spec.config import load_config  # noqa: E402
from core.run.records import TERMINAL_STATES
from core.run.rundir import RunDir

RUN_OVERRIDES = ("train.max_steps=1000000", "train.learning_rate=3.0e-4",  # lr 3e-3 diverges near step 1,000
                 "train.eval_every=200", "train.save_every=200", "train.log_every=1",
                 "eval.downstream=false", "early_stopping.enabled=false")
FLAT = 0.10            # the target: last minute within 10% of the baseline minute
P95_TARGET_S = 1.0


@dataclass
class Console:
    """One `python -m app` process on a fixed port."""
    port: int
    runs_dir: Path
    log: Path
    process: subprocess.Popen | None = None
    started: float = 0.0

    def start(self) -> float:
        """Start it; returns the seconds until it answered."""
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", "--port", str(self.port), "--runs-dir", str(self.runs_dir),
             "--models-dir", str(ROOT / "models"), "--data-dir", str(ROOT / "data")],
            cwd=ROOT, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "GLOG_v": "3"})
        while time.monotonic() - self.started < 300:
            if self.process.poll() is not None:
                raise SystemExit(f"the console exited with {self.process.returncode}; see {self.log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/config", timeout=5) as response:
                    self.config = json.loads(response.read())
                return time.monotonic() - self.started
            except (urllib.error.URLError, OSError, ValueError):
                time.sleep(0.2)
        raise SystemExit(f"the console did not answer within 300 s; see {self.log}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def feed_component(self) -> int:
        return next(c["id"] for c in self.config["components"] if c.get("props", {}).get("elem_id") == "run-state")

    def usage(self, looks: int = 10) -> dict:
        """RSS (MB), open descriptors, threads and TCP connections of the console and its children.
        Descriptors and connections move with the polls in flight: of `looks` looks 0.1 s apart, the
        fewest (what stays open: a leak raises it) and the most."""
        try:
            seen = []
            for _ in range(looks):
                proc = psutil.Process(self.process.pid)
                procs = [proc, *proc.children(recursive=True)]
                seen.append((sum(p.num_fds() for p in procs), len(proc.net_connections(kind="tcp"))))
                time.sleep(0.1)
            rss = sum(p.memory_info().rss for p in procs) / 2**20
            return {"rss_mb": round(rss, 1), "fds": min(f for f, _ in seen), "fds_max": max(f for f, _ in seen),
                    "threads": sum(p.num_threads() for p in procs), "connections": min(c for _, c in seen),
                    "children": len(procs) - 1}
        except psutil.Error as err:
            return {"error": str(err)}
        finally:
            if self.process.poll() is not None:
                print(f"the console exited with {self.process.returncode}; its log ends:\n"
                      + self.log.read_text(errors="replace")[-3000:], flush=True)


@dataclass
class Feed:
    """N clients polling the feed as the Monitor page does (a token each, `full` on its first poll)."""
    console: Console
    run_id: str
    clients: int
    samples: list[tuple[float, float, bool, str]] = field(default_factory=list)  # (time, latency, ok, step shown)
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Event = field(default_factory=threading.Event)

    def start(self) -> list[threading.Thread]:
        threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(self.clients)]
        for thread in threads:
            thread.start()
        return threads

    def _client(self, index: int) -> None:
        token, full = f"soak{index:04d}{os.urandom(4).hex()}", True
        while not self.done.is_set():
            body = json.dumps({"session_hash": f"soaksess{index:04d}", "fn_name": "feed",
                               "component_id": self.console.feed_component(),
                               "data": {"token": token, "full": full, "run": self.run_id, "lang": "en",
                                        "log_scale": False, "offscreen": []}}).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{self.console.port}/gradio_api/component_server",
                                             data=body, headers={"Content-Type": "application/json"})
            start, ok, wait, shown = time.monotonic(), False, 0.5, ""
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    reply = json.loads(response.read())
                ok = isinstance(reply, dict) and reply.get("run") == self.run_id and "error" not in reply
                wait = float(reply.get("interval") or 0.5) if isinstance(reply, dict) else 0.5
                shown = (reply.get("slots") or {}).get("status", "") if ok else ""
                full = False
            except (urllib.error.URLError, OSError, ValueError, AttributeError):
                full, wait = True, 0.5  # the console is restarting: poll again, asking for everything
            with self.lock:
                self.samples.append((time.time(), time.monotonic() - start, ok, shown))
            self.done.wait(wait)

    def window(self, since: float) -> dict:
        with self.lock:
            rows = [s for s in self.samples if s[0] >= since]
        good = sorted(s[1] for s in rows if s[2])
        return {"polls": len(rows), "errors": len(rows) - len(good), **percentiles(good)}


def percentiles(values: list[float]) -> dict:
    if not values:
        return {"p50_ms": None, "p95_ms": None, "max_ms": None}
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
    return {"p50_ms": round(1000 * statistics.median(values), 1), "p95_ms": round(1000 * p95, 1),
            "max_ms": round(1000 * values[-1], 1)}


def start_run(runs_dir: Path, config: str, nice: int) -> RunDir:
    run = launcher.create_run(load_config(ROOT / config, [f"run.runs_dir={runs_dir}", *RUN_OVERRIDES]))
    launched = launcher.launch(run)
    for proc in [psutil.Process(launched.process.pid), *psutil.Process(launched.process.pid).children(True)]:
        proc.nice(nice)
    return run


def flatness(rows: list[dict], baseline_minute: int) -> list[dict]:
    """Per console process: its baseline row (minute 5, or its middle row when it ran less than 10),
    RSS and descriptors then and at its last minute, and whether they stayed within FLAT."""
    verdicts = []
    for proc in sorted({r["console"] for r in rows}):
        mine = [r for r in rows if r["console"] == proc and "rss_mb" in r]
        if len(mine) < 2:
            continue
        target = mine[0]["minute"] + baseline_minute - 1  # its minute 5
        index = next((i for i, r in enumerate(mine) if r["minute"] >= target), len(mine) - 1)
        base = mine[min(index, (len(mine) - 1) // 2)]
        last = mine[-1]
        verdict = {"console": proc, "baseline_minute": base["minute"], "last_minute": last["minute"]}
        for key in ("rss_mb", "fds"):
            ratio = last[key] / base[key] if base[key] else None
            verdict[key] = (base[key], last[key], round(ratio, 3) if ratio else None)
            verdict[f"{key}_flat"] = ratio is not None and ratio <= 1 + FLAT
        verdicts.append(verdict)
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="how long to soak (default 60)")
    parser.add_argument("--clients", type=int, default=10, help="feed clients (default 10)")
    parser.add_argument("--restart-at", type=float, default=0.5,
                        help="restart the console at this fraction of the time (default 0.5; 0 = never)")
    parser.add_argument("--sample-s", type=float, default=60.0, help="seconds between rows (default 60; the "
                        "'minute' column is then elapsed minutes)")
    parser.add_argument("--baseline-minute", type=int, default=5)
    parser.add_argument("--config", default="configs/lora_demo.yaml")
    parser.add_argument("--nice", type=int, default=10, help="niceness of the training worker (default 10)")
    parser.add_argument("--json", type=Path, help="also write every row and the verdicts here")
    parser.add_argument("--keep", type=Path, help="work in this folder (kept: the run, console.log) instead of a temp one")
    args = parser.parse_args()

    with (contextlib.nullcontext(str(args.keep)) if args.keep else tempfile.TemporaryDirectory(prefix="mindtune-soak-")) as tmp:
        runs_dir = Path(tmp) / "runs"
        runs_dir.mkdir(parents=True)
        console = Console(launcher.free_port(), runs_dir, Path(tmp) / "console.log")
        run = start_run(runs_dir, args.config, args.nice)
        print(f"run {run.run_id} (worker at nice {args.nice}); console on port {console.port}", flush=True)
        first_answer_s = console.start()
        feed = Feed(console, run.run_id, args.clients)
        threads = feed.start()
        t0, rows, proc_number = time.monotonic(), [], 1
        restart_at = args.restart_at * args.minutes * 60 if args.restart_at > 0 else None
        restart: dict = {}
        print(f"console up in {first_answer_s:.1f} s; {args.clients} feed clients polling", flush=True)
        print("minute console   rss_mb  fds (max) threads conns   polls errors  p50_ms  p95_ms  max_ms   step state",
              flush=True)
        minute = 0
        try:
            while time.monotonic() - t0 < args.minutes * 60:
                next_row = t0 + (minute + 1) * args.sample_s
                if restart_at is not None and not restart and next_row - t0 > restart_at:
                    time.sleep(max(0.0, t0 + restart_at - time.monotonic()))
                    down = time.time()
                    restart["at_minute"] = round((time.monotonic() - t0) / 60, 2)
                    console.stop()
                    restart["answered_s"] = round(console.start(), 1)
                    proc_number += 1
                    restart["down_since"] = down
                time.sleep(max(0.0, next_row - time.monotonic()))
                minute += 1
                status = run.read_status()
                row = {"minute": round(minute * args.sample_s / 60, 2), "console": proc_number, **console.usage(),
                       **feed.window(time.time() - args.sample_s), "step": status.step, "state": status.state}
                rows.append(row)
                print(f"{row['minute']:6g} {proc_number:7d} {row.get('rss_mb', '-'):>8} {row.get('fds', '-'):>4} "
                      f"{'(' + str(row.get('fds_max', '-')) + ')':>5} "
                      f"{row.get('threads', '-'):>7} {row.get('connections', '-'):>5} {row['polls']:>7} "
                      f"{row['errors']:>6} {row['p50_ms'] or '-':>7} {row['p95_ms'] or '-':>7} "
                      f"{row['max_ms'] or '-':>7} {status.step or 0:>6} {status.state}", flush=True)
                if status.state in TERMINAL_STATES:
                    print(f"the run ended early: {status.state}: {status.reason}", flush=True)
                    break
        finally:
            feed.done.set()
            for thread in threads:
                thread.join(timeout=35)
            final = launcher.stop(run, graceful=False) if run.read_status().state not in TERMINAL_STATES \
                else run.read_status()
            console.stop()

        good = [s[1] for s in feed.samples if s[2]]
        overall = {"polls": len(feed.samples), "errors": len(feed.samples) - len(good), **percentiles(good)}
        if restart:
            since = restart["down_since"]
            back = [s for s in feed.samples if s[0] >= since and s[2]]
            restart["feed_back_after_s"] = round(back[0][0] - since, 1) if back else None
            restart["errors_while_down"] = sum(1 for s in feed.samples if s[0] >= since and not s[2]
                                               and (not back or s[0] <= back[0][0]))
            steps_after = [r["step"] for r in rows if r["console"] == proc_number]
            restart["run_kept_going"] = len(steps_after) >= 2 and steps_after[-1] > steps_after[0]
            del restart["down_since"]
        verdicts = flatness(rows, args.baseline_minute)
        print(f"\nfeed overall ({args.clients} clients, {overall['polls']} polls): p50 {overall['p50_ms']} ms, "
              f"p95 {overall['p95_ms']} ms (target < {1000 * P95_TARGET_S:.0f}), max {overall['max_ms']} ms, "
              f"{overall['errors']} failed polls")
        if restart:
            print(f"console restart at minute {restart['at_minute']}: answered after {restart['answered_s']} s, "
                  f"the feed showed the run again {restart['feed_back_after_s']} s after the stop "
                  f"({restart['errors_while_down']} polls failed meanwhile); run kept going: {restart['run_kept_going']}")
        for v in verdicts:
            print(f"console process {v['console']}: minute {v['baseline_minute']} -> {v['last_minute']}: "
                  f"RSS {v['rss_mb'][0]} -> {v['rss_mb'][1]} MB (x{v['rss_mb'][2]}, flat: {v['rss_mb_flat']}), "
                  f"fds {v['fds'][0]} -> {v['fds'][1]} (x{v['fds'][2]}, flat: {v['fds_flat']})")
        print(f"run at the end: {final.state} at step {final.step}")
        if args.json:
            args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows,
                                             "overall": overall, "restart": restart, "verdicts": verdicts},
                                            indent=1))


if __name__ == "__main__":
    main()
