"""Example GRPO reward functions (grpo.rewards: {function: file, path: rewards/examples.py, name: ...}).

Each has TRL's signature: `prompts` are the prompts as the chat template rendered them, `completions`
the generated texts, and every column of the data a keyword argument with one value per completion.
Each returns one float per completion. The console runs reward code only from its --rewards-dir
folders (this one by default).
"""
import re


def one_word(prompts, completions, **columns):
    """1.0 for a completion that is a single word (the demo task's answers), else 0.0."""
    return [1.0 if re.fullmatch(r"\s*\w+\s*", text) else 0.0 for text in completions]


def answer_in_prompt(prompts, completions, **columns):
    """0.5 when the completion is a word the prompt contains (a story's name, colour or place), else 0."""
    return [0.5 if text.strip() and re.search(rf"\b{re.escape(text.strip())}\b", prompt) else 0.0
            for prompt, text in zip(prompts, completions)]
