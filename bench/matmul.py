"""Why MindSpore's CPU MatMul is (or is not) behind PyTorch's here: the fp32 matmul paths of both
frameworks on this CPU, at 2048³ and at the train step's shapes (bench/train_step.py's demo and
25M models, batch 8 × 256 = 2048 rows).

For each path it prints
- GFLOP per CPU-second of one thread (`time.thread_time`): the kernel's own speed, which other
  processes on the machine do not change (they take CPU time away, not instructions per cycle):
  oneDNN's sgemm (the library MindSpore ships, called directly) and MKL's (PyTorch with one thread);
- MindSpore's MatMul op as the train step runs it (its thread pool; each thread's CPU time per call
  from /proc/self/task/*/schedstat): how evenly the work splits, and its CPU efficiency;
- wall-clock GFLOP/s, best of `--reps`, of MindSpore's MatMul and of PyTorch with all threads:
  meaningful only on a quiet machine.
and the CPU (vendor family, AVX-512) and the implementation oneDNN picks for MindSpore's MatMul
(`ONEDNN_VERBOSE`). Each framework runs in its own subprocess (their thread pools disturb each other
in one process).

    .venv/bin/python bench/matmul.py                 # ~1 minute
    .venv/bin/python bench/matmul.py --reps 30 --shapes 2048x2048x2048
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# (rows, inner, out): the 25M step's projections forward and the demo's, then 2048³
SHAPES = ["2048x2048x2048", "2048x512x1536", "2048x1536x512", "2048x512x512", "2048x256x688", "2048x688x256",
          "2048x256x256"]


def parse_shape(text: str):
    m, k, n = (int(v) for v in text.split("x"))
    return m, k, n


def operands(m, k, n):
    import numpy as np
    rng = np.random.default_rng(0)
    return rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)


def thread_rate(fn, flop: float, reps: int) -> float:
    """GFLOP per CPU-second of the calling thread (median of reps)."""
    fn()
    times = []
    for _ in range(reps):
        start = time.thread_time()
        fn()
        times.append(time.thread_time() - start)
    return flop / statistics.median(times) / 1e9


def best_wall(fn, flop: float, reps: int) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return flop / best / 1e9


def worker_torch(shapes, reps: int) -> dict:
    import torch
    out = {"threads": torch.get_num_threads()}
    for text in shapes:
        m, k, n = parse_shape(text)
        a, b = (torch.from_numpy(x) for x in operands(m, k, n))
        flop = 2.0 * m * k * n
        torch.set_num_threads(out["threads"])
        wall = best_wall(lambda: torch.mm(a, b), flop, reps)
        torch.set_num_threads(1)
        out[text] = {"mkl_thread": thread_rate(lambda: torch.mm(a, b), flop, max(3, reps // 3)), "wall": wall}
    return out


def task_cpu_ns() -> dict:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as handle:
                out[tid] = int(handle.read().split()[0])
        except FileNotFoundError:
            pass
    return out


def worker_mindspore(shapes, reps: int) -> dict:
    import ctypes
    import mindspore as ms
    from mindspore import Tensor, ops
    from core.engine.generate import use_device
    use_device("cpu")  # PyNative, ops launched synchronously, as core.train's worker and eval run ops
    from core.engine.fused import DNNL, _mindspore_lib
    sgemm = ctypes.CDLL(str(_mindspore_lib() / DNNL)).dnnl_sgemm
    sgemm.argtypes = [ctypes.c_char, ctypes.c_char, *[ctypes.c_int64] * 3, ctypes.c_float, ctypes.c_void_p,
                      ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_int64]
    import numpy as np
    out = {}
    matmul = ops.MatMul()
    for text in shapes:
        m, k, n = parse_shape(text)
        a, b = operands(m, k, n)
        c = np.zeros((m, n), np.float32)
        flop = 2.0 * m * k * n
        dnnl = thread_rate(lambda: sgemm(b"N", b"N", m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data, n, 0.0,
                                         c.ctypes.data, n), flop, max(3, reps // 3))
        ta, tb = Tensor(a), Tensor(b)
        run = lambda: matmul(ta, tb).asnumpy()  # noqa: E731
        wall = best_wall(run, flop, reps)
        calls = max(3, int(1e10 / flop))
        before = task_cpu_ns()
        for _ in range(calls):
            run()
        after = task_cpu_ns()
        split = sorted(((after[t] - before.get(t, 0)) / calls / 1e6 for t in after), reverse=True)
        split = [round(v, 2) for v in split if v > 0.02]
        out[text] = {"dnnl_thread": dnnl, "wall": wall, "cpu_ms_by_thread": split,
                     "cpu_rate": flop / (sum(split) / 1e3) / 1e9}
    return out


def onednn_choice() -> dict:
    """oneDNN's version, ISA and the implementation MindSpore's MatMul gets (ONEDNN_VERBOSE)."""
    code = ("import numpy as np, mindspore as ms\nfrom mindspore import ops, Tensor\n"
            "ms.set_context(mode=ms.PYNATIVE_MODE, device_target='CPU')\n"
            "a = Tensor(np.ones((2048, 512), np.float32)); b = Tensor(np.ones((512, 512), np.float32))\n"
            "ops.MatMul()(a, b).asnumpy()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ONEDNN_VERBOSE": "1", "GLOG_v": "3"})
    info = {}
    for line in proc.stdout.splitlines():
        parts = line.split(",")
        if ",info,oneDNN" in line:
            info["version"] = parts[-1].strip()
        elif ",info,cpu,isa:" in line:
            info["isa"] = line.split("isa:", 1)[1].strip()
        elif ",info,cpu,runtime:" in line:
            info["runtime"] = line.split("runtime:", 1)[1].strip()
        elif ",primitive,exec,cpu,matmul," in line:
            info["matmul"] = parts[6]
    return info


def cpu_description() -> str:
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return "unknown CPU"
    flags = fields.get("flags", "").split()
    avx = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return (f"{fields.get('model name', '?')} (vendor {fields.get('vendor_id', '?')}, family "
            f"{fields.get('cpu family', '?')} model {fields.get('model', '?')}), {avx}, {os.cpu_count()} CPUs")


def run_worker(kind: str, shapes, reps: int) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--worker", kind, "--reps", str(reps), "--shapes", *shapes],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ, "GLOG_v": "3"})
    if proc.returncode != 0:
        raise SystemExit(f"{kind} worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=SHAPES, help="MxKxN (rows x inner x out)")
    parser.add_argument("--reps", type=int, default=12)
    parser.add_argument("--worker", choices=["torch", "mindspore"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        sys.path.insert(0, str(ROOT))
        result = worker_torch(args.shapes, args.reps) if args.worker == "torch" else worker_mindspore(args.shapes,
                                                                                                     args.reps)
        print(json.dumps(result))
        return
    print(cpu_description())
    choice = onednn_choice()
    print(f"{choice.get('version', 'oneDNN ?')} ({choice.get('runtime', '?')}), ISA: {choice.get('isa', '?')}; "
          f"MindSpore's MatMul runs {choice.get('matmul', '?')}")
    torch_result, ms_result = run_worker("torch", args.shapes, args.reps), run_worker("mindspore", args.shapes,
                                                                                      args.reps)
    print(f"\n{'shape (M x K x N)':<18} {'per thread, GFLOP/CPU-s':^27} {'MindSpore MatMul':^36} {'wall GFLOP/s':^18}")
    print(f"{'':<18} {'oneDNN sgemm':>13} {'MKL':>6} {'ratio':>6} {'CPU ms/thread':>22} {'GF/CPU-s':>9} "
          f"{'MindSpore':>10} {'PyTorch':>8}")
    for text in args.shapes:
        t, s = torch_result[text], ms_result[text]
        split = "/".join(f"{v:g}" for v in s["cpu_ms_by_thread"][:3])
        print(f"{text:<18} {s['dnnl_thread']:>13.0f} {t['mkl_thread']:>6.0f} {s['dnnl_thread'] / t['mkl_thread']:>5.2f}x "
              f"{split:>22} {s['cpu_rate']:>9.0f} {s['wall']:>10.0f} {t['wall']:>8.0f}")
    print(f"\nPyTorch threads: {torch_result['threads']}. Per-thread rates hold under load; wall-clock "
          "rates only on a quiet machine.")


if __name__ == "__main__":
    main()
