"""python -m core.serve (issue 39): an OpenAI-compatible endpoint for a checkpoint, called through the
official `openai` client as an application would, answering what core.engine.generate answers."""
from __future__ import annotations

import threading
import time

import pytest

from core.engine.generate import SamplingSettings, generate
from core.serve import Answer, Served, make_server

from tests import skips
from tests.core.gguf_fixtures import fake_lora_run

openai = skips.module("openai")  # requirements-dev.txt: the client applications use
httpx = skips.module("httpx")

MESSAGES = [{"role": "user", "content": "Which word is number 2?\nkite ball boat"}]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    run = fake_lora_run(tmp_path_factory.mktemp("serve"))
    return Served.load(str(run / "checkpoints" / "best"))


@pytest.fixture(scope="module")
def endpoint(served):
    server = make_server(served, "127.0.0.1", 0, auth="ann:secret")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture
def client(endpoint):
    return openai.OpenAI(base_url=endpoint, api_key="ann:secret", max_retries=0)


def _ours(served, prompt: list[int], max_tokens: int) -> str:
    tokens = generate(served.model, [prompt], SamplingSettings(max_new_tokens=max_tokens), served.eos,
                      served.tokenizer.pad_token_id or 0)[0]
    return served.tokenizer.decode(tokens)


def test_chat_answers_what_the_engine_answers_streamed_or_not(served, client):
    assert [m.id for m in client.models.list()] == ["fake-run"]
    prompt = served.tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True)
    expected = _ours(served, prompt, 12)
    reply = client.chat.completions.create(model="fake-run", messages=MESSAGES, temperature=0, max_tokens=12)
    assert reply.choices[0].message.role == "assistant" and reply.choices[0].message.content == expected
    assert reply.usage.prompt_tokens == len(prompt) and reply.choices[0].finish_reason in ("stop", "length")
    assert reply.usage.completion_tokens == len(served.tokenizer.encode(expected, add_special_tokens=False)) or \
        reply.choices[0].finish_reason == "length"
    start = time.perf_counter()
    first, pieces, reasons = None, [], []
    for chunk in client.chat.completions.create(model="fake-run", messages=MESSAGES, temperature=0, max_tokens=12,
                                                stream=True):
        delta = chunk.choices[0].delta
        if delta.content:
            first = first or time.perf_counter() - start
            pieces.append(delta.content)
        reasons.append(chunk.choices[0].finish_reason)
    assert "".join(pieces) == expected and reasons[-1] == reply.choices[0].finish_reason
    print(f"\nfirst streamed piece after {first * 1000:.0f} ms" if first else "\nno text")


def test_completions_continue_the_plain_prompt(served, client):
    text = "Which word is number 1? apple pear plum"
    expected = _ours(served, served.tokenizer.encode(text), 6)
    reply = client.completions.create(model="fake-run", prompt=text, temperature=0, max_tokens=6)
    assert reply.choices[0].text == expected
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="fake-run", prompt=text, temperature=0, max_tokens=6, stream=True))
    assert streamed == expected


def test_errors_are_openai_errors_with_a_clear_message(client, endpoint):
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert err.value.body["message"] == "model 'gpt-4o' is not served here; this endpoint serves 'fake-run'"
    assert err.value.body["code"] == "model_not_found" and err.value.body["param"] == "model"
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="fake-run", messages=[{"role": "user", "content": "kite " * 200}],
                                       max_tokens=8)
    assert err.value.body["code"] == "context_length_exceeded"
    assert "more are asked for; the model reads 128 at most" in err.value.body["message"]
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=endpoint, api_key="ann:wrong", max_retries=0).models.list()
    raw = httpx.post(f"{endpoint}/chat/completions", content=b'{"model": "fake-run", "messages": [',
                     headers={"Authorization": "Bearer ann:secret", "Content-Type": "application/json"})
    assert raw.status_code == 400 and raw.json()["error"]["message"].startswith("the request body is not valid JSON")
    raw = httpx.post(f"{endpoint}/chat/completions", json={"model": "fake-run", "messages": MESSAGES,
                                                           "temperature": "hot"},
                     headers={"Authorization": "Bearer ann:secret"})
    assert raw.status_code == 400 and raw.json()["error"]["param"] == "temperature"


def test_other_machines_are_served_only_with_a_login(served):
    with pytest.raises(ValueError, match="without a login"):
        make_server(served, "0.0.0.0", 0)


def test_a_stop_string_ends_the_answer_and_is_never_streamed(served):
    answer = Answer(served.tokenizer, ["ball"])
    ids = served.tokenizer.encode("kite bal", add_special_tokens=False)
    assert not answer.add(ids) and answer.take() == "kite "  # "bal" may still become the stop string
    more = served.tokenizer.encode("kite ball boat", add_special_tokens=False)
    assert answer.add(more) and answer.text == "kite " and answer.take(final=True) == ""
