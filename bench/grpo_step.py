"""A GRPO training step of mindtune against TRL 1.16's GRPOTrainer on PyTorch (no vLLM), side by side in one
run (issue 36, Numbers: Speed).

For the shipped demo model (models/tiny-demo) and the Qwen2.5-0.5B shape (bench/real_models.py: the hub's
config.json, random bf16 weights loaded as fp32, the demo tokenizer), LoRA as configs/lora_demo.yaml (r16,
alpha 32, dropout 0, the seven projections), fp32 compute, one optimizer step = 8 prompts x 4 completions x 64
new tokens (demo: one micro batch of 32 rows; 0.5b: 4 micro batches of 2 prompts on both sides, see
ACCUMULATION), beta 0 (no reference pass), loss_type dapo, group-scaled advantages, temperature 1, top-p 1,
top-k off, constant lr, clipping at 1.0, one reward: the regular expression `[^e]*(e[^e]*e[^e]*)*` on the whole
completion (an even number of e's: about half the completions of either model, so groups have a spread and
every step updates; mindtune makes no update on a step whose groups all scored alike, and the demo model's
completions all hold an 'e'):

- mindtune: `core.engine.trainer.Trainer` driven as core.dry_run drives it (setup, then train_one_step)
  with train.objective grpo: `Grpo._sample` (rollouts on the fused inference kernel with the adapter merged
  into the kernel's weight copies, the step's 32 rows in one call, as TRL; rewards; advantages) is the rollout
  time, the compiled GrpoStep (forward, backward with the LM head on the completion's positions only, as TRL's
  logits_to_keep, AdamW, clipping) the update time, as the step reports them
  (rollout_s, update_s). No stop token: the objective's EOS set is emptied after setup, so every completion
  is grpo.max_new_tokens = 64 long (a sampled EOS is kept as an ordinary token);
- TRL 1.16 `GRPOTrainer` on transformers + PEFT (the same LoRA), SDPA attention, num_generations 4,
  max_completion_length 64 with generation_kwargs min_new_tokens 64 (the EOS logits masked until 64 tokens:
  every completion is 64 long, none is cut), per_device_train_batch_size = the rows of a micro batch and
  gradient_accumulation_steps as mindtune's (its steps_per_generation default: the step's 32 completions
  generated in one call), gradient checkpointing off, fp32 (use_cpu, no bf16), torch threads = the cores
  this process may use, logging and saving off. Its rollout time is `_generate_and_score_completions`
  (templating, `model.generate`, decoding, rewards, advantages), timed by wrapping the method; its step runs
  from on_step_begin to on_step_end (a TrainerCallback); the update is the step less the rollout. TRL 1.16
  has no max_prompt_length: the prompts are whole on both sides.

Both load the same weights and the same 8 prompts (demo questions rendered by the chat template with the
generation prompt; the bench checks that both sides have the same token ids), and every step trains on all 8.
The completions differ (each side samples with its own generator), so the first losses need not agree: at
the first step with num_iterations 1 the GRPO loss is -sum(A·n) / sum(n), about 0 on both sides when every
completion has the same length (group-centred advantages).

Each worker is a fresh subprocess (imports, compilation and peak RSS its own); the median timed step is
reported with its own rollout and update times. It prints step, rollout and update times of both and their
ratios (TRL / mindtune: above 1, mindtune faster), the step's CPU-time ratio, completion tokens per step
second, the update's FLOP rate against the fp32 matmul peak (measured in the same run before and after the
steps; the table uses the higher), peak RSS of both, and mindtune's peak against
core.spec.memory.estimate_memory for the same GRPO config.

On a loaded machine PyTorch's OpenMP threads spin at the end of every op while other processes want the
cores, which multiplies TRL's eager decoding time (the demo's rollout 5-30x slower than on a quiet machine);
mindtune's kernel threads are joined per call. `--passive` sets OMP_WAIT_POLICY=PASSIVE in both workers
(their threads sleep instead): the fairer comparison under load; wall ratios still need a quiet machine.

    .venv/bin/pip install -r requirements-bench.txt
    .venv/bin/python bench/grpo_step.py                                  # demo and 0.5b
    .venv/bin/python bench/grpo_step.py --configs demo --rounds 3        # order alternating, the median pair
    .venv/bin/python bench/grpo_step.py --configs 0.5b --steps 1 --warmup 1   # ~8 GB, TRL's worker ~12.5 GB
    .venv/bin/python bench/grpo_step.py --configs demo --passive         # a loaded machine
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.train_step import matmul_flops, peak_rss_mb, print_peak  # noqa: E402
from bench.train_step import run_worker as run_train_step_worker  # noqa: E402

PROMPTS, GENERATIONS, NEW_TOKENS = 8, 4, 64
ROWS = PROMPTS * GENERATIONS
# config -> gradient accumulation steps: the step's 8 prompts in that many micro batches. The 0.5B shape's 32 rows
# of 166 tokens in one micro batch need ~22 GB by core.spec.memory's estimate (the logits alone: 32 x 166 x 151,936
# floats = 3.2 GB a copy) on a 24 GB machine that others share: 4 micro batches of 2 prompts x 4 completions there,
# on both sides (TRL: per_device_train_batch_size 8, gradient_accumulation_steps 4; both sample the step's 32
# completions in one call)
ACCUMULATION = {"demo": 1, "0.5b": 4}
PATTERN = "[^e]*(e[^e]*e[^e]*)*"  # the reward: core.eval.rewards' regex (re.fullmatch on the stripped completion, DOTALL)
LEARNING_RATE = 1e-5
SEED = 42
BASE_CONFIG = ROOT / "configs" / "lora_demo.yaml"  # its LoRA: r16, alpha 32, dropout 0, seven projections
CONFIGS = ("demo", "0.5b")


def write_prompts(folder: Path) -> Path:
    """The bench's prompts: the first PROMPTS questions of the demo set, as `prompt` strings (one user turn)."""
    records = [json.loads(line) for line in (ROOT / "data" / "demo" / "train.jsonl").read_text().splitlines()[:PROMPTS]]
    path = folder / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"{r['instruction']}\n\n{r['input']}", "answer": r["output"]}) + "\n"
                            for r in records))
    return path


def lora_settings() -> dict:
    """configs/lora_demo.yaml's lora: section (both sides use it)."""
    import yaml
    lora = yaml.safe_load(BASE_CONFIG.read_text())["lora"]
    return {"rank": int(lora["rank"]), "alpha": float(lora["alpha"]), "dropout": float(lora["dropout"]),
            "targets": list(lora["target_modules"])}


def overrides(model_dir: Path, prompts: Path, runs_dir: Path, steps: int, accumulation: int = 1) -> list[str]:
    """The mindtune run: configs/lora_demo.yaml with train.objective grpo and the bench's batch."""
    return [f"model.path={model_dir}", "model.dtype=float32", "train.objective=grpo",
            f"data.train_file={prompts}", f"data.validation_file={prompts}", "data.test_file=null",
            f"run.runs_dir={runs_dir}", f"run.seed={SEED}", f"train.max_steps={steps}",
            f"train.micro_batch_size={PROMPTS // accumulation}", f"train.grad_accum_steps={accumulation}",
            f"train.learning_rate={LEARNING_RATE}", "train.warmup_steps=0", "train.schedule=constant",
            "train.eval_every=100000", "train.save_every=100000", "eval.downstream=false", "eval.baseline=false",
            "early_stopping.enabled=false", "early_stopping.monitor=val_reward", f"grpo.num_generations={GENERATIONS}",
            f"grpo.max_new_tokens={NEW_TOKENS}", "grpo.max_prompt_len=192", "data.max_seq_len=256", "grpo.beta=0.0",
            "grpo.loss_type=dapo", "grpo.scale_rewards=group", "grpo.temperature=1.0", "grpo.top_p=1.0", "grpo.top_k=0",
            f"grpo.rewards=[{{function: regex, pattern: '{PATTERN}'}}]"]


# ---- workers (one per subprocess) ------------------------------------------------------------------

def worker_mindtune(model_dir: Path, prompts: Path, steps: int, warmup: int, accumulation: int = 1) -> dict:
    import numpy as np
    import core.run.launcher as launcher
    from core.engine.generate import use_device
    from core.engine.trainer import Cluster, Trainer
    from core.run.records import SetupEvent
    from core.spec.config import load_config
    use_device("cpu")  # as core.train's worker
    with tempfile.TemporaryDirectory(prefix="mindtune-grpo-bench-") as runs:
        config = load_config(BASE_CONFIG, overrides(model_dir, prompts, Path(runs), warmup + steps, accumulation))
        trainer = Trainer(config, launcher.create_run(config), Cluster(1))
        start = time.perf_counter()
        trainer.setup()
        setup_s = time.perf_counter() - start
        trainer.objective.eos = set()  # no stop token: every completion grpo.max_new_tokens long
        trainer.model.set_train(True)
        record: dict[str, list] = {k: [] for k in ("step_s", "cpu_s", "rollout_s", "update_s", "loss", "reward",
                                                  "tokens", "completion_tokens", "no_update")}
        for _ in range(warmup + steps):
            cpu = time.process_time()
            out = trainer.train_one_step()
            record["cpu_s"].append(time.process_time() - cpu)
            trainer.state.step += 1
            record["step_s"].append(out["step_time_s"])
            record["rollout_s"].append(out["rollout_s"])
            record["update_s"].append(out["update_s"])
            record["loss"].append(float(out["loss"]))
            record["reward"].append(float(out["reward"]))
            record["tokens"].append(int(out["tokens"]))
            record["completion_tokens"].append(int(sum(int((b.labels != -100).sum()) for b in trainer.objective.buffer)))
            record["no_update"].append(bool(out.get("no_update", False)))
        prompt_ids = sorted(r.ids.tolist() for r in trainer.splits.train)
        setup = trainer.run.last_metric(SetupEvent, max_bytes=65536)
        trainable = int(sum(int(np.prod(p.shape)) for p in trainer.trainable.values()))
        return {**summary(record, warmup), "no_update_steps": sum(record["no_update"]), "setup_s": setup_s, "peak_rss_mb": peak_rss_mb(), "prompt_ids": prompt_ids,
                "seq_len": int(trainer.length), "kernels": setup.kernels if setup else None,
                "inference_kernel": getattr(trainer.model, "inference_kernel", None) is not None,
                "trainable": trainable, "threads": len(os.sched_getaffinity(0))}


def summary(record: dict, warmup: int) -> dict:
    """The median timed step (an odd --steps: one of them), with its own rollout, update and CPU time, so that
    rollout + update = step."""
    timed = sorted(range(warmup, len(record["step_s"])), key=record["step_s"].__getitem__)
    median = timed[(len(timed) - 1) // 2]
    return {"step_s": record["step_s"][median], "step_cpu_s": record["cpu_s"][median],
            "rollout_s": record["rollout_s"][median], "update_s": record["update_s"][median],
            "first_step_s": record["step_s"][0], "losses": record["loss"][:3], "rewards": record["reward"][:3],
            "tokens": record["tokens"][-1], "completion_tokens": record["completion_tokens"][-1],
            "steps": [round(v, 3) for v in record["step_s"]]}


def regex_reward(prompts, completions, **columns) -> list[float]:
    """core.eval.rewards' regex reward in TRL's signature (a conversational completion is its message list)."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float(re.fullmatch(PATTERN, t.strip(), re.DOTALL) is not None) for t in texts]


def worker_trl(model_dir: Path, prompts: Path, steps: int, warmup: int, accumulation: int = 1, threads: int = 0) -> dict:
    import torch
    threads = threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer
    lora = lora_settings()
    records = [json.loads(line) for line in prompts.read_text().splitlines()]
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": r["prompt"]}], "answer": r["answer"]}
                                 for r in records])
    # the folder's tokenizer.json as it is, as core.data.tokenizer reads it: AutoTokenizer picks Qwen2Tokenizer for
    # the 0.5b folder (its config's model_type), which rebuilds the demo tokenizer with Qwen2's pre-tokenizer and
    # splits the prompts differently (one token fewer each)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(model_dir)
    prompt_ids = sorted(tokenizer.apply_chat_template([{"role": "user", "content": r["prompt"]}],
                                                      add_generation_prompt=True, tokenize=True, return_dict=True)
                        ["input_ids"] for r in records)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    record: dict[str, list] = {k: [] for k in ("step_s", "cpu_s", "rollout_s", "generate_s", "loss", "reward",
                                              "tokens", "completion_tokens")}

    micro: dict[str, list] = {"loss": [], "tokens": [], "completion_tokens": []}  # this step's micro batches

    class StepClock(TrainerCallback):
        """The optimizer step's wall and CPU time (every micro batch, the rollout, the update), and its micro
        batches' mean loss and summed tokens."""
        def on_step_begin(self, args, state, control, **kwargs):
            self.wall, self.cpu = time.perf_counter(), time.process_time()

        def on_step_end(self, args, state, control, **kwargs):
            record["step_s"].append(time.perf_counter() - self.wall)
            record["cpu_s"].append(time.process_time() - self.cpu)
            record["loss"].append(sum(micro["loss"]) / len(micro["loss"]))
            record["tokens"].append(sum(micro["tokens"]))
            record["completion_tokens"].append(sum(micro["completion_tokens"]))
            for values in micro.values():
                values.clear()

    with tempfile.TemporaryDirectory(prefix="trl-grpo-bench-") as out:
        args = GRPOConfig(
            output_dir=out, use_cpu=True, bf16=False, fp16=False, seed=SEED, max_steps=warmup + steps,
            per_device_train_batch_size=ROWS // accumulation, gradient_accumulation_steps=accumulation,
            num_generations=GENERATIONS,
            max_completion_length=NEW_TOKENS, generation_kwargs={"min_new_tokens": NEW_TOKENS},
            temperature=1.0, top_p=1.0, top_k=0, beta=0.0, loss_type="dapo", scale_rewards="group", epsilon=0.2,
            num_iterations=1, learning_rate=LEARNING_RATE, lr_scheduler_type="constant", warmup_steps=0,
            weight_decay=0.0, max_grad_norm=1.0, gradient_checkpointing=False, logging_strategy="no",
            save_strategy="no", report_to="none", disable_tqdm=True, dataloader_num_workers=0)

        def regex(prompts, completions, **columns):  # the reward (TRL passes it keywords), its batch mean kept
            values = regex_reward(prompts, completions, **columns)
            record["reward"].append(sum(values) / len(values))
            return values

        trainer = GRPOTrainer(model=model, reward_funcs=regex, args=args, train_dataset=dataset,
                              processing_class=tokenizer, callbacks=[StepClock()],
                              peft_config=LoraConfig(r=lora["rank"], lora_alpha=lora["alpha"],
                                                     lora_dropout=lora["dropout"], target_modules=lora["targets"]))
        generate_and_score, generate = trainer._generate_and_score_completions, trainer._generate_single_turn
        compute_loss = trainer.compute_loss

        def timed_rollout(inputs):
            start = time.perf_counter()
            batch = generate_and_score(inputs)
            record["rollout_s"].append(time.perf_counter() - start)
            return batch

        def timed_generate(*a, **k):
            start = time.perf_counter()
            out_ = generate(*a, **k)
            record["generate_s"].append(time.perf_counter() - start)
            return out_

        def recorded_loss(model_, inputs, *a, **k):
            loss = compute_loss(model_, inputs, *a, **k)
            micro["loss"].append(float(loss.detach()))
            micro["tokens"].append(int(inputs["prompt_mask"].sum() + inputs["completion_mask"].sum()))
            micro["completion_tokens"].append(int(inputs["completion_mask"].sum()))
            return loss

        trainer._generate_and_score_completions = timed_rollout
        trainer._generate_single_turn = timed_generate
        trainer.compute_loss = recorded_loss
        start = time.perf_counter()
        trainer.train()
        total_s = time.perf_counter() - start
    update = [s - r for s, r in zip(record["step_s"], record["rollout_s"])]
    result = summary({**record, "update_s": update}, warmup)
    median = record["step_s"].index(result["step_s"])
    trainable = int(sum(p.numel() for p in trainer.model.parameters() if p.requires_grad))
    return {**result, "generate_s": record["generate_s"][median], "train_s": total_s,
            "peak_rss_mb": peak_rss_mb(), "prompt_ids": prompt_ids, "trainable": trainable, "threads": threads,
            "torch_threads": torch.get_num_threads(), "optim": str(args.optim.value)}


# ---- orchestration -----------------------------------------------------------------------------------

def run_worker(kind: str, passive: bool = False, **kwargs) -> dict:
    import subprocess
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    argv = [sys.executable, __file__, "--worker", kind, "--out", str(out)]
    for key, value in kwargs.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    env = {**os.environ, "GLOG_v": "3", **({"OMP_WAIT_POLICY": "PASSIVE"} if passive else {})}
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} worker failed:\n{proc.stderr[-4000:]}")
    result = json.loads(out.read_text())
    out.unlink()
    return result


def estimate_mb(model_dir: Path, prompts: Path, seq: int, accumulation: int) -> float:
    """core.spec.memory's estimate of a core.train worker for this GRPO run (its sequence: the longest prompt
    plus grpo.max_new_tokens, as the run pads)."""
    from core.spec.config import load_config
    from core.spec.memory import estimate_memory
    from core.spec.model_args import read_model_args
    config = load_config(BASE_CONFIG, overrides(model_dir, prompts, Path(tempfile.gettempdir()), 1, accumulation))
    return estimate_memory(config, read_model_args(model_dir), seq).total_mb


def update_flops(model_dir: Path, seq: int) -> float:
    """FLOPs of the update (forward and backward of ROWS rows of `seq` tokens, LoRA: no frozen-weight gradient),
    as bench/train_step.py counts a LoRA step's matmuls (its LoRA term at r8: a small share)."""
    return matmul_flops(model_dir, "lora", ROWS, seq)["flops"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="demo,0.5b", help="comma list of " + ", ".join(CONFIGS))
    parser.add_argument("--models-dir", default=os.path.join(tempfile.gettempdir(), "mindtune-bench"),
                        help="where the 0.5b checkpoint is made (kept: ~1 GB)")
    parser.add_argument("--steps", type=int, default=3, help="timed steps (median reported)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first (compilation)")
    parser.add_argument("--rounds", type=int, default=1, help="mindtune/TRL worker pairs, order alternating")
    parser.add_argument("--torch-threads", type=int, default=0,
                        help="TRL's torch threads (default 0: the cores this process may use)")
    parser.add_argument("--passive", action="store_true",
                        help="OMP_WAIT_POLICY=PASSIVE in both workers: PyTorch's OpenMP threads sleep at each op's end "
                             "instead of spinning (on a loaded machine the spinning fights the other work; mindtune's "
                             "kernel threads are joined per call, not spinning)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--prompts", help=argparse.SUPPRESS)
    parser.add_argument("--accumulation", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        common = (Path(args.model_dir), Path(args.prompts), args.steps, args.warmup, args.accumulation)
        if args.worker == "mindtune":
            result = worker_mindtune(*common)
        else:
            result = worker_trl(*common, args.torch_threads)
        Path(args.out).write_text(json.dumps(result))
        return

    names = args.configs.split(",")
    for name in names:
        if name not in CONFIGS:
            raise SystemExit(f"--configs: unknown {name!r}; valid: {', '.join(CONFIGS)}")
    print(f"CPU: {cpu_model()}, {len(os.sched_getaffinity(0))} cores usable; load average "
          + " ".join(f"{v:.2f}" for v in os.getloadavg())
          + ("; OMP_WAIT_POLICY=PASSIVE in both workers" if args.passive else ""), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        prompts = write_prompts(Path(tmp))
        peak = run_train_step_worker("matmul")
        print_peak("before the steps", peak)
        for name in names:
            if name == "demo":
                model_dir = ROOT / "models" / "tiny-demo"
            else:
                from bench.real_models import make_model
                model_dir = make_model(Path(args.models_dir) / "qwen2.5-0.5b", "0.5b")
            accumulation = ACCUMULATION[name]
            common = dict(model_dir=model_dir, prompts=prompts, steps=args.steps, warmup=args.warmup,
                          accumulation=accumulation, passive=args.passive)
            results = []
            for n in range(args.rounds):  # alternate the order: each pair ran under about the same load
                order = ("mindtune", "trl") if n % 2 == 0 else ("trl", "mindtune")
                threads = {"trl": {"torch_threads": args.torch_threads}, "mindtune": {}}
                got = {kind: run_worker(kind, **common, **threads[kind]) for kind in order}
                results.append((got["mindtune"], got["trl"]))
            wall = [tr["step_s"] / mt["step_s"] for mt, tr in results]
            mt, tr = results[sorted(range(len(wall)), key=wall.__getitem__)[(len(wall) - 1) // 2]]
            row = dict(name=name, mt=mt, tr=tr, accumulation=accumulation,
                       estimate=estimate_mb(model_dir, prompts, mt["seq_len"], accumulation),
                       flops=update_flops(model_dir, mt["seq_len"]), wall=wall,
                       cpu=[t["step_cpu_s"] / m["step_cpu_s"] for m, t in results])
            rows.append(row)
            print_row(row, max(peak.values()))
        after = run_train_step_worker("matmul")
        print_peak("after the steps", after)
    print("load average after: " + " ".join(f"{v:.2f}" for v in os.getloadavg()), flush=True)
    print_table(rows, max(*peak.values(), *after.values()))


def cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU"
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")),
                 "unknown CPU")
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    avx512 = sorted(f for f in flags if f.startswith("avx512"))
    return model + (f" ({', '.join(avx512)})" if avx512 else " (no AVX-512)")


def micro_batches(row: dict) -> str:
    accumulation = row["accumulation"]
    return (f"{accumulation} micro batches of {PROMPTS // accumulation} prompts" if accumulation > 1
            else f"one micro batch of {PROMPTS} prompts")


def print_row(row: dict, peak_gflops: float) -> None:
    mt, tr = row["mt"], row["tr"]
    same = "the same" if mt["prompt_ids"] == tr["prompt_ids"] else "DIFFERENT"
    lengths = sorted(len(p) for p in mt["prompt_ids"])
    print(f"[{row['name']} grpo lora, {micro_batches(row)}] prompts: {same} token ids on both sides "
          f"({lengths[0]}-{lengths[-1]} tokens); completion tokens per step mindtune {mt['completion_tokens']}, "
          f"TRL {tr['completion_tokens']}", flush=True)
    for label, r in (("mindtune", mt), ("TRL", tr)):
        extra = (f"kernels {r['kernels']}, rollouts on the inference kernel {r['inference_kernel']}, setup "
                 f"{r['setup_s']:.1f} s, steps without an update (every group alike) {r.get('no_update_steps')}"
                 if label == "mindtune"
                 else f"generate {r['generate_s']:.3f} s of the rollout, {r['torch_threads']} torch threads, "
                      f"optim {r['optim']}")
        print(f"    {label}: step {r['step_s']:.3f} s (each: {', '.join(f'{v:.2f}' for v in r['steps'])}), "
              f"rollout {r['rollout_s']:.3f} s, update {r['update_s']:.3f} s "
              f"({row['flops'] / r['update_s'] / 1e9:.0f} GFLOP/s of {peak_gflops:.0f}); "
              f"{r['completion_tokens'] / r['step_s']:.0f} completion tok/s; peak RSS {r['peak_rss_mb']:.0f} MB; "
              f"losses {', '.join(f'{v:.3g}' for v in r['losses'])}; rewards "
              f"{', '.join(f'{v:.3f}' for v in r['rewards'])}; trainable {r['trainable']}; {extra}", flush=True)
    print(f"    ratios (TRL / mindtune): step {tr['step_s'] / mt['step_s']:.2f}, rollout "
          f"{tr['rollout_s'] / mt['rollout_s']:.2f}, update {tr['update_s'] / mt['update_s']:.2f}, step CPU time "
          f"{tr['step_cpu_s'] / mt['step_cpu_s']:.2f}; mindtune peak / estimate "
          f"{mt['peak_rss_mb'] / row['estimate']:.2f} ({row['estimate']:.0f} MB estimated)", flush=True)
    if len(row["wall"]) > 1:
        print("    rounds: step ratio " + ", ".join(f"{r:.2f}" for r in row["wall"]) + "; CPU-time ratio "
              + ", ".join(f"{r:.2f}" for r in row["cpu"]), flush=True)


def print_table(rows: list[dict], peak_gflops: float) -> None:
    print(f"\nGRPO step: {PROMPTS} prompts x {GENERATIONS} completions x {NEW_TOKENS} new tokens, LoRA r16 alpha 32 on "
          f"the seven projections, fp32, beta 0, dapo; ratio = TRL time / mindtune time (above 1: mindtune faster); "
          f"tok/s = completion tokens / step time; update utilization against the fp32 matmul peak "
          f"({peak_gflops:.1f} GFLOP/s)")
    print("| config | mindtune step (rollout + update) | TRL step (rollout + update) | step ratio | rollout ratio "
          "| update ratio | CPU-time ratio | tok/s mindtune / TRL | update util. mindtune / TRL "
          "| peak RSS mindtune / TRL | estimate | mindtune peak / estimate | first loss mindtune / TRL |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        mt, tr = r["mt"], r["tr"]
        print(f"| {r['name']} ({micro_batches(r)}) | {mt['step_s']:.2f} s ({mt['rollout_s']:.2f} + {mt['update_s']:.2f}) "
              f"| {tr['step_s']:.2f} s ({tr['rollout_s']:.2f} + {tr['update_s']:.2f}) | {tr['step_s'] / mt['step_s']:.2f} "
              f"| {tr['rollout_s'] / mt['rollout_s']:.2f} | {tr['update_s'] / mt['update_s']:.2f} "
              f"| {tr['step_cpu_s'] / mt['step_cpu_s']:.2f} "
              f"| {mt['completion_tokens'] / mt['step_s']:.0f} / {tr['completion_tokens'] / tr['step_s']:.0f} "
              f"| {100 * r['flops'] / mt['update_s'] / 1e9 / peak_gflops:.0f}% / "
              f"{100 * r['flops'] / tr['update_s'] / 1e9 / peak_gflops:.0f}% "
              f"| {mt['peak_rss_mb']:.0f} / {tr['peak_rss_mb']:.0f} MB | {r['estimate']:.0f} MB "
              f"| {mt['peak_rss_mb'] / r['estimate']:.2f} ({100 * (mt['peak_rss_mb'] / r['estimate'] - 1):+.0f}%) "
              f"| {mt['losses'][0]:.3g} / {tr['losses'][0]:.3g} |")


if __name__ == "__main__":
    main()
