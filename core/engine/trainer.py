"""The training loop: one run's setup, steps, evaluations, early stopping, checkpoints, resume and fork.

What the run minimises is its objective's (core.engine.objectives: the data, the step, the validation
figures); the loop knows no objective by name. `python -m core.train` (core/train.py) is its command
line and worker entry point; core.dry_run drives it for two steps.
"""
from __future__ import annotations

import contextlib
import math
import os
import resource
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import mindspore as ms
from mindspore import Tensor, amp, nn, ops

import core.engine.checkpoint as ckpt
import core.run.ckpt_store as ckpt_store
import core.engine.devices as devices
import core.engine.objectives as objectives
import core.run.launcher as launcher
import core.run.ranks as ranks
from core.engine.checkpoint import load_hf_model
from core.spec.errors import CheckpointError
from core.spec.codec import CodecError, build, encode
from core.spec.errors import said_of
from core.spec.messages import Message
from core.spec.config import Config, ConfigError, EarlyStoppingSettings, describe_fields
from core.spec.config import Problem as ConfigProblem
from core.data.files import DataError
from core.eval.generation_metrics import GenerationScores, score_apart
from core.engine.generate import SamplingSettings, generate
from core.engine.lora import LoraError, inject_lora, lora_merged, mark_only_lora_trainable
from core.spec.device_paths import peak_over_ranks
from core.spec.memory import recomputed_layers
from core.engine.layers import use_amp_o1
from core.engine.model import recompute_blocks, share_layer_graphs
from core.engine.profiling import StepProfiler, profile_message
from core.spec.model_args import check_run_settings, file_sha256, read_model_args
from core.spec.objectives import HIGHER_IS_BETTER
from core.engine.objectives.base import ppl as _ppl
from core.engine.grpo import GrpoError
from core.engine.preference import PreferenceError
from core.eval.rewards import RewardError
from core.run.reward_run import RewardModelError
from core.run.records import (GENERATION_FIELDS, BaselineEvent, BestSoFar, ControlEvent, EndEvent,
    EvalRecord, EventRecord, FinalFigures, ForkEvent, MetricRecord, ResumeEvent, SetupEvent, TrainRecord,
    ValidationFigures)
from core.run.rundir import ControlPoller, RunDir
from core.run.tracking import Trackers
from core.data.tokenizer import Tokenizer, TokenizerError
from core.engine.train_step import WarmupDecaySchedule, adamw, lr_at, optimizer_state

# a reward function's failure (grpo) is the user's code failing: said with its name, its traceback in train.log
USER_ERRORS = (ConfigError, DataError, CheckpointError, LoraError, TokenizerError, PreferenceError, GrpoError,
               RewardError, RewardModelError)
MONITORS = describe_fields()["early_stopping.monitor"].choices  # the validation metrics early stopping may watch
MAX_CONSECUTIVE_OVERFLOWS = 25  # fp16: loss-scale retries before a non-finite loss fails the run
# Fault injection for tests only (tests/core/test_hang_judges.py): with this set to N, the worker's
# step N never returns (it sleeps, so the process is running, not stopped), as a deadlocked step would.
ENV_TEST_HANG_AT_STEP = "MINDTUNE_TEST_HANG_AT_STEP"


class TrainingFailed(RuntimeError):
    """Ends the run as `failed` with this message (a core.spec.messages.Message: `said`) as the
    reason and `kind` as its failure_kind."""

    def __init__(self, message: str, kind: str = "nonfinite"):
        super().__init__(message)
        self.kind = kind

    @property
    def said(self) -> list[str]:
        return [self.args[0]]


@dataclass
class LoopState:
    """Everything the loop needs besides weights and optimizer to continue exactly."""
    step: int = 0
    loss_ema: float | None = None
    val_loss_ema: float | None = None
    best_value: float | None = None
    best_step: int | None = None
    best_val_ppl: float | None = None  # the validation perplexity of the best evaluation
    bad_evals: int = 0
    overflow_steps: int = 0
    tokens_seen: int = 0
    control_seq: int = 0
    best_reward_accuracy: float | None = None  # preference objectives: at the best evaluation
    best_val_reward: float | None = None  # grpo: the mean validation reward at the best evaluation
    objective_state: dict | None = None  # the objective's own (grpo: its sampler), core.engine.objectives
    early_stopping: EarlyStoppingSettings = field(default_factory=EarlyStoppingSettings)

    def to_dict(self) -> dict:
        return encode(self)

    @classmethod
    def from_checkpoint(cls, data: dict, where: str) -> LoopState:
        """A checkpoint's `loop`, each field typed (core.spec.codec) and its early-stopping settings
        checked as the config checks them; a problem names `where` and the field."""
        return build(cls, data, where)


from core.engine.objectives.base import ema as _ema  # noqa: E402


def peak_memory_mb(device: str) -> float:
    """This process's peak: device allocator on GPU/Ascend, resident set size on the CPU.

    On Linux the RSS peak is VmHWM (/proc/self/status), the high-water mark of this program's own
    memory: getrusage's ru_maxrss also counts the process image before exec, i.e. the launching
    process's resident set (measured: a worker started by a 300 MB parent reported 333 MB of which
    9 MB were its own; one started from the test suite's 715 MB process reported 719 MB for a run
    that peaks at 562 MB)."""
    if device != "cpu":
        try:
            return ms.runtime.max_memory_allocated() / 2**20
        except Exception:  # noqa: BLE001 — fall back to RSS when the runtime API is unavailable
            pass
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _tensor_source(param, before_read) -> ckpt_store.TensorSource:
    def read():
        before_read()
        return param.asnumpy()
    return ckpt_store.TensorSource(tuple(param.shape), np.dtype(ms.dtype_to_nptype(param.dtype)), read)


class Cluster:
    """Rank, world size and the few collective decisions every rank must agree on."""

    def __init__(self, data_parallel: int):
        self.rank, self.world = 0, 1
        self._sum = None
        if data_parallel > 1:
            if "MS_ROLE" not in os.environ and "RANK_SIZE" not in os.environ:
                raise ConfigError(Message("train.needs_msrun", data_parallel=data_parallel))
            from mindspore.communication import get_group_size, get_rank, init
            init()
            self.rank, self.world = get_rank(), get_group_size()
            ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True,
                                         device_num=self.world)
            self._sum = ops.AllReduce()

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def reducer(self, params) -> nn.Cell | None:
        return nn.DistributedGradReducer(params, mean=True, degree=self.world) if self.world > 1 else None

    def sum(self, values: list[float]) -> list[float]:
        if self._sum is None:
            return list(values)
        return [float(v) for v in self._sum(Tensor(np.asarray(values, np.float32))).asnumpy()]

    def from_main(self, values: list[float]) -> list[float]:
        """Rank 0's values on every rank."""
        return self.sum([v if self.is_main else 0.0 for v in values])


class Trainer:
    def __init__(self, config: Config, run: RunDir, cluster: Cluster):
        self.cfg, self.run, self.cluster = config, run, cluster
        self.state = LoopState(early_stopping=config.early_stopping)
        self.control = ControlPoller(run)
        self.stop_requested = False  # by the console, through control.json
        self.stop_now_requested = False  # ... as "Stop now"
        self.stop_signal = False
        self.stop_forced = False      # the stop came as "Stop now" or SIGTERM, not a graceful request
        self.steps_here = 0           # steps this process ran (the first compiles)
        self.saved_step: int | None = None  # the step this process last saved
        self.evals_here = 0
        # execute() replaces both with the run's attempt; a Trainer driven directly (core.dry_run) keeps them
        self.generation = 1
        self.heartbeat = ranks.Heartbeat(run, ranks.env_rank(), 1, config.parallel.hang_timeout_s)
        self._streak: dict | None = None  # the current run of skipped (overflowed) steps
        self.started = time.time()
        self.tokens_per_s_history: list[float] = []
        self.trackers = Trackers.none()  # execute() opens the configured ones (rank 0)

    # ---- logging --------------------------------------------------------------------------
    def emit(self, record: MetricRecord):
        if self.cluster.is_main:
            record = record.replace(step=self.state.step, time=round(time.time(), 3), generation=self.generation)
            self.run.append_metrics(record)
            self.trackers.record(record)  # the same record to TensorBoard / MLflow / SwanLab, when configured

    def event(self, record: EventRecord):
        self.emit(record)
        if self.cluster.is_main:
            print(f"[step {self.state.step}] {record.message}", flush=True)

    def status(self, **fields):
        if self.cluster.is_main:
            self.run.write_status(**fields)

    # ---- setup ----------------------------------------------------------------------------
    def setup(self):
        cfg = self.cfg
        seed = cfg.run.seed + 0  # same seed on every rank: identical initial weights and adapters
        ms.set_seed(seed)
        np.random.seed(seed)
        model_dir = Path(cfg.model.path)
        check_run_settings(cfg)  # context length, LoRA targets: ConfigError before data or weights are read
        self.tokenizer = Tokenizer.from_dir(model_dir)
        t0 = time.time()
        self.objective = objectives.build(self)  # what the run minimises: its data, step and figures
        self.splits = self.objective.load_data(self.tokenizer, seed)
        stats = self.splits.stats
        self.length = self.objective.sequence_length(self.splits)
        # GPU/Ascend: the estimate against the device's memory before the weights load, said whatever it finds
        if fit := devices.fit_check(cfg, read_model_args(model_dir), self.length):
            self.event(fit)
        # LoRA on the CPU with a 16-bit model.dtype: frozen weights stay 16-bit, compute is float32
        self.model = load_hf_model(model_dir, cfg.compute_dtype, storage_dtype=cfg.model.dtype)
        self.base_files = ckpt.weight_files(model_dir)
        if cfg.method == "lora":
            self.lora_modules = inject_lora(self.model, cfg.lora.rank, cfg.lora.alpha, cfg.lora.dropout,
                                            cfg.lora.target_modules)
            trainable = mark_only_lora_trainable(self.model)
        else:
            self.lora_modules = []
            trainable = list(self.model.trainable_params())
        trainable = self.objective.trainable(self.model, trainable)  # a reward model adds its head
        self.trainable = {p.name: p for p in trainable}
        self._apply_recompute()
        self.compute_model, self.loss_scaler = self._apply_amp()
        # the CPU's fused kernels for attention, norms, MLP gates and the loss (float32: AMP keeps the
        # composed ops), their threads split between the data-parallel workers msrun starts here
        threads = max(1, len(os.sched_getaffinity(0)) // self.cluster.world)
        kernels = devices.enable_kernels(self.model, threads, cfg.precision.amp_level, cfg.data.packing,
                                         cfg.precision.compute_dtype)
        layer_graphs = share_layer_graphs(self.model)  # compile time: one graph per kind of layer
        frozen = None
        if cfg.frozen_weights_16bit:
            frozen = (f"{cfg.model.dtype}, upcast to float32 per layer inside the step " +
                      ("by the fused kernel" if kernels.startswith("fused") else
                       "by MindSpore's Cast, which holds every layer's copy at once (no memory saved: the "
                       "fused kernels are off)"))
        pad_id = self.tokenizer.pad_token_id or 0
        self.batches = self.objective.batches(self.splits, seed, pad_id)
        self.total_steps = self._total_steps()
        self.schedule = WarmupDecaySchedule(cfg.train.learning_rate, cfg.train.warmup_steps, self.total_steps,
                                            cfg.train.schedule, cfg.train.min_lr_ratio)
        self.optimizer = adamw(trainable, self.schedule, cfg.train.weight_decay)
        aux_coef = self._router_aux_loss_coef()
        self.model.output_router_logits = aux_coef > 0  # before the steps compile
        self.train_step = self.objective.build_step(self.optimizer, self.loss_scaler,
                                                    self.cluster.reducer(self.optimizer.parameters), aux_coef)
        trainable_count = sum(int(np.prod(p.shape)) for p in trainable)
        total_count = sum(int(np.prod(p.shape)) for p in self.model.get_parameters())
        self.event(SetupEvent(
            message=f"global batch {cfg.global_batch_size} = micro {cfg.train.micro_batch_size} × accum "
            f"{cfg.train.grad_accum_steps} × data parallel {self.cluster.world}; {self.total_steps} steps; "
            f"trainable {trainable_count:,} of {total_count:,} parameters; sequence length {self.length}; "
            f"kernels {kernels}" + (f"; frozen weights {frozen}" if frozen else "") + self.objective.describe(),
            frozen_weights=frozen, global_batch_size=cfg.global_batch_size, total_steps=self.total_steps,
            trainable_params=trainable_count, total_params=total_count, seq_len=self.length,
            data=stats, lora_modules=len(self.lora_modules), layer_graphs=layer_graphs, kernels=kernels,
            setup_s=round(time.time() - t0, 2)))
        for warning in stats.warnings():  # fields the data format does not read: reported, never dropped silently
            self.event(EventRecord(event="warning", message=warning))

    def _router_aux_loss_coef(self) -> float:
        """The weight of the router's load-balancing loss: 0 unless `train.router_aux_loss` (off by
        default: transformers adds it only with output_router_logits, false in the hub's MoE configs);
        then `train.router_aux_loss_coef`, or the model config.json's router_aux_loss_coef."""
        t, moe = self.cfg.train, self.model.args.moe
        if not t.router_aux_loss:
            return 0.0
        if moe is None:
            raise TrainingFailed(Message("train.not_moe", architecture=self.model.args.architecture), kind="config")
        coef = moe.router_aux_loss_coef if t.router_aux_loss_coef is None else float(t.router_aux_loss_coef)
        self.event(EventRecord(message=f"router load-balancing loss on, weight {coef:g} (train metrics: aux_loss)"))
        return coef

    def _apply_recompute(self):
        if self.cfg.recompute.policy != "none":  # as many layers as core.spec.memory's estimate counts
            recompute_blocks(self.model, self.cfg.recompute.policy, recomputed_layers(self.cfg, self.model.args))

    def _apply_amp(self):
        p = self.cfg.precision
        if p.amp_level == "O0":
            return self.model, None
        dtype = ms.float16 if p.compute_dtype == "float16" else ms.bfloat16
        if p.amp_level == "O1":  # the projections in 16 bits, the rest float32 (core.engine.layers.amp_dense)
            use_amp_o1(self.model, dtype)
            model = self.model
        else:
            model = amp.auto_mixed_precision(self.model, p.amp_level, dtype=dtype)
        scaler = None
        if p.compute_dtype == "float16" and p.loss_scale == "dynamic":
            scaler = amp.DynamicLossScaler(p.initial_loss_scale, 2, 1000)
        elif p.compute_dtype == "float16" and p.loss_scale == "static":
            scaler = amp.StaticLossScaler(p.initial_loss_scale)
        return model, scaler

    def _total_steps(self) -> int:
        t = self.cfg.train
        if t.max_steps:
            return int(t.max_steps)
        return max(1, int(math.ceil(t.epochs * self.batches.steps_per_epoch)))

    # ---- evaluation -----------------------------------------------------------------------
    def evaluate(self, max_tokens: int | None = None) -> ValidationFigures:
        """The objective's validation figures (core.engine.objectives); `max_tokens` caps what the
        baseline evaluation reads."""
        self.model.set_train(False)
        figures = self.objective.evaluate(max_tokens)
        self.evals_here += 1
        self.model.set_train(True)
        return figures

    def downstream_scores(self, merge: bool = True) -> GenerationScores | None:
        """The greedy answers to the test prompts scored against their references: exact match
        (stripped strings equal), BLEU-4 and ROUGE-1/2/L (core.eval.generation_metrics). `merge` folds
        LoRA adapters into the weights for speed: only before and after training (see lora_merged)."""
        self.heartbeat.beat(self.state.step, "generate")
        records = getattr(self.splits, "test_records", None)
        if not records or not self.cfg.eval.downstream:
            return None
        if self.cfg.eval.max_eval_samples:
            records = records[: self.cfg.eval.max_eval_samples]
        self.model.set_train(False)
        eos = set(self.tokenizer.eos_token_ids) | set(self.model.args.eos_token_ids)
        settings = SamplingSettings(max_new_tokens=self.cfg.eval.max_new_tokens)
        # longest prompts first, so each chunk of 32 pads to nearly its own length (-10% time on the
        # demo's test set); greedy answers do not depend on the chunk (left padding is masked)
        records = sorted(records, key=lambda r: len(r.prompt_ids), reverse=True)
        answers = []
        # merged: called before training (B = 0: merging is exact) and after it, never between compiled steps
        with lora_merged(self.model) if merge else contextlib.nullcontext():
            for start in range(0, len(records), 32):
                chunk = records[start:start + 32]
                outs = generate(self.model, [r.prompt_ids for r in chunk], settings, eos, self.tokenizer.pad_token_id or 0)
                answers += [self.tokenizer.decode(o) for o in outs]
        self.model.set_train(True)
        return score_apart(answers, [r.answer for r in records])

    def scores_this_eval(self) -> GenerationScores | None:
        """The answer scores at a training evaluation, when eval.downstream_every_eval asks for them or
        early stopping watches one (every rank generates: they all decide on the same value)."""
        wanted = self.cfg.eval.downstream_every_eval or self.state.early_stopping.monitor in GENERATION_FIELDS
        return self.downstream_scores(merge=False) if wanted else None

    # ---- early stopping and control -------------------------------------------------------
    def improved(self, metrics: ValidationFigures, scores: GenerationScores | None = None) -> bool:
        """Update best/patience from an evaluation; True when this evaluation is the new best. A loss
        or perplexity improves by going down, an answer score (exact match, BLEU, ROUGE) by going up;
        a score this evaluation has not (no test set) changes nothing."""
        es = self.state.early_stopping
        higher_is_better = es.monitor in HIGHER_IS_BETTER
        value = (getattr(scores, es.monitor) if es.monitor in GENERATION_FIELDS and scores
                 else getattr(metrics, es.monitor, None))
        if value is None:
            return False
        best = self.state.best_value
        if (best is None or (value > best + es.min_delta if higher_is_better else value < best - es.min_delta)):
            self.state.best_value, self.state.best_step, self.state.bad_evals = value, self.state.step, 0
            # the perplexity that goes with the monitor: smoothed for an EMA monitor (a run's `best_val_ppl`)
            self.state.best_val_ppl = metrics.val_ppl_ema if es.monitor.endswith("_ema") else metrics.val_ppl
            self.state.best_reward_accuracy = metrics.reward_accuracy
            self.state.best_val_reward = getattr(metrics, "val_reward", None)
            return True
        self.state.bad_evals += 1
        return False

    def should_stop_early(self) -> bool:
        es = self.state.early_stopping
        return es.enabled and self.state.bad_evals >= es.patience

    def poll_control(self) -> bool:
        """Apply console requests (every rank agrees on rank 0's reading). True = stop now."""
        es = self.state.early_stopping
        request = self.control.poll() if self.cluster.is_main else None
        if request is not None:
            self.stop_requested = self.stop_requested or request.stop is not None
            self.stop_now_requested = self.stop_now_requested or request.stop == "now"
            try:
                es = request.early_stopping_over(self.state.early_stopping)
            except ConfigError as err:  # written by hand: the console checks what it writes
                self.event(EventRecord(event="warning", message=f"control request {request.seq} ignored: {err}"))
        # 2 = Stop now (or SIGTERM), 1 = a graceful stop request, 0 = go on
        stop = 2.0 if self.stop_now_requested or self.stop_signal else 1.0 if self.stop_requested else 0.0
        vector = [stop, float(self.control.last_seq),
                  float(es.enabled), float(MONITORS.index(es.monitor)), float(es.patience), es.min_delta]
        agreed = self.cluster.from_main(vector)
        signalled = self.cluster.sum([1.0 if self.stop_signal else 0.0])[0] > 0
        stop_any = signalled or agreed[0] > 0
        self.stop_forced = signalled or agreed[0] > 1.5
        if int(agreed[1]) > self.state.control_seq:
            new = EarlyStoppingSettings(enabled=agreed[2] > 0.5, monitor=MONITORS[int(agreed[3])],
                                        patience=int(agreed[4]), min_delta=agreed[5])
            if new != self.state.early_stopping:
                if new.monitor != self.state.early_stopping.monitor:
                    self.state.best_value, self.state.best_step, self.state.bad_evals = None, None, 0
                self.state.early_stopping = new
                self.event(ControlEvent(message=f"early stopping set to {new.to_dict()}",
                                        early_stopping=new.to_dict()))
            self.state.control_seq = int(agreed[1])
        return stop_any

    # ---- checkpoints ----------------------------------------------------------------------
    def save(self, pointers: tuple[str, ...]) -> None:
        if not self.cluster.is_main:
            return
        if self.saved_step == self.state.step:  # saved at this step already (the final eval): only point
            for name in pointers:
                ckpt_store.point(self.run.checkpoints_dir, name, self.state.step)
            return
        self.heartbeat.beat(self.state.step, "save")
        # each tensor is copied out of MindSpore only when the save writes it (a long save keeps beating)
        beat = lambda: self.heartbeat.beat(self.state.step, "save")  # noqa: E731
        weights = {name: _tensor_source(p, beat) for name, p in self.trainable.items()}
        opt_state = {name: _tensor_source(p, beat) for name, p in optimizer_state(self.optimizer).items()}
        if self.loss_scaler is not None:
            opt_state["loss_scale.scale_value"] = self.loss_scaler.scale_value.asnumpy()
            if hasattr(self.loss_scaler, "counter"):
                opt_state["loss_scale.counter"] = self.loss_scaler.counter.asnumpy()
        self.state.objective_state = self.objective.state()
        trainer_state = {
            "step": self.state.step, "loop": self.state.to_dict(), "data_position": self.batches.state(),
            "rng_state": np.asarray(ms.get_rng_state().asnumpy()).tolist(), "method": self.cfg.method,
            "base_model": {"path": str(Path(self.cfg.model.path).resolve()), "sha256": self.base_sha256()},
            "lora": self.cfg.lora.to_dict() if self.cfg.method == "lora" else None,
            "lora_modules": self.lora_modules, "config": self.cfg.to_dict(),
        }
        ckpt_store.save_train_checkpoint(self.run.checkpoints_dir, self.state.step, weights, opt_state, trainer_state,
                                   pointers=pointers)
        self.saved_step = self.state.step
        ckpt_store.prune_checkpoints(self.run.checkpoints_dir, self.cfg.train.keep_last_n)

    def base_sha256(self) -> str:
        if not hasattr(self, "_base_sha"):
            self._base_sha = file_sha256(self.base_files)
        return self._base_sha

    def restore(self, path: str) -> None:
        ckpt.verified_folder(path)  # every file against the manifest first: a corrupt one is named
        trainer_state = ckpt.read_trainer_state(path)
        if trainer_state.get("method") != self.cfg.method:
            raise CheckpointError(Message("train.method_resume", path=str(path), method=trainer_state.get("method"),
                                          run_method=self.cfg.method))
        with ckpt.train_checkpoint_file(path) as weights:  # read and copied one tensor at a time
            ckpt.set_parameters(self.trainable, weights, str(Path(path) / ckpt.WEIGHTS_FILE))
        opt_params = optimizer_state(self.optimizer)
        with ckpt.train_checkpoint_file(path, ckpt.OPTIMIZER_FILE) as opt_state:  # one tensor at a time
            scaler_state = {k: opt_state[k] for k in opt_state if k.startswith("loss_scale.")}
            ckpt.set_parameters(opt_params, opt_state.only(k for k in opt_state if not k.startswith("loss_scale.")),
                                str(Path(path) / ckpt.OPTIMIZER_FILE))
        self._restore_loss_scale(scaler_state)
        try:
            self.state = LoopState.from_checkpoint({**trainer_state["loop"], "control_seq": self.state.control_seq},
                                                   f"{ckpt.resolve_checkpoint(path) / ckpt.STATE_FILE}: loop")
        except (CodecError, ConfigError) as exc:
            raise CheckpointError(said_of(exc)) from None
        self.batches.load_state(trainer_state["data_position"])
        self.objective.load_state(self.state.objective_state)
        ms.set_rng_state(Tensor(np.asarray(trainer_state["rng_state"], dtype=np.uint8)))
        self.event(ResumeEvent(message=f"resumed from {path} at step {self.state.step}", source=str(path)))
        if self.cfg.method == "lora" and self.cfg.lora.dropout > 0:
            self.event(EventRecord(event="warning", message=(
                "lora.dropout > 0: weights, optimizer, schedule, loss scale and data position are "
                "restored exactly, but MindSpore's dropout kernel keeps its random state inside the "
                "compiled graph, so the dropout masks after resume differ from an uninterrupted run")))

    # Settings that must be equal for a fork to continue its parent's data order (else it starts
    # the new data from the beginning).
    FORK_DATA_KEYS = ("data", "train.micro_batch_size", "train.grad_accum_steps", "parallel.data_parallel",
                      "run.seed")

    def fork(self, path: str) -> None:
        """Start this new run from another run's checkpoint (`run.fork_from`): its trainable weights,
        its optimizer state and loss scale (the same parameters, so AdamW's moments still fit; the
        schedule is this run's, at the checkpoint's step), and its data position when the data and
        batch settings are the parent's. Steps continue from the checkpoint's, so the new run's
        curves continue the parent's. Best and patience start afresh."""
        weights, opt_state, trainer_state = ckpt.load_train_checkpoint(path)
        if trainer_state.get("method") != self.cfg.method:
            raise CheckpointError(Message("train.method_fork", path=str(path), method=trainer_state.get("method"),
                                          run_method=self.cfg.method))
        base = (trainer_state.get("base_model") or {}).get("sha256")
        if base and base != self.base_sha256():
            raise CheckpointError(Message("train.other_base", path=str(path), model=self.cfg.model.path))
        try:
            self.objective.take_forked(self.trainable, weights, str(Path(path) / ckpt.WEIGHTS_FILE))
        except CheckpointError as err:
            raise CheckpointError(Message("train.fork_parameters", reason=said_of(err))) from None
        step = int(trainer_state["step"])
        if step >= self.total_steps:
            raise ConfigError([ConfigProblem("train.max_steps", self.total_steps, Message(
                "train.fork_steps", step=step, example=step + max(step // 2, 1)))])
        opt_params = optimizer_state(self.optimizer)
        moments = {k: v for k, v in opt_state.items() if not k.startswith("loss_scale.")}
        optimizer = set(moments) == set(opt_params)
        if optimizer:
            ckpt.set_parameters(opt_params, moments, str(Path(path) / ckpt.OPTIMIZER_FILE))
            self._restore_loss_scale(opt_state)
        parent_cfg = trainer_state.get("config") or {}
        mine = self.cfg.to_dict()
        same_data = all(_setting(parent_cfg, k) == _setting(mine, k) for k in self.FORK_DATA_KEYS)
        if same_data:
            try:
                self.batches.load_state(trainer_state["data_position"])
            except (KeyError, ValueError):
                same_data = False
        loop = trainer_state.get("loop") or {}
        self.state.step = step
        self.state.tokens_seen = int(loop.get("tokens_seen") or 0)
        if (_setting(parent_cfg, "train.objective") or "sft") == self.cfg.train.objective:  # else another loss
            self.state.loss_ema, self.state.val_loss_ema = loop.get("loss_ema"), loop.get("val_loss_ema")
        if "rng_state" in trainer_state:
            ms.set_rng_state(Tensor(np.asarray(trainer_state["rng_state"], dtype=np.uint8)))
        parent = Path(path).resolve().parent.parent
        self.status(parent_run=parent.name, parent_step=step, step=step)
        took = ["weights"] + (["optimizer state"] if optimizer else []) + (["data position"] if same_data else [])
        self.event(ForkEvent(message=f"forked from {parent.name} at step {step} ({', '.join(took)})",
                             source=str(path), parent_run=parent.name, parent_step=step,
                             optimizer_state=optimizer, data_position=same_data))

    def _restore_loss_scale(self, opt_state: dict) -> None:
        if self.loss_scaler is not None and "loss_scale.scale_value" in opt_state:
            self.loss_scaler.scale_value.set_data(Tensor(opt_state["loss_scale.scale_value"], ms.float32))
            if "loss_scale.counter" in opt_state:
                self.loss_scaler.counter.set_data(Tensor(opt_state["loss_scale.counter"], ms.int32))

    # ---- the loop -------------------------------------------------------------------------
    def train_one_step(self) -> dict:
        if os.environ.get(ENV_TEST_HANG_AT_STEP) == str(self.state.step + 1):
            while True:  # a step that never ends (the hang judges' test)
                time.sleep(1)
        micro = self.objective.draw(self.batches)
        start = time.perf_counter()
        with devices.injected_overflow(self.loss_scaler, self.cluster.rank, self.state.step + 1):  # tests only
            out = self.objective.step(micro)
        out["step_time_s"] = time.perf_counter() - start
        return out

    def agree_on_step(self, out: dict, consecutive_overflows: int) -> int:
        """One all-reduce per step: the mean loss over ranks (what DP=1 would log for the same
        global batch), whether any rank saw a non-finite loss, and whether any skipped the update
        (its gradients overflowed). Returns the count of consecutive skipped steps; raises
        TrainingFailed past the limit, saying whether the loss or only the gradients overflowed."""
        loss_ok = math.isfinite(out["loss"])
        bad_loss, skipped, loss_sum = self.cluster.sum(
            [0.0 if loss_ok else 1.0, 0.0 if out["applied"] else 1.0, out["loss"] if loss_ok else 0.0])
        if bad_loss == 0:
            out["loss"] = loss_sum / self.cluster.world
        if bad_loss == 0 and skipped == 0:
            self._streak = None
            return 0
        self.state.overflow_steps += 1
        step = self.state.step + 1
        if consecutive_overflows == 0 or self._streak is None:
            self._streak = {"first_step": step, "first_scale": out["loss_scale"], "bad_loss": False}
        self._streak["bad_loss"] = self._streak["bad_loss"] or bad_loss > 0
        if self.loss_scaler is None:
            if bad_loss:
                raise TrainingFailed(Message("train.nonfinite_loss", step=step))
            raise TrainingFailed(Message("train.nonfinite_gradients", step=step, loss=f"{out['loss']:.4g}"))
        if consecutive_overflows + 1 < MAX_CONSECUTIVE_OVERFLOWS:
            return consecutive_overflows + 1
        if self._streak["bad_loss"]:
            raise TrainingFailed(Message("train.nonfinite_loss", step=step))
        scale = float(self.loss_scaler.scale_value.asnumpy())
        raise TrainingFailed(Message(
            "train.loss_scale_collapse", count=consecutive_overflows + 1, first_step=self._streak["first_step"],
            step=step, first_scale=f"{self._streak['first_scale']:.4g}", scale=f"{scale:.4g}"), kind="loss_scale")

    def log_train(self, out: dict, window: list[dict]):
        tokens = sum(o["tokens"] for o in window) * self.cluster.world
        seconds = sum(o["step_time_s"] for o in window)
        self.tokens_per_s_history.append(tokens / max(seconds, 1e-9))
        memory, per_rank = self.peak_memory()
        self.emit(TrainRecord(
            loss=out["loss"], loss_ema=self.state.loss_ema,
            lr=lr_at(self.schedule, max(int(self.optimizer.global_step.asnumpy().reshape(-1)[0]) - 1, 0)),
            grad_norm=out["grad_norm"], loss_scale=out["loss_scale"], tokens_per_s=tokens / max(seconds, 1e-9),
            step_time_s=seconds / len(window), peak_mem_mb=round(memory, 1), peak_mem_ranks_mb=per_rank,
            overflow_steps=self.state.overflow_steps, epoch=self.batches.epoch, total_steps=self.total_steps,
            aux_loss=out.get("aux_loss"), **self.objective.train_figures(out)))

    def peak_memory(self) -> tuple[float, list[float] | None]:
        """The run's peak memory as the Monitor shows it (core.spec.device_paths.peak_over_ranks: the
        ranks' sum on the CPU, the largest device's elsewhere) and, on devices with several ranks,
        each rank's peak (None otherwise)."""
        device = self.cfg.parallel.device
        mine = [0.0] * self.cluster.world
        mine[self.cluster.rank] = peak_memory_mb(device)
        per_rank = self.cluster.sum(mine)
        shown = peak_over_ranks(device, per_rank)
        return shown, ([round(v, 1) for v in per_rank] if device != "cpu" and self.cluster.world > 1 else None)

    def run_eval(self) -> bool:
        """Evaluate, log, checkpoint the best; True when early stopping says stop."""
        metrics = self.evaluate()
        scores = self.scores_this_eval()
        best = self.improved(metrics, scores)
        es = self.state.early_stopping
        generation = scores.figures().values() if scores else {}
        self.emit(EvalRecord(**metrics.values(), **generation, best_value=self.state.best_value,
                             best_step=self.state.best_step,
                             monitor=es.monitor, patience_left=max(es.patience - self.state.bad_evals, 0),
                             early_stopping_enabled=es.enabled))
        self.status(step=self.state.step, best=BestSoFar(metric=es.monitor, value=self.state.best_value,
                                                         step=self.state.best_step, val_ppl=self.state.best_val_ppl,
                                                         reward_accuracy=self.state.best_reward_accuracy,
                                                         val_reward=self.state.best_val_reward))
        if best and self.state.step > 0:
            self.save(("best", "last"))
        return self.should_stop_early()

    def loop(self) -> tuple[str, str]:
        cfg = self.cfg
        window, consecutive = [], 0
        self.model.set_train(True)
        profiler = StepProfiler(cfg.train.profile_steps, self.run, self.cluster.is_main, cfg.parallel.device)
        while self.state.step < self.total_steps:
            if self.poll_control():
                self.heartbeat.beat(self.state.step, "save")
                self.save(("last",))
                return "stopped", Message("run.stopped_forced" if self.stop_forced else "run.stopped_by_user")
            profiler.before_step(self.state.step + 1)
            if not self.steps_here:  # this process's first step compiles its graph: no hang watch yet
                self.heartbeat.beat(self.state.step, "compile")
            out = self.train_one_step()
            self.heartbeat.beat(self.state.step + 1, "train")
            self.steps_here += 1
            consecutive = self.agree_on_step(out, consecutive)
            self.state.step += 1
            if summary := profiler.after_step(self.state.step, last=self.state.step == self.total_steps):
                self.event(EventRecord(event="profile", message=profile_message(summary)))
            self.state.tokens_seen += out["tokens"] * self.cluster.world
            if consecutive == 0:
                self.state.loss_ema = _ema(self.state.loss_ema, out["loss"], 0.1)
            window.append(out)
            step = self.state.step
            if step % cfg.train.log_every == 0 or step == 1 or step == self.total_steps:
                self.log_train(out, window)
                self.status(step=step, total_steps=self.total_steps)
                window = []
            if step % cfg.train.eval_every == 0 or step == self.total_steps:
                if self.run_eval():
                    self.save(("last",))
                    es = self.state.early_stopping
                    return "early_stopped", Message("run.no_improvement", monitor=es.monitor, min_delta=es.min_delta,
                                                    patience=es.patience, best=f"{self.state.best_value:.4f}",
                                                    step=self.state.best_step)
            if step % cfg.train.save_every == 0 and step != self.total_steps:
                self.save(("last",))
        self.save(("last",))
        return "finished", Message("run.reached_steps", steps=self.total_steps)

    def execute(self, resume: str | None) -> None:
        status = self.run.read_status()
        self.generation = status.attempt  # every metrics record says which attempt wrote it
        self.heartbeat = ranks.Heartbeat(self.run, ranks.env_rank(), status.attempt, self.cfg.parallel.hang_timeout_s)
        self.heartbeat.beat(0, "setup")
        if self.cluster.world > 1:  # each rank's own log (logs/worker_N.log) says who it is
            print(f"rank {self.cluster.rank} of {self.cluster.world}: pid {os.getpid()} on {socket.gethostname()}",
                  flush=True)
        if self.cluster.is_main and status.state == "queued":
            self.run.write_status(state="starting", pid=os.getpid())
        fields = launcher.process_fields() if self.cluster.world == 1 else {}
        self.status(state="running", rank_count=self.cluster.world, **fields)
        if self.cluster.is_main:
            self.recover_leftovers()
            self.trackers = Trackers.open(self.cfg, self.run, resumed=bool(resume), report=self.event)
        try:
            self._execute(resume)
        except BaseException:  # a run that fails ends its trackers' runs as failed (finish() closes the others)
            self.trackers.close("failed")
            raise

    def _execute(self, resume: str | None) -> None:
        self.setup()
        if resume:
            self.restore(resume)
        elif self.cfg.run.fork_from:
            self.fork(self.cfg.run.fork_from)
        if self.cfg.run.fork_from:  # resumed or not: the fork point is the reference (dpo, kto, grpo with beta)
            said = self.objective.after_fork(self.cfg.run.fork_from)
            if said:
                self.event(EventRecord(event="info", message=said))
        if not resume and self.cfg.eval.baseline:
            # the model this run starts from (the fork point's, for a fork); eval.baseline: false skips it
            base = self.evaluate(self.cfg.eval.baseline_max_tokens)
            self.emit(EvalRecord(**base.values(), base=True))
            # a fork's adapters are not zero, so merging them for generation would not be exact
            # (core.engine.lora.lora_merged); its starting exact match is the parent's concern
            base_scores = None if self.cfg.run.fork_from else self.downstream_scores()
            start = "fork point" if self.cfg.run.fork_from else "base model"
            said = self.objective.baseline_text(base)
            self.event(BaselineEvent(
                message=f"{start}: {said}" + (f", {_scores_text(base_scores)}" if base_scores is not None else ""),
                **base.values(), **(base_scores.figures().values() if base_scores else {})))
        state, reason = self.loop()
        self.finish(state, reason)

    def recover_leftovers(self) -> None:
        """What an interrupted save or export left in this run's folders: repaired or swept, and said."""
        actions = ckpt_store.recover(self.run.checkpoints_dir) + ckpt_store.sweep(self.run.export_dir)
        for action in actions:
            self.event(EventRecord(event="recovery", message=f"checkpoints: {action}"))
        if not actions:
            print("checkpoints: no leftovers of interrupted saves", flush=True)

    def finish(self, state: str, reason: str) -> None:
        scores = None
        if self.state.best_step is not None and self.cluster.is_main and state != "stopped":
            scores = self.best_scores()
        if self.cluster.is_main:
            tps = self.tokens_per_s_history[1:] or self.tokens_per_s_history  # the first includes compilation
            final = FinalFigures(**(scores.figures().values() if scores else {}), best_val_ppl=self._best_val_ppl(),
                                 monitor=self.state.early_stopping.monitor,
                                 reward_accuracy=self.state.best_reward_accuracy,
                                 val_reward=self.state.best_val_reward, tokens_per_s=float(np.median(tps)) if tps else None,
                                 peak_mem_mb=round(peak_memory_mb(self.cfg.parallel.device), 1),
                                 wall_s=round(time.time() - self.started, 1), steps=self.state.step,
                                 overflow_steps=self.state.overflow_steps, tokens_seen=self.state.tokens_seen)
            note = ranks.resumable_note(self.run)
            if state == "stopped":
                reason = Message("run.with_note", reason=reason, note=note["note"])
            self.event(EndEvent(message=f"{state}: {reason}"
                                + (f" (best checkpoint: {_scores_text(scores)})" if scores else ""), **final.values()))
            self.trackers.close(state, best_checkpoint=self.run.checkpoint("best"))
            # the step the newest checkpoint holds (status.step is otherwise written every log_every steps)
            self.run.write_status(state=state, reason=reason, ended_at=time.time(), final=final,
                                  step=self.state.step, resumable_checkpoint=note["resumable_checkpoint"])
            print(f"run directory: {self.run.path}", flush=True)

    def _best_val_ppl(self) -> float | None:
        """The best evaluation's perplexity (a checkpoint saved before it was kept: from the best loss)."""
        if self.state.best_val_ppl is not None or self.state.best_value is None:
            return self.state.best_val_ppl
        monitor = self.state.early_stopping.monitor
        return _ppl(self.state.best_value) if "loss" in monitor else self.state.best_value if "ppl" in monitor else None

    def best_scores(self) -> GenerationScores | None:
        """The best checkpoint's answer scores (its weights loaded into the model first)."""
        if not self.splits.test_records or not self.cfg.eval.downstream:
            return None
        best_dir = self.run.checkpoint("best")
        if best_dir.exists():
            with ckpt.train_checkpoint_file(best_dir) as weights:  # one tensor at a time
                ckpt.set_parameters(self.trainable, weights, str(best_dir))
        return self.downstream_scores()


def _setting(config: dict, key: str):
    """A config dict's section ('data') or dotted field ('train.micro_batch_size')."""
    section, _, name = key.partition(".")
    value = config.get(section)
    return value.get(name) if name and isinstance(value, dict) else value


def _scores_text(scores: GenerationScores) -> str:
    """'exact match 0.395, BLEU 0.000, ROUGE-1 0.412, ROUGE-2 0.000, ROUGE-L 0.412 (200 answers, words)'."""
    return (f"exact match {scores.exact_match:.3f}, BLEU {scores.bleu:.3f}, ROUGE-1 {scores.rouge1:.3f}, "
            f"ROUGE-2 {scores.rouge2:.3f}, ROUGE-L {scores.rougeL:.3f} ({scores.count} answers, {scores.segmentation})")
