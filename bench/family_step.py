"""Train-step cost of the Gemma 2, Gemma 3, Phi-4-mini (and Qwen3, Mistral-window, GLM-4, OLMo 2) shapes: fused CPU kernels against
MindSpore's composed ops, and what the part that stays composed (Gemma 2's final-logit soft-cap,
applied to the logits before the loss kernel) costs, measured as ratios inside one process.

For each family a small model (random weights, built from a hub-style config.json: hidden 256,
4 layers, GQA 4/2 heads of 64, intermediate 1024, vocabulary 32k, window 128 on the sliding
layers), LoRA r=8 on every projection or full fine-tuning, micro batch 4 x 256, every token
labelled. Variants, each its own compiled core.engine.train_step.TrainStep, stepped in turn (A, B, C, A,
B, C, ...) so that the machine's load hits all alike; each step's wall time and this process's CPU
time (all its threads: what other processes on a loaded machine change least) are kept, medians
printed, and the ratios of both:
  fused     core.engine.fused.enable as core.train runs it;
  composed  no kernels (what MINDTUNE_FUSED_KERNELS=0, AMP or a missing compiler give);
  cap-composed  fused, but the final-logit cap as MindSpore ops in front of the plain loss kernel
            (Gemma 2 only; how it ran before the loss kernel took the cap);
  no-cap    fused, final_logit_softcapping removed (Gemma 2 only): fused / no-cap is what the cap
            costs at all.

    .venv/bin/python bench/family_step.py                           # all families, LoRA and full
    .venv/bin/python bench/family_step.py --families gemma2 --methods lora --rounds 8
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BATCH, SEQ = 4, 256
_SHAPE = dict(vocab_size=32768, hidden_size=256, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, head_dim=64, max_position_embeddings=1024, bos_token_id=2, eos_token_id=1,
              pad_token_id=0)
CONFIGS = {
    "gemma2": dict(_SHAPE, architectures=["Gemma2ForCausalLM"], model_type="gemma2", sliding_window=128,
                   query_pre_attn_scalar=64, attn_logit_softcapping=50.0, final_logit_softcapping=30.0),
    "gemma3": dict(_SHAPE, architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", sliding_window=128,
                   sliding_window_pattern=2, query_pre_attn_scalar=64, rope_theta=1e6, rope_local_base_freq=1e4),
    "phi4-mini": dict(_SHAPE, architectures=["Phi3ForCausalLM"], model_type="phi3", partial_rotary_factor=0.75,
                      tie_word_embeddings=True, original_max_position_embeddings=128,
                      rope_scaling={"type": "longrope", "short_factor": [1.0] * 24,
                                    "long_factor": [1.0 + 0.25 * i for i in range(24)]}),
    # the dense families of issue 15 (families engineer): QK-norm per head / over the projection,
    # window, partial interleaved RoPE with GLM-4's extra norms
    "qwen3": dict(_SHAPE, architectures=["Qwen3ForCausalLM"], model_type="qwen3", rope_theta=1e6),
    "mistral-window": dict(_SHAPE, architectures=["MistralForCausalLM"], model_type="mistral", sliding_window=128),
    "glm4": dict(_SHAPE, architectures=["Glm4ForCausalLM"], model_type="glm4", partial_rotary_factor=0.5,
                 attention_bias=True),
    "olmo2": dict(_SHAPE, architectures=["Olmo2ForCausalLM"], model_type="olmo2"),
}


def build_step(cfg: dict, method: str, kernels: bool, cap_in_loss: bool = True):
    """A compiled train step for `cfg` (random weights, seed 0) and the kernels line it reports;
    cap_in_loss=False keeps the final-logit cap composed in front of the plain loss kernel."""
    import mindspore as ms
    import core.engine.fused as fused
    from core.engine.lora import inject_lora, mark_only_lora_trainable
    from core.engine.model import CausalLM, ModelArgs, share_layer_graphs
    from core.engine.train_step import TrainStep, WarmupDecaySchedule, adamw
    ms.set_seed(0)
    model = CausalLM(ModelArgs.from_hf_config(cfg))
    if method == "lora":
        inject_lora(model, 8, 16.0, 0.0, list(model.args.spec.projections))
        params = mark_only_lora_trainable(model)
    else:
        params = list(model.trainable_params())
    how = fused.enable(model) if kernels else "composed (kernels not enabled)"
    if not cap_in_loss and model.cap_in_loss:
        model.fused_loss, model.cap_in_loss = fused.loss_variants(fused.build())(), False
    share_layer_graphs(model)
    model.set_train(True)
    step = TrainStep(model, adamw(params, WarmupDecaySchedule(1e-4, 0, 1000, "constant", 1.0), 0.0), 1.0, None)
    return step, how


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(CONFIGS))
    parser.add_argument("--methods", default="lora,full")
    parser.add_argument("--rounds", type=int, default=6, help="timed steps per variant (after 2 warm-up)")
    args = parser.parse_args(argv)
    import numpy as np
    from core.engine.generate import use_device
    use_device("cpu")
    rng = np.random.default_rng(0)
    ids = rng.integers(3, _SHAPE["vocab_size"], (BATCH, SEQ)).astype(np.int32)
    batch = [(ids, ids.copy(), np.ones((BATCH, SEQ), np.int32))]
    print(f"micro batch {BATCH} x {SEQ}; median step seconds of {args.rounds} interleaved steps per variant "
          "(the machine is shared: read the ratios)")
    for family in args.families.split(","):
        for method in args.methods.split(","):
            cfg = CONFIGS[family]
            variants = {"fused": (cfg, True, True), "composed": (cfg, False, True)}
            if cfg.get("final_logit_softcapping"):
                variants["cap-composed"] = (cfg, True, False)
                variants["no-cap"] = (dict(cfg, final_logit_softcapping=None), True, True)
            steps = {name: build_step(c, method, *rest) for name, (c, *rest) in variants.items()}
            times: dict[str, list[float]] = {name: [] for name in steps}
            cpu: dict[str, list[float]] = {name: [] for name in steps}
            losses: dict[str, float] = {}
            for n in range(2 + args.rounds):
                for name, (step, _) in steps.items():
                    t, c = time.perf_counter(), time.process_time()
                    loss = float(step(batch)[0])
                    if n >= 2:
                        times[name].append(time.perf_counter() - t)
                        cpu[name].append(time.process_time() - c)
                    losses.setdefault(name, loss)
            median = {name: statistics.median(t) for name, t in times.items()}
            median_cpu = {name: statistics.median(t) for name, t in cpu.items()}
            print(f"\n{family} {method}: kernels {steps['fused'][1]}")
            for name, seconds in median.items():
                print(f"  {name:12} {seconds:7.3f} s/step (CPU {median_cpu[name]:7.3f} s)  "
                      f"{BATCH * SEQ / seconds:8.0f} tokens/s  first loss {losses[name]:.5f}")

            def ratio(a, b):
                return f"{median[a] / median[b]:.2f}x wall, {median_cpu[a] / median_cpu[b]:.2f}x CPU"
            print(f"  composed / fused     = {ratio('composed', 'fused')}")
            if "no-cap" in median:
                print(f"  cap-composed / fused = {ratio('cap-composed', 'fused')}  (the cap composed vs inside the "
                      "loss kernel)")
                print(f"  fused / no-cap       = {ratio('fused', 'no-cap')}  (what the cap costs)")


if __name__ == "__main__":
    main()
