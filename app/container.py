"""`python -m app.container`: the Docker image's entry point (issue 31 item 7).

`python -m app` listens on 127.0.0.1, which inside a container is the container's own loopback:
the port `docker run -p 7860:7860` publishes reached nothing. In the image the console listens on
every interface of the container, so it needs a login, as on a host (app.settings.check_safe
refuses to start without one):

- a file of `user:password` lines mounted as a secret at /run/secrets/mindtune_auth (or the path
  in MINDTUNE_AUTH_FILE), or
- one `user:password` in the environment variable MINDTUNE_AUTH.

What outlives the container lies on volumes under /data (MINDTUNE_VOLUMES to move it): runs/ (the
runs), uploads/ (uploaded datasets and saved configs, which the console keeps beside runs/),
models/ (more model folders) and datasets/ (more datasets); the shipped demo model and data stay
on offer. Arguments after the image name go to `python -m app` (`--lang zh`, `--admin alice`).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping, Sequence

from core.run.launcher import REPO_ROOT

VOLUMES = "/data"
SECRET = "/run/secrets/mindtune_auth"
PORT = 7860


def volume_dirs(environ: Mapping[str, str]) -> dict[str, Path]:
    """The folders the image keeps on volumes: runs, uploads (beside runs, see Settings.uploads_dir),
    models and datasets."""
    root = Path(environ.get("MINDTUNE_VOLUMES") or VOLUMES)
    return {name: root / name for name in ("runs", "uploads", "models", "datasets")}


def console_argv(environ: Mapping[str, str], extra: Sequence[str] = ()) -> list[str]:
    """The `python -m app` arguments of the container: every interface, the volumes, the login
    from the secret file or MINDTUNE_AUTH (none when neither is there: the console then refuses
    to start, naming both), then `extra`."""
    dirs = volume_dirs(environ)
    argv = ["--host", "0.0.0.0", "--port", str(PORT), "--runs-dir", str(dirs["runs"]),
            "--models-dir", str(REPO_ROOT / "models"), "--models-dir", str(dirs["models"]),
            "--data-dir", str(REPO_ROOT / "data"), "--data-dir", str(dirs["datasets"])]
    secret = environ.get("MINDTUNE_AUTH_FILE") or SECRET
    if Path(secret).is_file():
        argv += ["--auth-file", secret]
    elif environ.get("MINDTUNE_AUTH"):
        argv += ["--auth", environ["MINDTUNE_AUTH"]]
    return [*argv, *extra]


NO_LOGIN = ("mindtune: the container listens on all its interfaces and needs a login: mount a file "
            "of user:password lines as the secret {secret} (docker run -v ./auth:{secret}:ro, or a "
            "compose/swarm secret named mindtune_auth), or set MINDTUNE_AUTH=user:password")


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    environ = os.environ if environ is None else environ
    args = console_argv(environ, sys.argv[1:] if argv is None else argv)
    if "--auth" not in args and "--auth-file" not in args:
        print(NO_LOGIN.format(secret=environ.get("MINDTUNE_AUTH_FILE") or SECRET), file=sys.stderr)
        return 2
    for folder in volume_dirs(environ).values():
        folder.mkdir(parents=True, exist_ok=True)
    from app.__main__ import main as console_main

    return console_main(args)


if __name__ == "__main__":
    sys.exit(main())
