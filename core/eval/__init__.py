"""Evaluation, MindSpore-free: lm-evaluation-harness settings, tasks and evaluation runs, and the
scores of generated answers (exact match, BLEU, ROUGE). Imports core.spec and core.run only; the
harness's model over the engine is core.engine.lm_eval_model.
"""
