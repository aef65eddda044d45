"""The console's command line and the safety rules applied before anything is served.

    python -m app [--host 127.0.0.1] [--port 7860] [--models-dir DIR ...] [--data-dir DIR ...]
                  [--runs-dir runs] [--auth user:pass | --auth-file FILE] [--admin USER ...]
                  [--max-upload-mb 50] [--lang en|zh] [--max-concurrent-runs N]
                  [--cluster-shared-dir DIR] [--rewards-dir DIR ...]

Binding to anything but a loopback address without a password is refused: the console starts
processes and serves checkpoints, so on a shared network it must not be open to everyone. A public
share link (Gradio's `GRADIO_SHARE=True`) is refused without a login for the same reason. With
logins, each user sees only their own runs; an `--admin` user sees every run (see app/auth/access.py).
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from core.run.launcher import REPO_ROOT, is_loopback

DEFAULT_MODELS_DIR = REPO_ROOT / "models"
DEFAULT_DATA_DIR = REPO_ROOT / "data"
DEFAULT_RUNS_DIR = REPO_ROOT / "runs"
DEFAULT_REWARDS_DIR = REPO_ROOT / "rewards"
LANGUAGES = ("en", "zh")


class SettingsError(ValueError):
    """A command line the console refuses to start with; the message says what to change."""


@dataclass(frozen=True)
class Settings:
    """Everything the console needs to know about where it may read, write and listen."""
    host: str = "127.0.0.1"
    port: int = 7860
    models_dirs: tuple[Path, ...] = (DEFAULT_MODELS_DIR,)
    data_dirs: tuple[Path, ...] = (DEFAULT_DATA_DIR,)
    runs_dir: Path = DEFAULT_RUNS_DIR
    auth: tuple[tuple[str, str], ...] = ()
    admins: tuple[str, ...] = ()
    share: bool = False
    max_upload_mb: float = 50.0
    lang: str = "en"
    configs_dir: Path = field(default=REPO_ROOT / "configs")
    # runs at once (the job queue holds the others): None = one on the CPU, one per free set of
    # GPU/Ascend ids on accelerators
    max_concurrent_runs: int | None = None
    # storage every Slurm node sees: the Train tab offers a Slurm partition only when the runs
    # folder lies under it (None: cluster runs are not offered)
    cluster_shared_dir: Path | None = None
    # folders whose Python files a GRPO run may use as reward functions (grpo.rewards' `file`): reward
    # code runs in the worker, so only an administrator picks one where the console has a login
    rewards_dirs: tuple[Path, ...] = (DEFAULT_REWARDS_DIR,)

    @property
    def uploads_dir(self) -> Path:
        """Uploaded datasets and saved configs: beside the runs folder, never inside a run."""
        return self.runs_dir.parent / "uploads"

    @property
    def all_data_dirs(self) -> tuple[Path, ...]:
        """The data roots the console reads datasets from, uploads included."""
        return (*self.data_dirs, self.uploads_dir)

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)


def parse_auth(text: str, where: str = "--auth") -> tuple[str, str]:
    """'user:password' -> (user, password); the password may itself contain ':'."""
    user, sep, password = text.strip().partition(":")
    if not sep or not user or not password:
        raise SettingsError(f"{where}: expected user:password, got {text.strip()!r}")
    return user, password


def read_auth_file(path: str | Path) -> tuple[tuple[str, str], ...]:
    """One user:password per line; blank lines and lines starting with '#' are skipped."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise SettingsError(f"--auth-file {path}: cannot read ({err.strerror or err})") from None
    pairs = tuple(parse_auth(line, f"{path} line {number}")
                  for number, line in enumerate(lines, start=1)
                  if line.strip() and not line.lstrip().startswith("#"))
    if not pairs:
        raise SettingsError(f"--auth-file {path}: no user:password lines")
    return pairs


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app",
                                     description="mindtune: a browser console for fine-tuning LLMs on MindSpore")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; others need --auth)")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--models-dir", action="append", metavar="DIR",
                        help=f"folder of model folders (repeatable; default {DEFAULT_MODELS_DIR})")
    parser.add_argument("--data-dir", action="append", metavar="DIR",
                        help=f"folder of datasets (repeatable; default {DEFAULT_DATA_DIR})")
    parser.add_argument("--rewards-dir", action="append", metavar="DIR",
                        help=f"folder of GRPO reward functions (Python files; repeatable; default "
                             f"{DEFAULT_REWARDS_DIR}): the only place the console runs reward code from")
    parser.add_argument("--runs-dir", default=str(DEFAULT_RUNS_DIR), metavar="DIR",
                        help="folder holding one sub-folder per run")
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument("--auth", action="append", metavar="USER:PASS", help="login (repeatable)")
    auth.add_argument("--auth-file", metavar="FILE", help="file with one user:password per line")
    parser.add_argument("--admin", action="append", metavar="USER",
                        help="a login that sees and manages every user's runs (repeatable)")
    parser.add_argument("--max-upload-mb", type=float, default=50.0, help="largest dataset upload")
    parser.add_argument("--lang", choices=LANGUAGES, default="en", help="initial language of the labels")
    parser.add_argument("--max-concurrent-runs", type=int, default=None, metavar="N",
                        help="runs training at once; Start queues the others (default: one on the CPU, "
                             "one per free set of GPU/Ascend device ids)")
    parser.add_argument("--cluster-shared-dir", default=None, metavar="DIR",
                        help="a folder every Slurm node sees at the same path; the Train tab offers "
                             "Slurm partitions only when --runs-dir lies under it")
    return parser


def parse_settings(argv: Sequence[str] | None = None) -> Settings:
    """Settings from a command line; raises SettingsError for an unsafe or malformed one."""
    args = _parser().parse_args(argv)
    auth = (read_auth_file(args.auth_file) if args.auth_file
            else tuple(parse_auth(a) for a in args.auth or ()))
    if not 1 <= args.port <= 65535:
        raise SettingsError(f"--port {args.port}: must be in 1..65535")
    if args.max_upload_mb <= 0:
        raise SettingsError(f"--max-upload-mb {args.max_upload_mb:g}: must be > 0")
    if args.max_concurrent_runs is not None and args.max_concurrent_runs < 1:
        raise SettingsError(f"--max-concurrent-runs {args.max_concurrent_runs}: must be >= 1")
    shared = None
    if args.cluster_shared_dir is not None:
        shared = Path(args.cluster_shared_dir).resolve()
        if not shared.is_dir():
            raise SettingsError(f"--cluster-shared-dir {args.cluster_shared_dir}: not a folder")
    settings = Settings(
        host=args.host, port=args.port,
        models_dirs=tuple(Path(d).resolve() for d in args.models_dir or [DEFAULT_MODELS_DIR]),
        data_dirs=tuple(Path(d).resolve() for d in args.data_dir or [DEFAULT_DATA_DIR]),
        runs_dir=Path(args.runs_dir).resolve(), auth=auth, admins=tuple(args.admin or ()),
        share=share_requested(), max_upload_mb=args.max_upload_mb, lang=args.lang,
        max_concurrent_runs=args.max_concurrent_runs, cluster_shared_dir=shared,
        rewards_dirs=tuple(Path(d).resolve() for d in args.rewards_dir or [DEFAULT_REWARDS_DIR]))
    check_safe(settings)
    return settings


def share_requested(environ: dict[str, str] | None = None) -> bool:
    """Whether the environment asks Gradio for a public share link (GRADIO_SHARE=True), which
    Gradio would otherwise honour on its own."""
    return (environ if environ is not None else os.environ).get("GRADIO_SHARE", "").strip().lower() == "true"


def check_safe(settings: Settings) -> None:
    """Refuse to listen beyond this machine, or through a public share link, without a login;
    refuse an --admin that is not one of the logins."""
    users = {user for user, _ in settings.auth}
    unknown = [name for name in settings.admins if name not in users]
    if unknown:
        raise SettingsError(f"--admin {unknown[0]}: not one of the logins given with --auth/--auth-file"
                            + (f" ({', '.join(sorted(users))})" if users else " (there are none)"))
    if (settings.share or share_requested()) and not settings.auth:
        raise SettingsError(
            "refusing to open a public share link (GRADIO_SHARE=True) without a login: anyone with "
            "the link could start processes and download checkpoints. Unset GRADIO_SHARE, or add "
            "--auth user:password.")
    if not is_loopback(settings.host) and not settings.auth:
        raise SettingsError(
            f"refusing to listen on {settings.host} without a login: anyone who can reach this "
            "machine could start processes and download checkpoints. Add --auth user:password "
            "(or --auth-file FILE), or keep the default --host 127.0.0.1 and use an SSH tunnel.")
