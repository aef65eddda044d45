"""Who may see which run, and the two HTTP guards in front of every request.

Without logins the console is single-user (it listens on loopback only, app/settings.py): the one
user sees everything. With logins (`--auth`), each run records its owner (the user who started it)
in status.json, and a user sees, stops, resumes, deletes and downloads only their own runs, their
files included; an `--admin` user sees every run. A run with no owner (started from a shell) is an
admin's. With a single login and no `--admin`, that login is the admin: there is no one to keep
apart.

Two ASGI middlewares guard the HTTP side, whatever the route:
- `OriginGuard` rejects a request whose `Origin` is not the console's own (a page elsewhere, even
  another one on localhost, must not drive the console or read its answers), and, on a loopback
  console, one whose `Host` is not a loopback name (DNS rebinding).
- `RunFilesGuard` checks Gradio's file route (`/gradio_api/file=...`): a file inside the runs folder
  is served only to a user who may see its run.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit

from core.run.records import RunDirError, Status
from core.run.rundir import RunDir

from app.settings import Settings
from core.run.launcher import is_loopback


@dataclass(frozen=True)
class Viewer:
    """The user behind one request. `user` is None on a console without logins."""
    user: str | None
    admin: bool

    def may_see(self, status: Status) -> bool:
        """Whether this user may see (and act on) a run with this status."""
        if self.admin:
            return True
        return bool(self.user) and status.owner == self.user

    @property
    def owner(self) -> str | None:
        """What a run this user starts records as its owner."""
        return self.user


SINGLE_USER = Viewer(None, True)
NOBODY = Viewer("", False)  # a request whose login cannot be established: sees nothing


def admins(settings: Settings) -> frozenset[str]:
    if settings.admins:
        return frozenset(settings.admins)
    return frozenset(user for user, _ in settings.auth) if len(settings.auth) == 1 else frozenset()


def viewer_for(settings: Settings, request: Any) -> Viewer:
    """The viewer of a Gradio event (gr.Request) or a raw Starlette request (server functions and
    middlewares get those): who is logged in, and whether they are an admin."""
    if not settings.auth:
        return SINGLE_USER
    user = getattr(request, "username", None) if request is not None else None
    if user is None and request is not None:
        user = user_from_cookies(getattr(request, "app", None), getattr(request, "cookies", None) or {})
    if not user:
        return NOBODY
    return Viewer(user, user in admins(settings))


def user_from_cookies(app: Any, cookies: Mapping[str, str]) -> str | None:
    """The logged-in user of a request, as Gradio's own login check finds it (its login cookie
    mapped through the app's token table)."""
    tokens, cookie_id = getattr(app, "tokens", None), getattr(app, "cookie_id", None)
    if not isinstance(tokens, dict) or cookie_id is None:
        return None
    token = cookies.get(f"access-token-{cookie_id}") or cookies.get(f"access-token-unsecure-{cookie_id}")
    return tokens.get(token) if token else None


def read_owner(run_path: str | os.PathLike) -> Status:
    """The run's status, for access checks (an empty one, owned by nobody, when unreadable)."""
    try:
        return RunDir(run_path).read_status()
    except (RunDirError, OSError):
        return Status()


def visible(viewer: Viewer, summaries: Iterable) -> list:
    """The runs (RunSummary rows) this viewer may see."""
    return [s for s in summaries if viewer.may_see(s.status)]


# ---- HTTP guards ----------------------------------------------------------------------------

def _header(scope: Mapping, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _host_name(host: str) -> str:
    """'localhost:7860' -> 'localhost', '[::1]:7860' -> '::1'."""
    return urlsplit(f"//{host}").hostname or ""


async def _refuse(send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class OriginGuard:
    """Refuse cross-origin requests (any method, websockets too) and, on loopback, foreign Hosts."""

    def __init__(self, app, loopback: bool):
        self.app, self.loopback = app, loopback

    def problem(self, scope: Mapping) -> str | None:
        host = _header(scope, b"host") or ""
        if self.loopback and host and not is_loopback(_host_name(host)):
            return f"Host {host!r} is not this console's (it listens on loopback only)"
        origin = _header(scope, b"origin")
        if origin is None:
            return None  # not sent by a browser for a same-origin GET, nor by scripts
        parts = urlsplit(origin)
        if origin == "null" or parts.scheme not in ("http", "https", "ws", "wss") or parts.netloc != host:
            return f"cross-origin request from {origin!r} refused (this console is {host!r})"
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            problem = self.problem(scope)
            if problem is not None:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                await _refuse(send, 403, problem)
                return
        await self.app(scope, receive, send)


FILE_ROUTE_MARKERS = ("/file=",)


class RunFilesGuard:
    """Serve a file inside the runs folder only to a user who may see its run (Gradio's file route
    checks the login and the allowed folders, not who owns what)."""

    def __init__(self, app, settings: Settings):
        self.app, self.settings = app, settings
        self.runs_root = Path(os.path.realpath(settings.runs_dir))

    def run_of(self, path: str) -> Path | None:
        """The run folder (directly under the runs folder) that `path` lies in, else None."""
        real = Path(os.path.realpath(path))
        if real == self.runs_root or self.runs_root not in real.parents:
            return None
        return self.runs_root / real.relative_to(self.runs_root).parts[0]

    def allowed(self, scope: Mapping) -> bool:
        raw = scope.get("path", "")  # already percent-decoded once, as the route sees it
        marker = next((m for m in FILE_ROUTE_MARKERS if m in raw), None)
        if marker is None or not self.settings.auth:
            return True
        target = raw.split(marker, 1)[1]
        if "://" in target:
            return True  # a URL Gradio proxies: not a file of ours
        run = self.run_of(target if os.path.isabs(target) else os.path.join(os.getcwd(), target))
        if run is None:
            return True
        cookies = _cookies(_header(scope, b"cookie") or "")
        user = user_from_cookies(scope.get("app"), cookies)
        viewer = Viewer(user, user in admins(self.settings)) if user else NOBODY
        return viewer.may_see(read_owner(run))

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and not self.allowed(scope):
            await _refuse(send, 404, "file not found")  # the same answer as for a file that is not there
            return
        await self.app(scope, receive, send)


def _cookies(header: str) -> dict[str, str]:
    from http.cookies import SimpleCookie

    jar = SimpleCookie()
    try:
        jar.load(header)
    except Exception:  # noqa: BLE001 — a malformed Cookie header is simply no login
        return {}
    return {key: morsel.value for key, morsel in jar.items()}


def middlewares(settings: Settings) -> list:
    """The `Middleware` entries for Gradio's `app_kwargs`, outermost first."""
    from starlette.middleware import Middleware

    return [Middleware(OriginGuard, loopback=is_loopback(settings.host)),
            Middleware(RunFilesGuard, settings=settings)]
