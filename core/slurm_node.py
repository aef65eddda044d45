"""One Slurm node's part of a cluster run (core.run.slurm_node): start msrun for this node, clean up.

    srun ... python -m core.slurm_node --run-dir <run> --master-port <port> --workers-per-node <W>
    python -m core.slurm_node --msrun <node_rank> <msrun's arguments>   # msrun itself (run_msrun)
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `core` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.run.ranks import ENV_NODE
from core.run.records import RunDirError
from core.run.rundir import RunDir
from core.run.slurm_node import ENV_RUN_DIR, cleanup, first_host, msrun_argv, node_address, run_msrun


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--msrun"]:
        return run_msrun(int(argv[1]), argv[2:])
    parser = argparse.ArgumentParser(prog="python -m core.slurm_node", description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--master-port", type=int, required=True)
    parser.add_argument("--workers-per-node", type=int, default=1)
    args = parser.parse_args(argv)
    run = RunDir(os.path.abspath(args.run_dir))
    node_rank = int(os.environ.get("SLURM_NODEID", "0"))
    nodes = int(os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES") or "1")
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    master_host = first_host(os.environ.get("SLURM_JOB_NODELIST", node))
    master = node_address(master_host)
    if node_rank == 0:
        try:
            if run.read_status().state == "queued":
                run.write_status(state="starting", hostname=socket.gethostname())
        except RunDirError:
            pass  # the worker says it later, or the run was stopped meanwhile
    command = msrun_argv(run, node_rank, nodes, args.workers_per_node, master, args.master_port)
    print(f"mindtune node {node} (node_rank {node_rank} of {nodes}, {socket.gethostname()}): msrun with master "
          f"{master_host} = {master}:{args.master_port}, {args.workers_per_node} worker(s) here", flush=True)
    env = {**os.environ, ENV_NODE: node, ENV_RUN_DIR: str(run.path)}
    child = subprocess.Popen(command, cwd=os.getcwd(), env=env, stdin=subprocess.DEVNULL)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: child.poll() is None and child.send_signal(number))
    started = time.time()
    code = child.wait()
    left = cleanup(run, node)
    print(f"mindtune node {node}: msrun exited with {code} after {time.time() - started:.1f} s"
          + (f"; {left} process(es) survived SIGKILL" if left else ""), flush=True)
    return code if code >= 0 else 128 - code



if __name__ == "__main__":
    sys.exit(main())
