"""One Slurm node's part of a cluster run: start msrun for this node, and leave nothing behind.

    srun ... python -m core.slurm_node --run-dir <run> --master-port <port> --workers-per-node <W>

The batch script (core.run.slurm) runs this once per node. It reads where it is from Slurm's
environment: `--node_rank` is SLURM_NODEID, the master is the first host of
`scontrol show hostnames $SLURM_JOB_NODELIST` (its NodeAddr, resolved to an IP address, because
msrun wants an address it can connect to), `--worker_num` is nodes x workers per node. It runs
msrun as its child (so it can forward SIGTERM from `scancel` and clean up), with MINDTUNE_NODE set
to Slurm's node name so every rank's record says which node it ran on. No MindSpore, except in
`--msrun` mode, which is msrun itself (see `run_msrun`). The command line is core.slurm_node.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil

from core.run.ranks import ENV_NODE
from core.run.rundir import RunDir

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV_RUN_DIR = "MINDTUNE_RUN_DIR"


def _scontrol(*args: str) -> str:
    return subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30, check=True).stdout


def first_host(nodelist: str) -> str:
    """The first host of a Slurm node list (node[1-2] -> node1), as Slurm expands it."""
    return _scontrol("show", "hostnames", nodelist).split()[0]


def node_address(host: str) -> str:
    """An IP address of Slurm node `host`: its NodeAddr (which is the host name unless the cluster
    says otherwise), resolved. On the test cluster node1/node2 have NodeAddr 127.0.0.1."""
    addr = host
    try:
        for token in _scontrol("show", "node", host, "-o").split():
            if token.startswith("NodeAddr="):
                addr = token.split("=", 1)[1] or host
    except (subprocess.SubprocessError, OSError):
        pass
    try:
        return socket.gethostbyname(addr)
    except OSError:
        return addr


def msrun_argv(run: RunDir, node_rank: int, nodes: int, per_node: int, master: str, port: int,
               python: str = sys.executable) -> list[str]:
    return [python, "-m", "core.slurm_node", "--msrun", str(node_rank), f"--worker_num={nodes * per_node}",
            f"--local_worker_num={per_node}", f"--node_rank={node_rank}", f"--master_addr={master}",
            f"--master_port={port}", "--join=True", f"--log_dir={run.logs_dir}",
            str(REPO_ROOT / "core" / "ranks.py"), "--run-dir", str(run.path)]


def run_msrun(node_rank: int, argv: list[str]) -> int:
    """msrun, except that only node 0 of the allocation hosts its scheduler. msrun starts one on
    every node where the master address is local, and when two Slurm nodes share a host (the test
    cluster) both would; on a real cluster the others are never local, so this changes nothing."""
    from mindspore.parallel.cluster import run as msrun
    from mindspore.parallel.cluster.process_entity import _api

    if node_rank > 0:
        _api._is_local_ip = lambda _address: False  # noqa: SLF001
    sys.argv = ["msrun", *argv]
    return msrun.main() or 0


def _ours(process: psutil.Process, run_path: str, node: str) -> bool:
    try:
        env = process.environ()
    except (psutil.Error, OSError):
        return False
    return env.get(ENV_RUN_DIR) and os.path.realpath(env[ENV_RUN_DIR]) == run_path and env.get(ENV_NODE) == node


def cleanup(run: RunDir, node: str, grace_s: float = 3.0) -> int:
    """SIGTERM, then SIGKILL, every process of this run on this node that is still there (a worker
    msrun started in a session of its own outlives msrun; Slurm's linuxproc tracking may miss it)."""
    real = os.path.realpath(run.path)
    me = os.getpid()
    left = [p for p in psutil.process_iter() if p.pid != me and _ours(p, real, node)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for process in left:
            try:
                process.send_signal(sig)
            except psutil.Error:
                pass
        _, left = psutil.wait_procs(left, timeout=grace_s)
        if not left:
            break
    return len(left)
