"""Scores of generated answers against their references: exact match, BLEU-4 and ROUGE-1/2/L F1.

BLEU is sacrebleu's corpus BLEU-4 (its defaults: exponential smoothing, case kept) and ROUGE is
rouge-score's F1 averaged over the answers (no stemming), so the figures are the toolkits' own.
What is compared is chosen per answer from its reference text:

- words, for text without Chinese or Japanese characters: sacrebleu's `13a` tokenizer (the
  WMT default) for BLEU, rouge-score's own tokenizer (lowercase, runs of a-z0-9) for ROUGE;
- characters, for a reference with a CJK ideograph or kana (unsegmented text): sacrebleu's `zh`
  tokenizer for BLEU (each CJK character a token, the rest as `13a`), and for ROUGE each CJK
  character a token, the rest as rouge-score's words (rouge-score's own tokenizer drops every
  non-ASCII character, so Chinese would score nothing).

All figures are shares in [0, 1] (BLEU too: sacrebleu's 0-100 score / 100), like exact match.
Imports only core.run.rundir (the metric names); sacrebleu and rouge-score are imported when first used.
The training worker scores in a short-lived process of its own (`score_apart`): rouge-score imports
nltk, which brings scipy and, where installed, scikit-learn and pandas (~140 MB of resident memory
measured) that would otherwise stay in the worker for the rest of the run. That process is
the command line core.generation_metrics.
"""
from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from core.run.records import GENERATION_FIELDS, GenerationFigures
from core.spec.codec import build

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")

# CJK ideographs (with extension A and compatibility ideographs), hiragana, katakana
_UNSEGMENTED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CHAR_TOKENS = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[a-z0-9]+")


@dataclass(frozen=True)
class GenerationScores:
    """One downstream evaluation: each metric over `count` answers, and the segmentation used
    ("words", "characters" or "words+characters" when the references mix both)."""
    exact_match: float
    bleu: float
    rouge1: float
    rouge2: float
    rougeL: float  # noqa: N815 — rouge-score's name
    count: int
    segmentation: str

    def figures(self) -> GenerationFigures:
        """As run records carry them (metrics.jsonl, status.json)."""
        return GenerationFigures(**{name: getattr(self, name) for name in GENERATION_FIELDS},
                                 segmentation=self.segmentation)


def is_unsegmented(text: str) -> bool:
    """True when `text` has a Chinese or Japanese character (scored on characters)."""
    return _UNSEGMENTED.search(text) is not None


class CharacterTokenizer:
    """rouge-score's tokenizer interface (`tokenize(text) -> list[str]`): each CJK character a
    token, every other run lowercased into rouge-score's words (a-z0-9)."""

    def tokenize(self, text: str) -> list[str]:
        return _CHAR_TOKENS.findall(text.lower())


@functools.cache
def _bleu_tools():
    from sacrebleu.metrics import BLEU
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
    from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh
    return BLEU(tokenize="none"), Tokenizer13a(), TokenizerZh()


@functools.cache
def _rouge_scorers():
    from rouge_score.rouge_scorer import RougeScorer
    return (RougeScorer(list(ROUGE_TYPES), use_stemmer=False),
            RougeScorer(list(ROUGE_TYPES), use_stemmer=False, tokenizer=CharacterTokenizer()))


def score_generations(predictions: Sequence[str], references: Sequence[str]) -> GenerationScores | None:
    """Exact match (stripped strings equal), corpus BLEU-4 and mean ROUGE F1 of `predictions`
    against `references` (one each); None when there are none."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    if not references:
        return None
    bleu, words13a, chars_zh = _bleu_tools()
    word_rouge, char_rouge = _rouge_scorers()
    hyps, refs, rouge = [], [], {name: 0.0 for name in ROUGE_TYPES}
    by_chars = [is_unsegmented(r) for r in references]
    for prediction, reference, chars in zip(predictions, references, by_chars):
        tokenize = chars_zh if chars else words13a
        hyps.append(tokenize(prediction.strip()))
        refs.append(tokenize(reference.strip()))
        scores = (char_rouge if chars else word_rouge).score(reference, prediction)
        for name in ROUGE_TYPES:
            rouge[name] += scores[name].fmeasure
    n = len(references)
    exact = sum(p.strip() == r.strip() for p, r in zip(predictions, references)) / n
    segmentation = ("words+characters" if any(by_chars) and not all(by_chars)
                    else "characters" if all(by_chars) else "words")
    return GenerationScores(exact_match=exact, bleu=bleu.corpus_score(hyps, [refs]).score / 100,
                            **{name: total / n for name, total in rouge.items()}, count=n,
                            segmentation=segmentation)


def score_apart(predictions: Sequence[str], references: Sequence[str], timeout_s: float = 600.0
                ) -> GenerationScores | None:
    """`score_generations` in a process of its own (`python -m core.generation_metrics`, JSON in and
    out), so the libraries it imports never join the calling process's memory."""
    if not references:
        return None
    done = subprocess.run([sys.executable, "-m", "core.generation_metrics"], cwd=Path(__file__).resolve().parents[2],
                          input=json.dumps({"predictions": list(predictions), "references": list(references)}),
                          capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"scoring the answers failed (python -m core.generation_metrics, exit "
                           f"{done.returncode}): {done.stderr.strip()[-2000:]}")
    return build(GenerationScores, json.loads(done.stdout), "python -m core.generation_metrics's answer")
