"""The middleware that puts status_timer.js at the top of the console page's <head>."""
from __future__ import annotations

import asyncio
import threading

from app.tabs.early_script import EarlyScript

PAGE = b"<!doctype html><html><head><title>x</title><script type=module src=a.js></script></head></html>"


def _app(body: bytes, content_type: bytes, status: int = 200, chunks: int = 1, extra=()):
    async def app(scope, receive, send):
        headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *extra]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        size = -(-len(body) // chunks)
        for i in range(chunks):
            await send({"type": "http.response.body", "body": body[i * size:(i + 1) * size], "more_body": i < chunks - 1})
    return app


def _get(app, method="GET", path="/"):
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request"}

    # in a thread of its own: after the browser test, Playwright's sync API has a loop in this one
    call = EarlyScript(app, "window.early = 1;")({"type": "http", "method": method, "path": path}, receive, send)
    thread = threading.Thread(target=asyncio.run, args=(call,))
    thread.start()
    thread.join()
    headers = dict(sent[0]["headers"])
    return sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])


def test_script_goes_first_in_head_and_length_is_updated():
    status, headers, body = _get(_app(PAGE, b"text/html; charset=utf-8", chunks=3))
    assert status == 200
    assert body == PAGE.replace(b"<head>", b"<head><script>window.early = 1;</script>", 1)
    assert body.index(b"window.early") < body.index(b"type=module")
    assert headers[b"content-length"] == str(len(body)).encode()


def test_other_answers_pass_through_unchanged():
    html = _app(PAGE, b"text/html")
    for app, method, path in [(_app(PAGE, b"application/json"), "GET", "/"),
                              (_app(PAGE, b"text/html", status=404), "GET", "/"), (html, "POST", "/"),
                              (_app(PAGE, b"text/html", extra=[(b"content-encoding", b"gzip")]), "GET", "/"),
                              (html, "GET", "/gradio_api/file=runs/report.html")]:
        _, headers, body = _get(app, method, path)
        assert body == PAGE and headers[b"content-length"] == str(len(PAGE)).encode()
