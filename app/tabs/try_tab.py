"""Try-it tab layout and wiring: one prompt, the base model's and the fine-tuned model's answers."""
from __future__ import annotations

import gradio as gr

from app.tabs import try_callbacks as cb
from app.context import Console
from app.i18n import Labels


def build(console: Console, labels: Labels) -> dict:
    out: dict = {}
    models = [m for m in console.models() if m.loadable]
    with gr.Row():
        out["base"] = labels.bind(gr.Dropdown(choices=[(m.label_in(labels.lang), m.name) for m in models],
                                              value=models[0].name if models else None, elem_id="try-base"),
                                  label="try.base")
        checkpoints = cb.checkpoint_choices(console, console.page_viewer, labels.lang)
        first = checkpoints[0][1] if checkpoints else None
        out["checkpoint"] = labels.bind(gr.Dropdown(choices=checkpoints, value=first, elem_id="try-checkpoint"),
                                        label="try.checkpoint")
    out["prompt"] = labels.bind(gr.Textbox(lines=4, elem_id="try-prompt"), label="try.prompt")
    with gr.Row():
        out["chat"] = labels.bind(gr.Checkbox(value=True, elem_id="try-chat"), label="try.chat")
        out["max_new_tokens"] = labels.bind(gr.Slider(1, 256, value=32, step=1, elem_id="try-max-new-tokens"),
                                            label="try.max_new_tokens")
        out["generate"] = labels.bind(gr.Button(variant="primary", elem_id="try-generate"), value="try.generate")
    with gr.Row():
        out["base_out"] = labels.bind(gr.Textbox(lines=8, interactive=False, elem_id="try-base-output"),
                                      label="try.base_out")
        out["tuned_out"] = labels.bind(gr.Textbox(lines=8, interactive=False, elem_id="try-tuned-output"),
                                       label="try.tuned_out")

    def generate(base: str, checkpoint: str, prompt: str, chat: bool, max_new_tokens: float, language: str,
                 request: gr.Request):
        left, right = cb.compare(console, base, checkpoint, prompt, chat, int(max_new_tokens),
                                 viewer=console.viewer(request))
        return left.shown(language), right.shown(language)

    def choices(language: str, request: gr.Request):
        return gr.update(choices=cb.checkpoint_choices(console, console.viewer(request), language))

    def refresh(current: str | None, language: str, request: gr.Request):
        choices, value = cb.checkpoint_picker(console, console.viewer(request), current, language)
        return gr.update(choices=choices, value=value)

    def in_language(base: str | None, current: str | None, language: str, request: gr.Request):
        models = [m for m in console.models() if m.loadable]
        return (gr.update(choices=[(m.label_in(language), m.name) for m in models], value=base),
                refresh(current, language, request))

    out["generate"].click(generate, [out["base"], out["checkpoint"], out["prompt"], out["chat"],
                                     out["max_new_tokens"], labels.toggle], [out["base_out"], out["tuned_out"]],
                          concurrency_limit=2, api_visibility="private")
    out["checkpoint"].focus(choices, labels.toggle, out["checkpoint"],
                            show_progress="hidden", api_visibility="private")
    # the page load and the tab's selection (app/server.py) list the checkpoints with their runs' states now
    out["refresh"] = (refresh, [out["checkpoint"], labels.toggle], out["checkpoint"])
    labels.toggle.change(in_language, [out["base"], out["checkpoint"], labels.toggle], [out["base"], out["checkpoint"]],
                         show_progress="hidden", api_visibility="private")
    return out
