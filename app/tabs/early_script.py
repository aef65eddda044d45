"""An ASGI middleware that puts a script at the top of the console page's <head>, before Gradio's
module scripts run. Gradio's own `head=` option adds its content from JavaScript after the page has
loaded, too late for `status_timer.js`, which must replace `requestAnimationFrame` before Gradio's
status tracker module keeps a reference to it.

Only the console page itself (GET `/`, a successful, uncompressed HTML answer) is touched; every
other answer (API calls, assets, files Gradio serves) streams through unchanged. A page without
the marker (a future Gradio template) is served as it is."""
from __future__ import annotations

from pathlib import Path

STATUS_TIMER_JS = Path(__file__).with_name("status_timer.js")
MARKER = b"<head>"


class EarlyScript:
    def __init__(self, app, script: str):
        self.app = app
        self.tag = b"<script>" + script.encode("utf-8") + b"</script>"

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "GET" or scope.get("path") != "/":
            await self.app(scope, receive, send)
            return
        start: dict | None = None
        body: list[bytes] = []

        async def patched_send(message):
            nonlocal start
            if message["type"] == "http.response.start":
                headers = {k.lower(): v for k, v in message.get("headers", [])}
                if (message.get("status") == 200 and headers.get(b"content-type", b"").startswith(b"text/html")
                        and b"content-encoding" not in headers):
                    start = message  # hold it: the length changes
                    return
                await send(message)
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            body.append(message.get("body", b""))
            if message.get("more_body"):
                return
            html = b"".join(body).replace(MARKER, MARKER + self.tag, 1)
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(html)).encode("ascii")))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": html, "more_body": False})

        await self.app(scope, receive, patched_send)


def status_timer_middleware():
    """The `Middleware` entry for Gradio's `app_kwargs`."""
    from starlette.middleware import Middleware
    return Middleware(EarlyScript, script=STATUS_TIMER_JS.read_text(encoding="utf-8"))
