"""BLEU-4 and ROUGE-1/2/L of generated answers equal sacrebleu's and rouge-score's own results on
fixed English and Chinese strings (core.eval.generation_metrics)."""
from __future__ import annotations

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from core.eval.generation_metrics import CharacterTokenizer, is_unsegmented, score_generations

EN_REFS = ["the cat sat on the mat", "a quick brown fox jumps over the lazy dog", "zoo", "Paris is the capital"]
EN_PREDS = ["the cat sat on a mat", "a quick brown fox jumped over a lazy dog", "zoo", "the capital is Paris"]
ZH_REFS = ["今天天气很好，我们去公园散步。", "猫坐在垫子上", "北京是中国的首都"]
ZH_PREDS = ["今天天气不错，我们去公园走走。", "猫坐在垫子上", "中国的首都是北京"]


def _mean_rouge(scorer, refs, preds, name):
    return sum(scorer.score(r, p)[name].fmeasure for r, p in zip(refs, preds)) / len(refs)


def test_english_is_scored_on_words_as_sacrebleu_and_rouge_score_do():
    scores = score_generations(EN_PREDS, EN_REFS)
    assert scores.segmentation == "words" and scores.count == 4
    assert scores.exact_match == pytest.approx(0.25)
    expected_bleu = sacrebleu.corpus_bleu(EN_PREDS, [EN_REFS]).score  # 13a, BLEU-4, exp smoothing
    assert scores.bleu == pytest.approx(expected_bleu / 100, abs=1e-12)
    assert 0.3 < scores.bleu < 0.6  # a real, partial score (a constant 0 or 1 would pass nothing here)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"])
    for name in ("rouge1", "rouge2", "rougeL"):
        assert getattr(scores, name) == pytest.approx(_mean_rouge(scorer, EN_REFS, EN_PREDS, name), abs=1e-12)
    # "the capital is Paris" has every word of the reference (ROUGE-1 = 1) but not its order
    assert scorer.score(EN_REFS[3], EN_PREDS[3])["rouge1"].fmeasure == 1.0
    assert scores.rougeL < scores.rouge1


def test_chinese_is_scored_on_characters():
    scores = score_generations(ZH_PREDS, ZH_REFS)
    assert scores.segmentation == "characters" and scores.exact_match == pytest.approx(1 / 3)
    expected_bleu = sacrebleu.corpus_bleu(ZH_PREDS, [ZH_REFS], tokenize="zh").score
    assert scores.bleu == pytest.approx(expected_bleu / 100, abs=1e-12)
    assert 0.2 < scores.bleu < 0.9
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], tokenizer=CharacterTokenizer())
    for name in ("rouge1", "rouge2", "rougeL"):
        assert getattr(scores, name) == pytest.approx(_mean_rouge(scorer, ZH_REFS, ZH_PREDS, name), abs=1e-12)
    # same characters in another order: ROUGE-1 is 1, ROUGE-L is not
    assert scorer.score(ZH_REFS[2], ZH_PREDS[2])["rouge1"].fmeasure == 1.0
    # rouge-score's own tokenizer would see no token at all in Chinese text (every score 0)
    plain = rouge_scorer.RougeScorer(["rouge1"]).score(ZH_REFS[1], ZH_PREDS[1])["rouge1"].fmeasure
    assert plain == 0.0 and scores.rouge1 > 0.85


def test_mixed_references_pick_the_segmentation_per_answer():
    scores = score_generations(EN_PREDS[:2] + ZH_PREDS[:2], EN_REFS[:2] + ZH_REFS[:2])
    assert scores.segmentation == "words+characters"
    en, zh = score_generations(EN_PREDS[:2], EN_REFS[:2]), score_generations(ZH_PREDS[:2], ZH_REFS[:2])
    assert scores.rouge2 == pytest.approx((en.rouge2 + zh.rouge2) / 2, abs=1e-12)  # ROUGE: a mean per answer
    assert is_unsegmented("答案是 Paris") and is_unsegmented("カタカナ") and not is_unsegmented("café")
    assert CharacterTokenizer().tokenize("答案是 Paris 42!") == ["答", "案", "是", "paris", "42"]


def test_one_word_answers_and_edge_cases():
    # one-word answers have no 2-, 3- or 4-grams: BLEU-4 is 0 even when most answers are right,
    # which is why exact match and ROUGE-1 are the figures to watch on such a task
    scores = score_generations(["zoo", "blue", "red"], ["zoo", "blue", "station"])
    assert scores.exact_match == pytest.approx(2 / 3) and scores.rouge1 == pytest.approx(2 / 3)
    assert scores.bleu == pytest.approx(sacrebleu.corpus_bleu(["zoo", "blue", "red"], [["zoo", "blue", "station"]]).score / 100)
    assert score_generations([], []) is None
    assert score_generations([""], ["zoo"]).bleu == 0.0
    with pytest.raises(ValueError, match="2 predictions for 1 references"):
        score_generations(["a", "b"], ["a"])


@pytest.mark.slow
def test_scoring_apart_gives_the_same_figures_and_leaves_the_libraries_out_of_this_process():
    """The worker scores in a process of its own (rouge-score's nltk is ~140 MB): same figures."""
    import subprocess
    import sys
    from pathlib import Path

    from core.eval.generation_metrics import score_apart
    apart = score_apart(EN_PREDS[:2] + ZH_PREDS[:2], EN_REFS[:2] + ZH_REFS[:2])
    assert apart == score_generations(EN_PREDS[:2] + ZH_PREDS[:2], EN_REFS[:2] + ZH_REFS[:2])
    assert score_apart([], []) is None
    probe = subprocess.run([sys.executable, "-c", "import sys; from core.eval.generation_metrics import score_apart; "
                            "score_apart(['a cat'], ['a cat sat']); print('nltk' in sys.modules)"],
                           cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300)
    assert probe.stdout.strip() == "False", probe.stderr


def test_an_answer_of_the_scoring_process_that_is_not_the_scores_is_named(monkeypatch):
    """The child's JSON is typed on the way in (it was GenerationScores(**data): a string score passed)."""
    import json
    import subprocess

    from core.eval import generation_metrics
    from core.spec.codec import CodecError
    answer = {"exact_match": "half", "bleu": 0.1, "rouge1": 0.2, "rouge2": 0.1, "rougeL": 0.2, "count": 2,
              "segmentation": "words"}
    monkeypatch.setattr(generation_metrics.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, stdout=json.dumps(answer), stderr=""))
    with pytest.raises(CodecError, match="core.generation_metrics's answer.*exact_match"):
        generation_metrics.score_apart(["a"], ["a"])
    answer["exact_match"] = 0.5
    assert generation_metrics.score_apart(["a"], ["a"]).exact_match == 0.5
