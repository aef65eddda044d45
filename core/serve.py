"""An OpenAI-compatible endpoint for a trained checkpoint:

    python -m core.serve --checkpoint runs/<id>/checkpoints/best [--host 127.0.0.1] [--port 8000]
                         [--name NAME] [--auth user:password]

answers `GET /v1/models`, `POST /v1/chat/completions` (through the model's chat template) and
`POST /v1/completions`, each streamed (server-sent events, `stream: true`) or not, so an application
written for OpenAI's API (the `openai` Python client with `base_url=http://127.0.0.1:8000/v1`) talks to
the fine-tuned model. The model is the checkpoint's base with the adapter merged, generating on the
fused inference kernel (core.engine.generate, as the Try tab); one request generates at a time.

Bound to 127.0.0.1 unless a login is given (`--auth user:password`, sent by clients as their API key),
like the console. Errors are OpenAI's JSON (`{"error": {"message", "type", "param", "code"}}`): a model
name that is not served (404), a prompt that with max_tokens is longer than the model reads, a body
that is not JSON or a field of the wrong type (400), a missing or wrong key (401).

The standard library's threading HTTP server: no web framework, nothing a request could reach but
these routes.
"""
from __future__ import annotations

import argparse
import hmac
import json
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from core.data.tokenizer import Tokenizer, TokenizerError
from core.engine.export import load_trained_model
from core.engine.fused import enable as enable_fused_kernels
from core.engine.generate import GenerateError, SamplingSettings, generate, use_device
from core.engine.lora import merge_lora
from core.run.launcher import is_loopback
from core.spec.errors import RECORDS_ENV, SERVING_MARK, CheckpointError, report
from core.spec.messages import Message

DEFAULT_MAX_TOKENS = 256  # /v1/completions without max_tokens (OpenAI's is 16; chat: what the context leaves)
MAX_BODY_BYTES = 4 << 20


class RequestError(Exception):
    """A request answered with an OpenAI-style error body."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.param, self.code, self.kind = status, param, code, kind

    def body(self) -> dict:
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.code}}


# ---- the model ------------------------------------------------------------------------------------

@dataclass
class Served:
    """The one model this endpoint serves."""
    name: str
    model: object
    tokenizer: Tokenizer
    eos: set[int]
    lock: threading.Lock

    @classmethod
    def load(cls, checkpoint: str, name: str | None = None) -> "Served":
        model, state = load_trained_model(checkpoint)
        if state["method"] == "lora":
            merge_lora(model)
        enable_fused_kernels(model)
        tokenizer = Tokenizer.from_dir(state["base_model"]["path"])
        eos = set(tokenizer.eos_token_ids) | set(model.args.eos_token_ids)
        return cls(name or default_name(checkpoint), model, tokenizer, eos, threading.Lock())

    @property
    def context(self) -> int:
        return self.model.args.max_position_embeddings


def default_name(checkpoint: str) -> str:
    """runs/<id>/checkpoints/best -> <id>; any other folder: its name."""
    path = Path(checkpoint)
    return path.parent.parent.name if path.parent.name == "checkpoints" else path.name


# ---- a request's fields ---------------------------------------------------------------------------

def _field(body: dict, name: str, kind, default=None, check=None):
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        expected = getattr(kind, "__name__", None) or " or ".join(k.__name__ for k in kind)
        raise RequestError(400, Message("serve.bad_field", field=name, error=f"expected {expected}, got "
                                        f"{type(value).__name__}"), param=name)
    if check is not None and not check(value):
        raise RequestError(400, Message("serve.bad_field", field=name, error=f"{value!r} is out of range"), param=name)
    return value


@dataclass
class Ask:
    """What to generate: prompt tokens, sampling settings, stop strings, whether to stream."""
    prompt: list[int]
    settings: SamplingSettings
    stop: list[str]
    stream: bool


def read_ask(body: dict, served: Served, chat: bool) -> Ask:
    model = body.get("model")
    if model is not None and model != served.name:
        raise RequestError(404, Message("serve.unknown_model", model=repr(model), served=repr(served.name)),
                           param="model", code="model_not_found")
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in messages):
            raise RequestError(400, Message("serve.no_messages"), param="messages")
        try:
            prompt = served.tokenizer.apply_chat_template([{"role": m["role"], "content": m["content"]}
                                                           for m in messages], add_generation_prompt=True,
                                                          tokenize=True)
        except (TokenizerError, ValueError) as err:
            raise RequestError(400, Message("serve.bad_field", field="messages", error=str(err)),
                               param="messages") from err
    else:
        text = body.get("prompt")
        if isinstance(text, list) and len(text) == 1 and isinstance(text[0], str):
            text = text[0]
        if not isinstance(text, str) or not text:
            raise RequestError(400, Message("serve.bad_field", field="prompt", error="expected a non-empty string"),
                               param="prompt")
        prompt = served.tokenizer.encode(text)
    limit = served.context
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is None:
        max_tokens = limit - len(prompt) if chat else min(DEFAULT_MAX_TOKENS, limit - len(prompt))
        max_tokens = max(max_tokens, 1)
    max_tokens = _field({"max_tokens": max_tokens}, "max_tokens", int, check=lambda v: v >= 1)
    if len(prompt) + max_tokens > limit:
        raise RequestError(400, Message("serve.too_long", tokens=len(prompt), max_new_tokens=max_tokens, limit=limit),
                           param="max_tokens" if len(prompt) < limit else "messages" if chat else "prompt",
                           code="context_length_exceeded")
    temperature = float(_field(body, "temperature", (int, float), 1.0, lambda v: 0 <= v <= 2))
    top_p = float(_field(body, "top_p", (int, float), 1.0, lambda v: 0 < v <= 1))
    seed = _field(body, "seed", int)
    _field(body, "n", int, 1, lambda v: v == 1)
    stop = body.get("stop")
    stop = [stop] if isinstance(stop, str) else stop or []
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise RequestError(400, Message("serve.bad_field", field="stop", error="expected a string or a list of strings"),
                           param="stop")
    return Ask(prompt, SamplingSettings(max_tokens, temperature, top_p, seed), stop,
               bool(_field(body, "stream", bool, False)))


# ---- generating ------------------------------------------------------------------------------------

class Answer:
    """The text of the tokens generated so far, handed out in pieces as it grows (`take`), cut at a stop
    string; `finish_reason` once it is over."""

    def __init__(self, tokenizer: Tokenizer, stop: list[str]):
        self.tokenizer, self.stop = tokenizer, stop
        self.tokens: list[int] = []
        self.given = 0  # characters already handed out
        self.stopped = False
        self.text = ""

    def add(self, tokens: list[int]) -> bool:
        """The generator's new token list; True when a stop string ended it."""
        self.tokens = list(tokens)
        text = self.tokenizer.decode(self.tokens)
        for word in self.stop:
            at = text.find(word)
            if at >= 0:
                self.text, self.stopped = text[:at], True
                return True
        self.text = text
        return False

    def take(self, final: bool = False) -> str:
        """The text not handed out yet; an incomplete character (a byte-level token's half) waits,
        and so does a tail that may still become a stop string."""
        text = self.text
        if not final:
            if text.endswith("\ufffd"):
                text = text.rstrip("\ufffd")
            hold = max((len(w) - 1 for w in self.stop), default=0)
            text = text[: max(len(text) - hold, self.given)] if hold else text
        piece, self.given = text[self.given:], max(self.given, len(text))
        return piece


def run_generation(served: Served, ask: Ask, on_piece=None) -> tuple[Answer, str]:
    """Generate for `ask`; `on_piece(text)` is called as text becomes final (streaming). Returns the
    answer and OpenAI's finish_reason."""
    answer = Answer(served.tokenizer, ask.stop)

    def stop(tokens):
        ended = answer.add(tokens)
        if on_piece is not None:
            piece = answer.take()
            if piece:
                on_piece(piece)
        return ended

    with served.lock:
        tokens = generate(served.model, [ask.prompt], ask.settings, served.eos,
                          served.tokenizer.pad_token_id or 0, stop=stop)[0]
    answer.add(tokens)
    length = len(tokens) >= ask.settings.max_new_tokens and not answer.stopped
    return answer, "length" if length else "stop"


# ---- HTTP -------------------------------------------------------------------------------------------

def _chat_body(served, ask, answer, reason, rid, created) -> dict:
    return {"id": rid, "object": "chat.completion", "created": created, "model": served.name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.text},
                         "finish_reason": reason, "logprobs": None}],
            "usage": _usage(ask, answer)}


def _completion_body(served, ask, answer, reason, rid, created) -> dict:
    return {"id": rid, "object": "text_completion", "created": created, "model": served.name,
            "choices": [{"index": 0, "text": answer.text, "finish_reason": reason, "logprobs": None}],
            "usage": _usage(ask, answer)}


def _usage(ask: Ask, answer: Answer) -> dict:
    return {"prompt_tokens": len(ask.prompt), "completion_tokens": len(answer.tokens),
            "total_tokens": len(ask.prompt) + len(answer.tokens)}


def _chunk(served, rid, created, chat: bool, piece: str | None, reason: str | None, role: bool = False) -> dict:
    if chat:
        delta = ({"role": "assistant", "content": ""} if role else {} if piece is None else {"content": piece})
        return {"id": rid, "object": "chat.completion.chunk", "created": created, "model": served.name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": reason, "logprobs": None}]}
    return {"id": rid, "object": "text_completion", "created": created, "model": served.name,
            "choices": [{"index": 0, "text": piece or "", "finish_reason": reason, "logprobs": None}]}


def make_handler(served: Served, api_key: str | None):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "mindtune"

        def log_message(self, fmt, *args):  # one line per request on stderr, as http.server does
            sys.stderr.write(f"{self.address_string()} {fmt % args}\n")

        def _send_json(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if api_key is None:
                return True
            given = self.headers.get("Authorization", "")
            return hmac.compare_digest(given.removeprefix("Bearer ").strip().encode(), api_key.encode())

        def _guard(self) -> bool:
            if self._authorized():
                return True
            self._send_json(401, RequestError(401, Message("serve.unauthorized"), code="invalid_api_key",
                                              kind="authentication_error").body())
            return False

        def do_GET(self):
            if not self._guard():
                return
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send_json(200, {"object": "list", "data": [
                    {"id": served.name, "object": "model", "created": 0, "owned_by": "mindtune"}]})
            elif self.path.rstrip("/").startswith("/v1/models/"):
                name = self.path.rstrip("/").split("/v1/models/", 1)[1]
                if name == served.name:
                    self._send_json(200, {"id": served.name, "object": "model", "created": 0, "owned_by": "mindtune"})
                else:
                    self._send_json(404, RequestError(404, Message("serve.unknown_model", model=repr(name),
                                                                   served=repr(served.name)), param="model",
                                                      code="model_not_found").body())
            else:
                self._send_json(404, RequestError(404, f"no route {self.path}", code="not_found").body())

        def do_POST(self):
            if not self._guard():
                return
            route = self.path.rstrip("/")
            if route not in ("/v1/chat/completions", "/v1/completions"):
                self._send_json(404, RequestError(404, f"no route {self.path}", code="not_found").body())
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY_BYTES:
                    raise RequestError(413, Message("serve.bad_json", error=f"{length} bytes is over the "
                                                    f"{MAX_BODY_BYTES}-byte limit"))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError) as err:
                    raise RequestError(400, Message("serve.bad_json", error=str(err))) from err
                if not isinstance(body, dict):
                    raise RequestError(400, Message("serve.bad_json", error="expected a JSON object"))
                chat = route.endswith("chat/completions")
                ask = read_ask(body, served, chat)
            except RequestError as err:
                self._send_json(err.status, err.body())
                return
            except (GenerateError, ValueError) as err:
                self._send_json(400, RequestError(400, str(err)).body())
                return
            prefix = "chatcmpl" if chat else "cmpl"
            rid, created = f"{prefix}-{uuid.uuid4().hex[:24]}", int(time.time())
            if ask.stream:
                self._stream(ask, chat, rid, created)
                return
            answer, reason = run_generation(served, ask)
            make = _chat_body if chat else _completion_body
            self._send_json(200, make(served, ask, answer, reason, rid, created))

        def _event(self, payload) -> None:
            data = payload if isinstance(payload, str) else json.dumps(payload)
            self.wfile.write(f"data: {data}\n\n".encode("utf-8"))
            self.wfile.flush()

        def _stream(self, ask: Ask, chat: bool, rid: str, created: int) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                if chat:
                    self._event(_chunk(served, rid, created, chat, None, None, role=True))
                answer, reason = run_generation(
                    served, ask, lambda piece: self._event(_chunk(served, rid, created, chat, piece, None)))
                rest = answer.take(final=True)
                if rest:
                    self._event(_chunk(served, rid, created, chat, rest, None))
                self._event(_chunk(served, rid, created, chat, None, reason))
                self._event("[DONE]")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client went away: generation ended with its stream

    return Handler


def make_server(served: Served, host: str = "127.0.0.1", port: int = 8000, auth: str | None = None) -> ThreadingHTTPServer:
    if auth is not None and (":" not in auth or auth.startswith(":") or auth.endswith(":")):
        raise ValueError(Message("serve.bad_auth", value=repr(auth)))
    if not is_loopback(host) and not auth:
        raise ValueError(Message("serve.no_login_public", host=host))
    server = ThreadingHTTPServer((host, port), make_handler(served, auth))
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.serve", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, help="runs/<id>/checkpoints/best (or last, step-N)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (others need --auth)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--name", default=None, help="the model's name in the API (default: the run id)")
    parser.add_argument("--auth", default=None, metavar="USER:PASSWORD",
                        help="a login; clients send it as their API key")
    args = parser.parse_args(argv)
    try:
        if args.auth is None and not is_loopback(args.host):
            raise ValueError(Message("serve.no_login_public", host=args.host))
        served = Served.load(args.checkpoint, args.name)
        server = make_server(served, args.host, args.port, args.auth)
    except (CheckpointError, TokenizerError, ValueError, OSError) as exc:
        report(exc)
        return 2
    host, port = server.server_address[:2]
    print(f"serving {served.name} at http://{host}:{port}/v1 (OpenAI-compatible; Ctrl-C stops)", flush=True)
    if os.environ.get(RECORDS_ENV):  # the console's Serve action reads where, not the English above
        print(SERVING_MARK + json.dumps({"name": served.name, "url": f"http://{host}:{port}/v1"}), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    use_device("cpu")
    sys.exit(main())
