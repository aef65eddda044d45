"""What counts as English a 中文 reader would have to read (the browser test's and the message tests'
shared rule)."""
from __future__ import annotations

import re

# Words a 中文 page keeps as they are: names of products, formats and libraries, config values (what
# a user types into the YAML), and units. A run's state is a word of the page's
# language (the badge, the Runs table): not kept.
KEPT_WORDS = {
    "mindtune", "mindspore", "transformer", "hugging", "face", "ascend", "parquet", "arrow", "lora", "full",
    "alpha", "rank", "dropout", "token", "tokens", "worker", "workers", "msrun", "auto", "alpaca", "sharegpt",
    "chat", "text", "null", "english", "micro", "ppl", "zip", "exact", "match", "true", "false", "python",
    "safetensors", "pickle", "transformers", "tokenizers", "jinja", "mixtral",
    # preference objectives and their settings (config values and the papers' names)
    "sft", "dpo", "simpo", "orpo", "kto", "ipo", "sigmoid", "beta", "gamma", "lambda", "chosen", "rejected",
    "preference", "rafailov", "overlong",
    # GRPO (train.objective grpo) and its reward functions' names and keys (config values: grpo.rewards)
    "grpo", "reward", "function", "weight", "math", "regex", "length", "file", "pattern", "column", "name", "path", "run",
    "ignore_case", "max_tokens", "soft_tokens",
    # trackers and their modes, Slurm and its commands
    "tensorboard", "mlflow", "swanlab", "offline", "local", "cloud", "login", "watch", "slurm", "sbatch", "srun",
    "scancel", "scontrol", "sinfo", "squeue", "sacct", "sacctmgr",
    # tensors and functions Chinese ML texts name in English
    "softmax", "logits",
    # device names as the config writes them (parallel.device)
    "cpu", "gpu",
    # a config file's own top-level key: the files it inherits from (`base: demo_lora.yaml`)
    "base",
}
# a library's own words, quoted “…” as it said them (app.i18n._quoted: Python's json and re, PyYAML, jinja2,
# the OS; issue 38: shown as said, never re-read), taken out before the identifiers
LIBRARY_WORDS = re.compile(r"“[^”\n]*”")
ENGLISH_WORD = re.compile(r"[A-Za-z][A-Za-z'’]+")
# identifiers: mappings, quoted values and names (what a user types: 'cosine', 'instruction'; not the
# apostrophe of "model's"), paths,
# config keys, run ids, flags, numbers with units; a path ends at a full-width colon (what follows is read); YAML
# section keys listed in 中文 ('run:、model:')
IDENTIFIER = re.compile(r"\S*\{[^}]*\}|(?<!\w)'[^'\n]*'(?!\w)|[^\s：]*[/_.#=\\][^\s：]*|--\S+|\S*\d\S*|(?<![A-Za-z])[a-z_]+:(?=[、，）…])")


def english_words(text: str) -> list[str]:
    """The English words of `text` a 中文 reader would have to read: not a kept word, not an
    identifier, not an acronym or a CamelCase name (CPU, YAML, AdamW, LlamaForCausalLM)."""
    words = ENGLISH_WORD.findall(IDENTIFIER.sub(" ", LIBRARY_WORDS.sub(" ", text)))
    return [w for w in words if w.lower() not in KEPT_WORDS and not re.search(r"[A-Z]", w[1:])]
