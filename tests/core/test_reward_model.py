"""The reward model (core.engine.reward_model, reward_scorer) against PyTorch: on tiny transformers-made
checkpoints with the same head weights, each row's score equals transformers' XxxForSequenceClassification
(its `score` layer at the last non-pad token); the Bradley–Terry loss and pair accuracy equal the
formula written out in torch on those scores; the LoRA (and full fine-tuning) gradients equal PEFT's
(transformers'). A reward run's checkpoint scores through RewardModelScorer exactly as its training rows,
refuses runs that cannot score, and exports as a sequence classifier transformers and PEFT load."""
import json

import numpy as np
import pytest

from core.engine.checkpoint import load_hf_model
from core.engine.lora import inject_lora, lora_modules, write_parameter
from core.engine.model import share_layer_graphs
from core.engine.reward_model import (HEAD_WEIGHT, RewardStep, ValueHead, baseline_text, evaluate, head_init_std,
                                      pair_loss, reward_inputs, reward_trainable, summarize, take_parameters)
from core.engine.train_step import WarmupDecaySchedule, adamw

from tests import skips
from tests.core.hf_fixtures import copy_lora_to_peft, make_hf_model, save_hf_model
from tests.core.test_preference import PAIRS, TARGETS, _pair_batch

torch = skips.module("torch")
transformers = skips.module("transformers")
peft = skips.module("peft")
F = torch.nn.functional

FIXTURES = {"qwen2-tied": "Qwen2ForSequenceClassification", "llama-gqa-llama3-rope": "LlamaForSequenceClassification"}
PAD = 0  # _pair_batch draws tokens from 1..VOCAB-1 and pads with 0: transformers' last non-pad token is ours


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    out = {}
    for name in FIXTURES:
        out[name] = tmp_path_factory.mktemp(name)
        save_hf_model(make_hf_model(name), out[name])
    return out


def _classifier(name: str, folder, head: ValueHead):
    """transformers' sequence classifier of the causal checkpoint, with our head as its `score`."""
    model = getattr(transformers, FIXTURES[name]).from_pretrained(str(folder), num_labels=1, pad_token_id=PAD,
                                                                  dtype=torch.float32)
    with torch.no_grad():
        model.score.weight.copy_(torch.tensor(head.weight.asnumpy()))
    return model.eval()


def _torch_scores(model, ids, mask):
    return model(input_ids=torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask)).logits[:, 0]


def _bradley_terry(scores):
    """TRL RewardTrainer's loss (no margin, no centring) and its pair accuracy."""
    chosen, rejected = scores[:PAIRS], scores[PAIRS:]
    return -F.logsigmoid(chosen - rejected).mean(), int((chosen > rejected).sum()) / PAIRS


def _step(model, head, method="lora"):
    params = reward_trainable(model, head, method)
    return RewardStep(model, head, adamw(params, WarmupDecaySchedule(1e-3, 0, 10, "constant", 1.0), 0.0), None, None)


def _relative(ours, want):
    return float(np.linalg.norm(ours - want) / np.linalg.norm(want))


@pytest.mark.slow  # even its one quick case (~5 s quiet) is too long for make test-fast
@pytest.mark.parametrize("name", [n if n == "qwen2-tied" else pytest.param(n, marks=pytest.mark.slow)
                                  for n in FIXTURES])
def test_scores_loss_and_accuracy_match_transformers_sequence_classifier(folders, name):
    ids, _, mask = _pair_batch()
    ours = load_hf_model(folders[name])
    head = ValueHead(ours.args.hidden_size, seed=3, std=0.5)  # scores spread enough that the pairs disagree
    step = _step(ours, head, "full")
    scores = step.scores(ids, mask)
    with torch.no_grad():
        want = _torch_scores(_classifier(name, folders[name], head), ids, mask)
    error = float(np.abs(scores - want.numpy()).max())
    print(f"\n{name}: scores {np.round(scores, 4)}, max |error| {error:.2e}")
    assert error < 1e-4
    loss, accuracy = _bradley_terry(want)
    swapped = np.r_[PAIRS:2 * PAIRS, 0:PAIRS]  # the same pairs with chosen and rejected exchanged
    flipped = summarize(step.evaluate(ids[swapped], mask[swapped])[1])["reward_accuracy"]
    assert flipped == _bradley_terry(want[swapped])[1] == pytest.approx(1 - accuracy)
    eval_loss, figures = step.evaluate(ids, mask)
    train_loss, _, train_figures = step.loss_and_grads(ids, mask)
    for got in (eval_loss, train_loss, pair_loss(figures)):
        assert got == pytest.approx(float(loss), rel=1e-5)
    np.testing.assert_allclose(train_figures, figures, rtol=1e-5, atol=1e-6)
    got = summarize(figures)
    assert got["reward_accuracy"] == accuracy
    assert got["reward_margin"] == pytest.approx(float((want[:PAIRS] - want[PAIRS:]).mean()), abs=1e-5)
    assert got["chosen_reward"] == pytest.approx(float(want[:PAIRS].mean()), abs=1e-5)


@pytest.mark.slow  # even its one quick case (~5 s quiet) is too long for make test-fast
@pytest.mark.parametrize("kernels", ["fused", pytest.param("composed", marks=pytest.mark.slow)])
def test_lora_gradients_match_peft(folders, kernels):
    """LoRA on every projection but k and gate, B ≠ 0, the layers sharing one graph and the CPU's fused
    kernels on as in a run (or the composed ops): the loss, the adapters' and the head's gradients equal
    PEFT's (task SEQ_CLS: `score` trained beside the adapters)."""
    ids, _, mask = _pair_batch()
    ours = load_hf_model(folders["qwen2-tied"])
    inject_lora(ours, 4, 8, 0.0, TARGETS)
    rng = np.random.default_rng(7)
    for cell in lora_modules(ours).values():  # B ≠ 0: the adapter changes the hidden states
        write_parameter(cell.lora_b, rng.normal(0, 0.05, cell.lora_b.shape).astype(np.float32))
    head = ValueHead(ours.args.hidden_size, seed=3, std=0.5)
    step = _step(ours, head)
    if kernels == "fused":
        from core.engine import fused
        try:
            fused.build()
        except fused.KernelUnavailable as exc:  # no C++ compiler: conftest fails this skip where kernels are required
            skips.skip("kernels", f"fused kernels unavailable here: {exc}")
        assert fused.enable(ours) == "fused"
    share_layer_graphs(ours)
    ours.set_train(True)
    loss, grads, _ = step.loss_and_grads(ids, mask)

    reference = peft.get_peft_model(_classifier("qwen2-tied", folders["qwen2-tied"], head), peft.LoraConfig(
        r=4, lora_alpha=8, target_modules=TARGETS, lora_dropout=0.0, task_type="SEQ_CLS"))
    torch_params = copy_lora_to_peft(ours, reference)
    expected, _ = _bradley_terry(_torch_scores(reference, ids, mask))
    expected.backward()
    assert loss == pytest.approx(expected.item(), rel=1e-5)

    names = [p.name for p in step.optimizer.parameters]
    assert names[-1] == HEAD_WEIGHT and len(names) == 2 * len(lora_modules(ours)) + 1
    worst = 0.0
    for name, grad in zip(names, grads):
        if name == HEAD_WEIGHT:
            want = torch_params["base_model.model.score.modules_to_save.default.weight"].grad
        else:
            module, which = name.rsplit(".", 1)
            key = "lora_A" if which == "lora_a" else "lora_B"
            want = torch_params[f"base_model.model.{module}.{key}.default.weight"].grad
        worst = max(worst, _relative(grad, want.numpy()))
    print(f"\nreward LoRA ({kernels}): loss {loss:.6g} vs {expected.item():.6g}, worst gradient difference {worst:.2e}")
    assert worst < 1e-5


@pytest.mark.slow
def test_full_finetuning_trains_every_weight_but_the_lm_head_with_transformers_gradients(folders):
    """Untied Llama, full fine-tuning: the LM head is frozen (no gradient, no decay, not saved); every other
    weight's gradient and the head's equal transformers' on the same loss."""
    ids, _, mask = _pair_batch()
    ours = load_hf_model(folders["llama-gqa-llama3-rope"])
    head = ValueHead(ours.args.hidden_size, seed=3, std=0.5)
    step = _step(ours, head, "full")
    names = [p.name for p in step.optimizer.parameters]
    assert "lm_head.weight" not in names and not ours.lm_head.weight.requires_grad and names[-1] == HEAD_WEIGHT
    loss, grads, _ = step.loss_and_grads(ids, mask)
    reference = _classifier("llama-gqa-llama3-rope", folders["llama-gqa-llama3-rope"], head)
    expected, _ = _bradley_terry(_torch_scores(reference, ids, mask))
    expected.backward()
    torch_params = dict(reference.named_parameters())
    assert loss == pytest.approx(expected.item(), rel=1e-5)
    worst = max(_relative(grad, torch_params[name].grad.numpy()) for name, grad in zip(names, grads))
    print(f"\nreward full: worst gradient difference {worst:.2e} over {len(names)} tensors")
    assert worst < 1e-4  # the embedding's gradient sums many rows: float32 order differs more than LoRA's


def test_the_head_starts_from_the_seed_as_transformers_draws_it(folders):
    folder = folders["qwen2-tied"]
    assert head_init_std(folder) == pytest.approx(0.02)  # transformers' initializer_range
    first, again, other = (ValueHead(64, seed=s, std=0.02).weight.asnumpy() for s in (11, 11, 12))
    np.testing.assert_array_equal(first, again)
    assert np.abs(first - other).max() > 1e-3
    assert first.shape == (1, 64) and first.dtype == np.float32
    assert 0.01 < float(first.std()) < 0.03


@pytest.mark.slow  # ~30 s: five step graphs compile
def test_steps_lower_the_loss_and_accumulation_keeps_the_pairs(folders):
    """Four optimizer steps on one batch lower its loss and raise its accuracy to 1; two micro batches
    (each its own chosen-then-rejected rows) report every pair's figures."""
    ids, _, mask = _pair_batch()
    ours = load_hf_model(folders["qwen2-tied"])
    inject_lora(ours, 4, 8, 0.0, TARGETS)
    head = ValueHead(ours.args.hidden_size, seed=3, std=0.5)
    params = reward_trainable(ours, head, "lora")
    step = RewardStep(ours, head, adamw(params, WarmupDecaySchedule(2e-2, 0, 10, "constant", 1.0), 0.0), 1.0, None)
    before, _ = step.evaluate(ids, mask)
    for _ in range(4):
        loss, norm, applied, _ = step([(ids, mask)])
        assert applied and norm > 0 and step.last_figures.shape == (2, PAIRS)
    after, figures = step.evaluate(ids, mask)
    assert after < before - 0.1 and summarize(figures)["reward_accuracy"] == 1.0
    first, second = [0, 3], [1, 2, 4, 5]  # pair 0 alone, pairs 1-2: each chosen rows then rejected rows
    step([(ids[first], mask[first]), (ids[second], mask[second])])
    assert step.last_figures.shape == (2, PAIRS)


# ---- a reward run's checkpoint: the scorer, refusals, exports ------------------------------------

def _pair_rows(n: int, seed: int) -> list[dict]:
    from tests.core.test_preference_train import _pairs
    return [{"prompt": f"{r['instruction']}\n{r['input']}", "chosen": r["chosen"], "rejected": r["rejected"]}
            for r in _pairs(n, seed)]


def _save_run(workspace, run_id, method="lora", objective="reward", state="finished"):
    """A run folder as a reward run leaves it: config.yaml, checkpoints/best (the adapters or weights
    and the head, B ≠ 0 so the adapter matters) and its status. Returns (run, config, model, head)."""
    from core.spec.model_args import file_sha256, weight_files
    from core.run.ckpt_store import save_train_checkpoint
    from core.run.rundir import RunDir
    from core.spec.config import load_config
    data = workspace.parent / "data"
    cfg = load_config(workspace, [f"train.objective={objective}", f"method={method}",
                                  f"data.train_file={data / 'rm-train.jsonl'}",
                                  f"data.validation_file={data / 'rm-val.jsonl'}", "data.test_file=null"])
    model = load_hf_model(cfg.model.path)
    if method == "lora":
        inject_lora(model, cfg.lora.rank, cfg.lora.alpha, 0.0, cfg.lora.target_modules)
        rng = np.random.default_rng(5)
        for cell in lora_modules(model).values():
            write_parameter(cell.lora_b, rng.normal(0, 0.2, cell.lora_b.shape).astype(np.float32))
    head = ValueHead(model.args.hidden_size, seed=cfg.run.seed, std=0.5)
    trainable = reward_trainable(model, head, method)
    run = RunDir.create(cfg.run.runs_dir, run_id, cfg.to_yaml())
    state_json = {"step": 4, "method": method, "config": cfg.to_dict(),
                  "base_model": {"path": cfg.model.path, "sha256": file_sha256(weight_files(cfg.model.path))},
                  "lora": cfg.lora.to_dict() if method == "lora" else None}
    save_train_checkpoint(run.checkpoints_dir, 4, {p.name: p.asnumpy() for p in trainable},
                          {"global_step": np.zeros(1, np.int32)}, state_json, pointers=("best", "last"))
    for next_state in ("starting", "running") + ((state,) if state != "running" else ()):
        run.write_status(state=next_state)
    return run, cfg, model, head


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    from tests.core.tiny_setup import make_workspace, write_jsonl
    root = tmp_path_factory.mktemp("rm-ws")
    config = make_workspace(root)
    write_jsonl(root / "data" / "rm-train.jsonl", _pair_rows(8, 1))
    write_jsonl(root / "data" / "rm-val.jsonl", _pair_rows(6, 2))
    return config


@pytest.fixture(scope="module")
def reward_run(workspace):
    return _save_run(workspace, "rm-lora")


@pytest.fixture(scope="module")
def scorer(reward_run):
    from core.engine.reward_scorer import RewardModelScorer
    return RewardModelScorer(reward_run[0].path, batch_size=4)


@pytest.mark.slow
def test_scorer_scores_a_finished_run_as_its_training_rows(reward_run, scorer):
    """The scorer renders (prompt, completion) exactly as the run's pair rows, and scores them as the
    trained model does (its adapter merged at load)."""
    from core.data.preference import collate_pairs, load_preference_splits
    from core.data.tokenizer import Tokenizer
    run, cfg, model, head = reward_run
    records = [json.loads(line) for line in (run.path.parent.parent / "data" / "rm-val.jsonl").read_text().splitlines()]
    tokenizer = Tokenizer.from_dir(cfg.model.path)
    pairs = load_preference_splits(cfg.data, tokenizer, cfg.run.seed, "reward").validation
    prompts = [r["prompt"] for r in records] * 2
    completions = [r["chosen"] for r in records] + [r["rejected"] for r in records]
    rows = scorer.rows(prompts, completions)
    for row, sample in zip(rows, [p.chosen for p in pairs] + [p.rejected for p in pairs]):
        np.testing.assert_array_equal(row, sample.input_ids)
    got = scorer(prompts, completions, answer=["ignored"] * len(prompts))  # TRL's signature: columns by name
    step = _step(model, head)
    batch = collate_pairs(pairs[:3], 48, tokenizer.pad_token_id), collate_pairs(pairs[3:], 48, tokenizer.pad_token_id)
    chosen, rejected = zip(*(np.split(step.scores(*reward_inputs(b)), 2) for b in batch))
    want = np.concatenate(chosen + rejected)
    assert len(got) == 12 and all(isinstance(s, float) for s in got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.std(got) > 1e-3  # the rows score differently: a real comparison
    # chat messages and TRL's conversational completions score the same as text
    again = scorer([[{"role": "user", "content": p}] for p in prompts[:2]],
                   [[{"role": "assistant", "content": c}] for c in completions[:2]])
    np.testing.assert_allclose(again, got[:2], rtol=1e-6)
    print(f"\nscorer: 12 completions, max |difference| {np.abs(np.array(got) - want).max():.2e}")
    figures = evaluate(step, pairs, 3, 48, tokenizer.pad_token_id)  # the same two batches
    assert figures["val_loss"] == pytest.approx(pair_loss(np.stack((want[:6], want[6:]))), rel=1e-5)
    assert set(figures) == {"val_loss", "reward_accuracy", "reward_margin", "chosen_reward", "rejected_reward"}
    assert baseline_text(figures).startswith(f"reward loss {figures['val_loss']:.4f}, reward accuracy ")
    print(f"scorer kernels: {scorer.kernels}")


@pytest.mark.slow
def test_scorer_refuses_runs_and_inputs_it_cannot_score_naming_them_in_both_languages(workspace, scorer, tmp_path):
    from app.i18n import problem_text
    from core.run.reward_run import RewardModelError, finished_reward_run
    from core.spec.errors import CheckpointError
    from tests.app.test_problem_text import assert_chinese
    running, *_ = _save_run(workspace, "rm-running", state="running")
    sft, *_ = _save_run(workspace, "rm-sft", objective="sft")
    failed, *_ = _save_run(workspace, "rm-failed", state="failed")
    unsaved, *_ = _save_run(workspace, "rm-unsaved")
    for pointer in ("best", "last"):
        unsaved.checkpoint(pointer).unlink()
    cases = {running.path: ("reward.not_finished", "running"), sft.path: ("reward.not_reward_run", "sft"),
             failed.path: ("reward.not_finished", "failed"), tmp_path: ("reward.no_run", str(tmp_path)),
             unsaved.path: ("reward.no_best", "checkpoints/best")}
    raised = []
    for path, (key, said) in cases.items():
        with pytest.raises(RewardModelError) as err:
            finished_reward_run(path)
        assert err.value.message.key == key and said in str(err.value) and str(path) in str(err.value)
        raised.append(err.value)
    with pytest.raises(RewardModelError, match="2 prompts and 1 completions") as err:
        scorer(["a", "b"], ["c"])
    raised.append(err.value)
    with pytest.raises(RewardModelError, match="completion 1 is of type 'int'") as err:
        scorer(["a", "b"], ["c", 3])
    raised.append(err.value)
    with pytest.raises(RewardModelError, match="prompt 0 is of type 'dict'") as err:
        scorer([{"content": "a"}], ["c"])
    raised.append(err.value)
    # a checkpoint without the head (an SFT run's adapters): loading it as a reward model names the tensor
    with pytest.raises(CheckpointError, match=HEAD_WEIGHT) as err:
        _headless_checkpoint_as_reward(workspace)
    raised.append(err.value)
    assert [e.message.key for e in raised[-4:]] == ["reward.counts", "reward.completion_not_text",
                                                    "reward.prompt_not_text", "reward.no_head"]
    for error in raised:
        assert_chinese(str(error), problem_text(error, "zh"))


def _headless_checkpoint_as_reward(workspace):
    """A LoRA checkpoint of adapters only (as an SFT run's) read as a reward model."""
    from core.engine.checkpoint import load_train_checkpoint
    from core.run.ckpt_store import save_train_checkpoint
    from core.engine.export import load_reward_model
    run, *_ = _save_run(workspace, "rm-headless")
    weights, opt, state = load_train_checkpoint(run.checkpoint("best"))
    weights.pop(HEAD_WEIGHT)
    save_train_checkpoint(run.checkpoints_dir, 5, weights, opt, {**state, "step": 5}, pointers=("best",))
    return load_reward_model(run.checkpoint("best"))


def test_a_fork_takes_the_trained_weights_and_keeps_a_seeded_head_without_one(reward_run):
    """Forking a reward run from an SFT checkpoint (no head): the adapters are taken, the head keeps its
    seeded start; from a reward checkpoint, the head too."""
    from core.engine.checkpoint import load_train_checkpoint
    run, cfg, model, head = reward_run
    weights, _, _ = load_train_checkpoint(run.checkpoint("best"))
    fresh = load_hf_model(cfg.model.path)
    inject_lora(fresh, cfg.lora.rank, cfg.lora.alpha, 0.0, cfg.lora.target_modules)
    new_head = ValueHead(fresh.args.hidden_size, seed=99)
    trainable = {p.name: p for p in reward_trainable(fresh, new_head, "lora")}
    seeded = new_head.weight.asnumpy().copy()
    sft_weights = {k: v for k, v in weights.items() if k != HEAD_WEIGHT}
    assert take_parameters(trainable, sft_weights, "sft") == [HEAD_WEIGHT]
    np.testing.assert_array_equal(new_head.weight.asnumpy(), seeded)
    for name, param in trainable.items():
        if name != HEAD_WEIGHT:
            np.testing.assert_array_equal(param.asnumpy(), weights[name])
    assert take_parameters(trainable, weights, "reward") == []
    np.testing.assert_array_equal(new_head.weight.asnumpy(), weights[HEAD_WEIGHT])


@pytest.mark.slow
def test_exports_load_as_a_sequence_classifier_with_equal_scores(reward_run, workspace):
    """The merged folder loads in transformers' AutoModelForSequenceClassification (architectures
    XxxForSequenceClassification, one label, score.weight, no LM head), the PEFT adapter in PEFT on that
    classifier of the base (task SEQ_CLS, score saved): both score the scorer's rows as the scorer does.
    A full fine-tune's merged folder too."""
    from safetensors.numpy import load_file
    from core.engine.export import export_run
    from core.engine.reward_scorer import RewardModelScorer
    run, cfg, _, _ = reward_run
    records = [json.loads(line) for line in (run.path.parent.parent / "data" / "rm-val.jsonl").read_text().splitlines()]
    prompts, completions = [r["prompt"] for r in records], [r["chosen"] for r in records]
    full_run, *_ = _save_run(workspace, "rm-full", method="full")
    for which_run in (run, full_run):
        scorer = RewardModelScorer(which_run.path, batch_size=8)
        want = np.asarray(scorer(prompts, completions))
        rows = scorer.rows(prompts, completions)
        length = max(len(r) for r in rows)
        ids = np.full((len(rows), length), scorer.pad_id, np.int64)
        mask = np.zeros((len(rows), length), np.int64)
        for i, row in enumerate(rows):
            ids[i, :len(row)], mask[i, :len(row)] = row, 1
        merged = export_run(which_run.path, "best", "merged")
        config = json.loads((merged / "config.json").read_text())
        assert config["architectures"] == ["LlamaForSequenceClassification"] and config["id2label"] == {"0": "LABEL_0"}
        tensors = load_file(str(merged / "model.safetensors"))
        assert tensors[HEAD_WEIGHT].shape == (1, 32) and "lm_head.weight" not in tensors
        classifier = transformers.AutoModelForSequenceClassification.from_pretrained(str(merged)).eval()
        assert classifier.config.num_labels == 1
        with torch.no_grad():
            got = _torch_scores(classifier, ids, mask).numpy()
        print(f"\nmerged export ({which_run.run_id}): max |difference| {np.abs(got - want).max():.2e}")
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    adapter = export_run(run.path, "best", "peft")
    assert json.loads((adapter / "adapter_config.json").read_text())["task_type"] == "SEQ_CLS"
    base = transformers.AutoModelForSequenceClassification.from_pretrained(cfg.model.path, num_labels=1)
    scorer = RewardModelScorer(run.path)
    want = np.asarray(scorer(prompts, completions))
    rows = scorer.rows(prompts, completions)
    with torch.no_grad():
        wrapped = peft.PeftModel.from_pretrained(base, str(adapter)).eval()
        got = [wrapped(input_ids=torch.tensor([row], dtype=torch.long)).logits[0, 0].item() for row in rows[:2]]
    np.testing.assert_allclose(got, want[:2], rtol=1e-4, atol=1e-4)
