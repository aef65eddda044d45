"""Core's messages: the OpenAI-compatible server (core.serve).

Each id has its English and its 中文 side by side, and the kind of each parameter that is
not plain text (core.spec.catalogue.entry.KINDS)."""
from __future__ import annotations

from core.spec.catalogue.entry import Entry

MESSAGES: dict[str, Entry] = {
    # the endpoint (core.engine.serve): OpenAI-style error bodies and the console's Serve action
    "serve.unknown_model": Entry(
        "model {model} is not served here; this endpoint serves {served}",
        "这里不提供模型 {model}；此端点提供 {served}"),
    "serve.too_long": Entry(
        "the prompt is {tokens} tokens and {max_new_tokens} more are asked for; the model reads {limit} at most",
        "提示有 {tokens} 个词元，又要求再生成 {max_new_tokens} 个；该模型最多读取 {limit} 个"),
    "serve.bad_json": Entry("the request body is not valid JSON: {error}", "请求体不是有效的 JSON：{error}"),
    "serve.bad_field": Entry("request field {field}: {error}", "请求字段 {field}：{error}"),
    "serve.no_messages": Entry(
        "messages: give at least one message with a role and a string content",
        "'messages'：请至少给出一条带 'role' 和字符串 'content' 的消息"),
    "serve.no_login_public": Entry(
        "--host {host} would serve the model to other machines without a login; add --auth user:password (clients "
        "send it as their API key) or serve on 127.0.0.1",
        "--host {host} 会在没有登录的情况下把模型提供给其他机器；请加上 '--auth user:password'（客户端把它作为 API 密钥发送），或在 127.0.0.1 上提供服务"),
    "serve.unauthorized": Entry(
        "this endpoint needs a login: send the user:password it was started with (--auth) as the API key",
        "此端点需要登录：请把启动时给出的 'user:password'（--auth）作为 API 密钥发送"),
    "serve.bad_auth": Entry("--auth {value}: give user:password", "--auth {value}：请给出 'user:password'"),
}
