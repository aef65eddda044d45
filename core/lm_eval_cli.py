"""lm-eval's own command line with mindtune's model registered: `--model mindtune` works there.

    python -m core.lm_eval_cli run --model mindtune --model_args pretrained=models/tiny-demo \\
        --tasks demo_story_mc --include_path data/eval_tasks --output_path out/

Everything after the module name is lm-eval's CLI (`lm-eval run|ls|validate ...`, the legacy form
without `run` too). Why a wrapper: lm-eval 0.4.13 finds models only in its own table
(`lm_eval.models.MODEL_MAPPING`) or among classes already imported with `@register_model`; it reads
no entry points, and this repository is not an installed package that could declare one. So the
plain `lm_eval --model mindtune` cannot know the model; this module imports core.engine.lm_eval_model
(which registers `mindtune`) and then hands the arguments to lm-eval's `HarnessCLI`.
`pretrained` takes what `python -m core.evaluate --model` takes: a model folder, a training
checkpoint, a run folder or an export. lm-eval's CLI reads a task's relative `data_files` from the
working directory (core.evaluate resolves them against the YAML's folder instead).
"""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from core.eval.eval_tasks import EvalError, require_lm_eval
    try:
        require_lm_eval()
    except EvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from core.evaluate import go_offline
    from core.engine.generate import use_device
    go_offline()  # no hub at run time, as core.evaluate
    import core.engine.lm_eval_model  # noqa: F401  (registers "mindtune")
    from lm_eval.__main__ import cli_evaluate
    use_device("cpu")
    sys.argv = ["lm-eval", *(sys.argv[1:] if argv is None else argv)]
    cli_evaluate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
