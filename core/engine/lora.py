"""In-house LoRA for `core.engine.model` on MindSpore: a Dense subclass with a low-rank update, injection by
module names or one regex, freezing, merge/unmerge, and adapter save/load in PEFT's file layout.

`LoRADense` keeps the base layer's `weight`/`bias` Parameter objects under their Hugging Face names
(`model.layers.0.self_attn.q_proj.weight`) and adds `<module>.lora_a` (rank, in) and
`<module>.lora_b` (out, rank). The update is `scaling · B · A` with `scaling = alpha / rank`, as in
PEFT, so an adapter saved here loads into `peft.PeftModel` and back unchanged.
"""
from __future__ import annotations

import contextlib
import json
import math
import numbers
import re
from pathlib import Path

import numpy as np

import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common.initializer import HeUniform, initializer

from core.run.atomic import atomic_write
from core.spec.errors import MessageError, first_of
from core.spec.messages import Message
from core.engine.layers import amp_dense
from core.spec.model_args import ALL_LINEAR, match_lora_targets
from core.spec.families import PROJECTION_NAMES
from core.engine.moe import LoRAStackedLinear, MoeExportError, StackedLinear, peft_moe_adapter, sparse_blocks
from core.weights.peft_format import (ADAPTER_CONFIG_NAME, ADAPTER_WEIGHTS_NAME, PEFT_PREFIX, PEFT_SUFFIXES,
                              peft_adapter_config, to_module_path)

# adapter_config.json keys whose non-default values change the maths; we refuse them on load
UNSUPPORTED_PEFT_OPTIONS = {"use_dora": False, "use_rslora": False, "fan_in_fan_out": False,
                            "layers_to_transform": None, "bias": "none"}


class LoraError(MessageError):
    """A LoRA setting, model or adapter file that cannot be used; the message says what would be valid."""


# ---------------------------------------------------------------------------------------------
# The layer
# ---------------------------------------------------------------------------------------------

class LoRADense(nn.Dense):
    """`nn.Dense` plus a low-rank update: y = x·Wᵀ + b + dropout(x)·Aᵀ·Bᵀ · alpha/rank.

    Built from an existing Dense, whose `weight`/`bias` Parameters it reuses (same objects), so the
    base keys and values are untouched. A is initialised like PEFT (kaiming-uniform, a=√5) and B is
    zero, so a fresh adapter changes nothing. LoRA parameters are float32 whatever the base dtype
    (like PEFT's `autocast_adapter_dtype`); the adapter maths is cast to the input dtype.
    """

    def __init__(self, base: nn.Dense, rank: int, alpha: float, dropout: float = 0.0):
        _check_hyperparameters(rank, alpha, dropout)
        # Build a 1×1-sized shell, then adopt the base layer's Parameters and shapes; this avoids
        # allocating a second full weight matrix for every injected layer.
        super().__init__(1, 1, weight_init="zeros", bias_init="zeros", has_bias=base.has_bias,
                         activation=base.activation, dtype=base.weight.dtype)
        self.in_channels, self.out_channels = base.in_channels, base.out_channels
        self.weight = base.weight  # (out, in)
        self.bias = base.bias  # (out,) or None
        # a 16-bit frozen weight of a float32 model (core.engine.layers.Precision): upcast per call
        self.frozen = getattr(base, "frozen", None)
        self.rank = int(rank)
        self.alpha = float(alpha)
        self.scaling = self.alpha / self.rank
        self.lora_a = Parameter(initializer(HeUniform(math.sqrt(5)), (self.rank, self.in_channels),
                                            ms.float32), name="lora_a")  # (rank, in)
        self.lora_b = Parameter(initializer("zeros", (self.out_channels, self.rank), ms.float32),
                                name="lora_b")  # (out, rank)
        self.lora_dropout = nn.Dropout(p=float(dropout))
        self.scaling_tensor = Tensor([self.scaling], ms.float32)
        # The settings the forward depends on (FORWARD_SETTINGS); each is set by the code that owns it,
        # and setting one picks the forward again (`_pick_forward`), so `construct` runs one path:
        self.merged = False  # True while scaling·B·A is folded into `weight` (merge_lora, merged_adapters)
        self.fused = None  # core.engine.fused.enable: the CPU kernel for the update (dropout 0, float32)
        self.fused_base = None  # core.engine.fused.enable: that kernel with a float32 base product inside
        self.amp = None  # AMP O1 (core.engine.layers.use_amp_o1): base and adapter products in this 16-bit dtype
        # True while a reference pass runs (core.engine.preference.adapters_off): the base layer alone. A
        # Python constant of the graph: the reference pass is its own jit function, compiled with it set
        self.adapter_off = False
        # a frozen adapter the reference adds while adapter_off (a preference run forked from a LoRA
        # checkpoint: the reference is that model): `set_reference_adapter`
        self.has_reference = False
        self._built = True
        self._pick_forward()

    FORWARD_SETTINGS = frozenset({"merged", "fused", "amp", "adapter_off", "has_reference"})

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name in LoRADense.FORWARD_SETTINGS and self.__dict__.get("_built"):
            self._pick_forward()

    def _pick_forward(self) -> None:
        """Choose the one path `construct` runs (`self.path`), from the settings; a compiled graph holds
        the path chosen when it was compiled, as it held the flags' values before:

        merged, merged_amp  Dense's own product on the merged weight (AMP: both in 16 bits)
        base, reference     the base product alone, plus the reference's frozen adapter when it has one
                            (adapter_off: a preference run's reference pass)
        fused               the base product, then one CPU kernel for x·Aᵀ·(s·B)ᵀ (float32 inputs)
        composed            the base product plus the adapter's two matmuls (dropout on x)
        `in_amp` (AMP O1, unmerged): the path runs with x in the 16-bit dtype, the sum back in x's dtype.
        A path is a name, not a bound method kept on the cell: with one, the demo's dry run failed to
        compile its shared layer graphs (core.engine.model.share_layer_graphs; MindSpore 2.10: "Miss
        argument input for parameter: rank")."""
        if self.merged:
            self.path, self.in_amp = ("merged" if self.amp is None else "merged_amp"), False
            return
        if self.adapter_off:
            path = "reference" if self.has_reference else "base"
        elif self.fused is not None and self.amp is None:  # AMP's inputs are 16-bit: the kernel is float32
            path = "fused"
        else:
            path = "composed"
        self.path, self.in_amp = path, self.amp is not None

    def construct(self, x):
        if self.in_amp:
            return ops.cast(self._run(ops.cast(x, self.amp)), x.dtype)
        return self._run(x)

    def _run(self, x):
        """`self.path`, a constant of the graph: one branch is compiled."""
        if self.path == "merged":
            return super().construct(x)
        if self.path == "merged_amp":
            return amp_dense(self, x, self.amp)
        if self.path == "base":
            return self._base_alone(x)
        if self.path == "reference":
            return self._reference(x)
        if self.path == "fused":
            return self._fused(x)
        return self._composed(x)

    # -- the paths (`_pick_forward`) --
    # Everything as 2-D MatMuls with transpose_b (like nn.Dense): a 3-D `ops.matmul` against a
    # 2-D weight becomes BroadcastTo + BatchMatMul, and its gradient a ReduceSum over the
    # broadcast copies — on the CPU that cost more than the base layer's own MatMul (profiled).

    def _base_alone(self, x):
        x2 = x.reshape(-1, x.shape[-1])  # (N, in)
        return self._output(self._base(x2), x.shape)

    def _reference(self, x):
        x2 = x.reshape(-1, x.shape[-1])  # (N, in)
        hidden = self.matmul(x2, ops.cast(self.reference_a, x2.dtype))  # (N, rank)
        out = self._base(x2) + self.matmul(hidden, ops.cast(self.reference_b, x2.dtype))  # (N, out)
        return self._output(out, x.shape)

    def _fused(self, x):
        if x.dtype != ms.float32:  # a 16-bit model's input: the kernel is float32 (a constant of the graph)
            return self._composed(x)
        x2 = x.reshape(-1, x.shape[-1])  # (N, in)
        # one kernel each way for x·Aᵀ·(s·B)ᵀ added to the base output (core/engine/kernels/lora.cc); a
        # float32 weight's product x·Wᵀ in the same kernel (its dx too: no AddN of two input gradients)
        if self.fused_base is not None:
            out = self.fused_base(self.weight, x2, self.lora_a, self.lora_b, self.scaling_tensor)[0]
            if self.has_bias:
                out = self.bias_add(out, self.bias)
        else:
            out = self.fused(self._base(x2), x2, self.lora_a, self.lora_b, self.scaling_tensor)[0]
        return self._output(out, x.shape)

    def _composed(self, x):
        x2 = x.reshape(-1, x.shape[-1])  # (N, in)
        hidden = self.matmul(self.lora_dropout(x2), ops.cast(self.lora_a, x.dtype))  # (N, rank)
        # scaling folded into B (out × rank), not applied to the (N, out) product
        out = self._base(x2) + self.matmul(hidden, ops.cast(self.lora_b * self.scaling, x.dtype))  # (N, out)
        return self._output(out, x.shape)

    def _base(self, x2):
        """The base layer's product (and bias) for x2 (N, in): (N, out), in AMP's dtype under AMP."""
        weight = self.weight if self.amp is None else ops.cast(self.weight, self.amp)
        out = self.matmul(x2, weight) if self.frozen is None else self.frozen(x2, self.weight)  # (N, out)
        if self.has_bias:
            out = self.bias_add(out, self.bias if self.amp is None else ops.cast(self.bias, self.amp))
        return out

    def _output(self, out, x_shape):
        if self.activation_flag:
            out = self.activation(out)
        return out.reshape(x_shape[:-1] + (self.out_channels,))

    def set_reference_adapter(self, name: str, lora_a: np.ndarray, lora_b: np.ndarray) -> None:
        """Freeze a copy of an adapter (A (rank, in), B (out, rank)) as the reference's: frozen
        Parameters (not constants: layers sharing one compiled graph take each its own), named after
        the layer `name`. Call before the reference pass compiles."""
        self.reference_a = Parameter(Tensor(np.asarray(lora_a, np.float32)), name=f"{name}.reference_a",
                                     requires_grad=False)
        self.reference_b = Parameter(Tensor(np.asarray(lora_b, np.float32) * self.scaling),
                                     name=f"{name}.reference_b", requires_grad=False)
        self.has_reference = True

    def extend_repr(self):
        return f"{super().extend_repr()}, rank={self.rank}, alpha={self.alpha}, merged={self.merged}"


def _check_hyperparameters(rank, alpha, dropout) -> None:
    if not isinstance(rank, numbers.Integral) or isinstance(rank, bool) or rank <= 0:
        raise LoraError(Message("lora.rank", py_value=repr(rank)))
    if not isinstance(alpha, numbers.Real) or isinstance(alpha, bool) or alpha <= 0:
        raise LoraError(Message("lora.alpha", py_value=repr(alpha)))
    if not isinstance(dropout, numbers.Real) or isinstance(dropout, bool) or not 0 <= dropout < 1:
        raise LoraError(Message("lora.dropout", py_value=repr(dropout)))


LORA_CELLS = (LoRADense, LoRAStackedLinear)  # LoRA on a Dense, and on a layer's stacked experts (core.engine.moe)


def lora_modules(model: nn.Cell) -> dict[str, LoRADense | LoRAStackedLinear]:
    """Dotted module name -> LoRA layer, in model order."""
    return {name: cell for name, cell in model.cells_and_names() if isinstance(cell, LORA_CELLS)}


# ---------------------------------------------------------------------------------------------
# Injection
# ---------------------------------------------------------------------------------------------

def inject_lora(model: nn.Cell, rank: int, alpha: float, dropout: float,
                target_modules: list[str] | tuple[str, ...] | str) -> list[str]:
    """Replace the matching `nn.Dense` sub-cells of `model` by `LoRADense` in place (a mixture of
    experts' stacked projections, `core.engine.moe.StackedLinear`, by `LoRAStackedLinear`).

    `target_modules` is a list of names (a module matches when its dotted name is the name or
    ends with `.<name>`), one regex string matched with `re.fullmatch` against the dotted name, as
    PEFT does, or "all-linear": the model family's own projections (`FamilySpec.default_lora_targets`;
    never the output layer or an MoE router). Returns the replaced module names. A name or regex
    that matches nothing is an error.
    """
    _check_hyperparameters(rank, alpha, dropout)
    dense = {name: cell for name, cell in model.cells_and_names() if isinstance(cell, (nn.Dense, StackedLinear))}
    targets = select_target_modules(dense, target_modules, family_targets(model))
    already = [name for name in targets if isinstance(dense[name], LORA_CELLS)]
    if already:
        raise LoraError(Message("lora.already_adapted", module=already[0], count=len(already)))
    experts = [name for name in targets if isinstance(dense[name], StackedLinear)]
    if experts and dropout:
        raise LoraError(Message("lora.expert_dropout", dropout=dropout, module=experts[0]))
    for name in targets:
        cell = dense[name]
        lora = (LoRAStackedLinear(cell, rank, alpha) if isinstance(cell, StackedLinear)
                else LoRADense(cell, rank, alpha, dropout))
        _replace_cell(model, name, lora)
    return targets


def family_targets(model: nn.Cell) -> tuple[str, ...]:
    """What "all-linear" means for `model`: its family's default LoRA targets."""
    args = getattr(model, "args", None)
    return args.spec.default_lora_targets if args is not None else PROJECTION_NAMES


def select_target_modules(dense: dict[str, nn.Dense], target_modules,
                          family: tuple[str, ...] = PROJECTION_NAMES) -> list[str]:
    """The names in `dense` (dotted name -> Dense) that `target_modules` selects, in model order
    ("all-linear": the names in `family`)."""
    if isinstance(target_modules, str) and target_modules != ALL_LINEAR:
        try:
            re.compile(target_modules)
        except re.error as exc:
            raise LoraError(Message("lora.bad_regex", pattern=target_modules, re_says=str(exc))) from exc
    elif not isinstance(target_modules, str) and (
            not isinstance(target_modules, (list, tuple)) or not target_modules or
            not all(isinstance(t, str) and t for t in target_modules)):
        raise LoraError(Message("lora.bad_targets", py_value=repr(target_modules)))
    chosen, unmatched = match_lora_targets(dense, target_modules, family)
    if isinstance(target_modules, str) and target_modules != ALL_LINEAR and not chosen:
        _raise_no_match("lora.regex_matches_nothing", dense, pattern=target_modules, example=_example_name(dense))
    if unmatched:
        quoted = ", ".join(f"'{name}'" for name in unmatched)
        _raise_no_match("lora.names_match_nothing" if len(unmatched) > 1 else "lora.name_matches_nothing", dense,
                        names=quoted)
    return chosen


def _raise_no_match(key: str, dense: dict[str, nn.Dense], **params) -> None:
    found = list(dict.fromkeys(name.rsplit(".", 1)[-1] for name in dense))
    ordered = [p for p in PROJECTION_NAMES if p in found] + [p for p in found if p not in PROJECTION_NAMES]
    raise LoraError(Message(key, projections=", ".join(ordered) or "none", **params))


def _example_name(dense: dict[str, nn.Dense]) -> str:
    return next(iter(dense), "model.layers.0.self_attn.q_proj")


def _replace_cell(model: nn.Cell, name: str, new_cell: nn.Cell) -> None:
    """Put `new_cell` at dotted `name` and give its parameters full dotted names.

    MindSpore prefixes parameter names only with the attribute name when a cell is assigned after
    construction (`q_proj.weight`, not `model.layers.0.self_attn.q_proj.weight`), and it renames the
    reused base Parameters too, so every parameter name of the new cell is set explicitly.
    """
    parent_name, _, attr = name.rpartition(".")
    parent = model if not parent_name else dict(model.cells_and_names())[parent_name]
    if isinstance(parent, (nn.CellList, nn.SequentialCell)):
        parent[int(attr)] = new_cell
    else:
        setattr(parent, attr, new_cell)
    for local_name, param in new_cell.parameters_and_names():
        param.name = f"{name}.{local_name}"


# ---------------------------------------------------------------------------------------------
# Training helpers
# ---------------------------------------------------------------------------------------------

def lora_parameters(model: nn.Cell) -> list[Parameter]:
    """The `lora_a`/`lora_b` Parameters of every LoRADense, in model order."""
    return [p for cell in lora_modules(model).values() for p in (cell.lora_a, cell.lora_b)]


def mark_only_lora_trainable(model: nn.Cell) -> list[Parameter]:
    """Freeze every non-LoRA parameter (`requires_grad=False`); returns the trainable ones."""
    lora_ids = {id(p) for p in lora_parameters(model)}
    if not lora_ids:
        raise LoraError("the model has no LoRA layers: call inject_lora before mark_only_lora_trainable.")
    for param in model.get_parameters():
        param.requires_grad = id(param) in lora_ids
    return [p for p in model.get_parameters() if p.requires_grad]


def trainable_parameter_count(model: nn.Cell) -> int:
    """Number of scalar values in parameters with `requires_grad` (shared ones counted once)."""
    return sum(int(np.prod(p.shape)) for p in model.get_parameters() if p.requires_grad)


# ---------------------------------------------------------------------------------------------
# Merge
# ---------------------------------------------------------------------------------------------

def merge_weight(weight: np.ndarray, lora_a: np.ndarray, lora_b: np.ndarray, scaling: float) -> np.ndarray:
    """W + scaling·B·A, computed in float32 and returned in W's dtype.
    weight (out, in); lora_a (rank, in); lora_b (out, rank). Use -scaling to unmerge."""
    delta = np.float32(scaling) * (lora_b.astype(np.float32) @ lora_a.astype(np.float32))  # (out, in)
    return (weight.astype(np.float32) + delta).astype(weight.dtype)


def merge_lora(model: nn.Cell) -> list[str]:
    """Fold every adapter into its base weight (for inference/export); returns the modules changed.
    Idempotent: merged modules are skipped.

    `merged` is a Python attribute, so a graph compiled earlier keeps the value it saw: GRAPH_MODE
    cells and `ms.jit` functions that reach the model through a closure or `self` would add the
    adapter twice. Merge before compiling, or jit functions that take the model as an argument
    (those re-specialise when the flag changes)."""
    return [name for name, cell in lora_modules(model).items() if _set_merged(cell, True)]


def unmerge_lora(model: nn.Cell) -> list[str]:
    """Undo `merge_lora` (W - scaling·B·A, exact up to float rounding); returns the modules changed."""
    return [name for name, cell in lora_modules(model).items() if _set_merged(cell, False)]


@contextlib.contextmanager
def lora_merged(model: nn.Cell):
    """Adapters folded into their base weights for the duration of the block, then taken out
    again: for op-by-op (PyNative) inference, where an unmerged LoRA layer runs five more kernels
    than a plain Dense (the demo run's 200 exact-match answers: 10.7 s unmerged, 8.4-8.9 s merged).
    Unmerging is exact while B = 0 (a fresh adapter: W + 0 - 0) and within float rounding
    otherwise, so the trainer uses it before training and after it, not in between; no compiled
    graph may run inside the block (see `merge_lora`). Weights stored in 16 bits stay unmerged:
    merging and unmerging would round them twice, so the frozen base would change."""
    merged = [name for name, cell in lora_modules(model).items()
              if cell.weight.dtype == ms.float32 and _set_merged(cell, True)]
    try:
        yield merged
    finally:
        for name, cell in lora_modules(model).items():
            if name in merged:
                _set_merged(cell, False)


def write_parameter(param: Parameter, array: np.ndarray) -> None:
    """Overwrite a Parameter's values in place, visible to graphs compiled before.

    `ops.assign` writes into the Parameter's existing storage. `Parameter.set_data` would swap the
    storage instead, and an `ms.jit` function compiled earlier that reaches the Parameter through a
    closure or `self` keeps reading the old storage (measured on MindSpore 2.10, CPU).
    """
    ops.assign(param, Tensor(np.asarray(array, dtype=np.float32), dtype=param.dtype))


def _set_merged(cell: LoRADense, merged: bool) -> bool:
    if cell.merged == merged:
        return False
    sign = 1.0 if merged else -1.0
    new_weight = merge_weight(cell.weight.asnumpy(), cell.lora_a.asnumpy(), cell.lora_b.asnumpy(),
                              sign * cell.scaling)
    write_parameter(cell.weight, new_weight)
    cell.merged = merged
    return True


# ---------------------------------------------------------------------------------------------
# Adapter state (our names)
# ---------------------------------------------------------------------------------------------

def lora_state_dict(model: nn.Cell) -> dict[str, np.ndarray]:
    """`<module>.lora_a` / `<module>.lora_b` -> float32 array, for every LoRA layer."""
    return {p.name: p.asnumpy() for p in lora_parameters(model)}


def load_lora_state_dict(model: nn.Cell, tensors: dict[str, np.ndarray], source: str = "adapter") -> None:
    """Copy LoRA tensors (our names) into the model. Every LoRA parameter must be present with
    its shape and every tensor must be used; nothing is changed unless all of them fit."""
    params = {p.name: p for p in lora_parameters(model)}
    if not params:
        raise LoraError(f"{source}: the model has no LoRA layers to load into; call inject_lora first.")
    merged = [name for name, cell in lora_modules(model).items() if cell.merged]
    if merged:
        raise LoraError(f"{source}: {merged[0]} is merged; unmerge_lora before loading new adapter weights.")
    _require_same_keys(set(params), set(tensors), source)
    for name, param in params.items():
        shape = tuple(np.shape(tensors[name]))
        if shape != tuple(param.shape):
            raise LoraError(Message("lora.tensor_shape", source=source, name=name, shape=str(shape),
                                    expected=str(tuple(param.shape))))
    for name, param in params.items():
        write_parameter(param, tensors[name])


def _require_same_keys(expected: set[str], given: set[str], source: str) -> None:
    missing, extra = sorted(expected - given), sorted(given - expected)
    if missing:
        raise LoraError(first_of("lora.missing_tensor", missing, source=source))
    if extra:
        raise LoraError(first_of("lora.unexpected_tensor", extra, source=source))


# ---------------------------------------------------------------------------------------------
# PEFT file layout
# ---------------------------------------------------------------------------------------------

def peft_module_prefix(model: nn.Cell) -> str | None:
    """Where transformers keeps the decoder (our `model.`) when the checkpoint's architecture wraps
    the language model (Gemma3ForConditionalGeneration: `model.language_model.`), else None: PEFT
    names modules by their path in transformers' model."""
    args = getattr(model, "args", None)
    return None if args is None else args.spec.wrapped.get(args.architecture)


def from_module_path(path: str, prefix: str | None) -> str:
    return "model." + path[len(prefix):] if prefix and path.startswith(prefix) else path


def to_peft_key(name: str, prefix: str | None = None) -> str:
    """`model.layers.0.self_attn.q_proj.lora_a` -> `base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`
    (`prefix`: see `peft_module_prefix`)."""
    for ours, peft in PEFT_SUFFIXES.items():
        if name.endswith(ours):
            return PEFT_PREFIX + to_module_path(name[: -len(ours)], prefix) + peft
    raise LoraError(f"{name} is not a LoRA parameter name (expected a .lora_a or .lora_b suffix).")


def from_peft_key(key: str, prefix: str | None = None) -> str | None:
    """Inverse of `to_peft_key`; None for a key that is not a PEFT LoRA tensor."""
    if not key.startswith(PEFT_PREFIX):
        return None
    for ours, peft in PEFT_SUFFIXES.items():
        if key.endswith(peft):
            return from_module_path(key[len(PEFT_PREFIX): -len(peft)], prefix) + ours
    return None


def save_peft_adapter(model: nn.Cell, folder: str | Path, base_model_name_or_path: str, rank: int,
                      alpha: float, dropout: float, target_modules) -> Path:
    """Write `adapter_config.json` and `adapter_model.safetensors` (PEFT key names) into `folder`,
    each atomically. The weights saved are the adapter's A and B, also when the model is merged."""
    _check_hyperparameters(rank, alpha, dropout)
    _check_model_matches(model, rank, alpha)
    modules = lora_modules(model)
    prefix = peft_module_prefix(model)
    tensors = {to_peft_key(p.name, prefix): np.ascontiguousarray(p.asnumpy(), dtype=np.float32)
               for cell in modules.values() if isinstance(cell, LoRADense) for p in (cell.lora_a, cell.lora_b)}
    if target_modules == ALL_LINEAR:  # the modules this model adapted, not PEFT's own reading of it
        target_modules = list(dict.fromkeys(name.rsplit(".", 1)[-1] for name in modules))
    if prefix:  # names like q_proj would also match the vision tower's layers: name each module
        target_modules = [to_module_path(name, prefix) for name in modules]
    config = peft_adapter_config(base_model_name_or_path, rank, alpha, dropout, target_modules)
    if sparse_blocks(model):  # a mixture of experts: PEFT's own layout for it (core.engine.moe)
        try:
            expert_tensors, dense_targets, parameters = peft_moe_adapter(model, list(modules), PEFT_PREFIX)
        except MoeExportError as exc:
            raise LoraError(exc.message) from exc
        tensors.update(expert_tensors)
        config["target_modules"] = dense_targets or None
        config["target_parameters"] = parameters or None
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    from safetensors.numpy import save as safetensors_bytes
    atomic_write(folder / ADAPTER_WEIGHTS_NAME, safetensors_bytes(tensors, metadata={"format": "pt"}))
    atomic_write(folder / ADAPTER_CONFIG_NAME, (json.dumps(config, indent=2) + "\n").encode("utf-8"))
    return folder


def _check_model_matches(model: nn.Cell, rank: int, alpha: float) -> None:
    """The settings written must be the ones the layers use, or PEFT would scale differently."""
    modules = lora_modules(model)
    if not modules:
        raise LoraError("the model has no LoRA layers to save; call inject_lora first.")
    for name, cell in modules.items():
        if cell.rank != rank or not math.isclose(cell.scaling, alpha / rank, rel_tol=1e-6):
            raise LoraError(f"{name} has rank {cell.rank} and alpha {cell.alpha}, but the adapter "
                            f"config would say rank {rank} and alpha {alpha}.")


def read_peft_config(folder: str | Path) -> dict:
    """adapter_config.json, checked for the options this LoRA implements."""
    path = Path(folder) / ADAPTER_CONFIG_NAME
    if not path.is_file():
        raise LoraError(Message("lora.no_adapter_config", file=str(path)))
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LoraError(Message("model.at", where=str(path), reason=Message("model.invalid_json", json_says=str(exc)))) from exc
    if not isinstance(config, dict) or config.get("peft_type") != "LORA":
        raise LoraError(Message("lora.not_lora", file=str(path),
                                py_value=repr(config.get('peft_type') if isinstance(config, dict) else None)))
    for key in ("r", "lora_alpha", "target_modules"):
        if key not in config:
            raise LoraError(Message("lora.config_key_missing", file=str(path), config_key=key))
    for key, supported in UNSUPPORTED_PEFT_OPTIONS.items():
        if config.get(key, supported) != supported:
            raise LoraError(Message("lora.option_unsupported", file=str(path), config_key=key, value=repr(config[key]),
                                    supported_value=repr(supported)))
    for key in ("rank_pattern", "alpha_pattern"):
        if config.get(key):
            raise LoraError(Message("lora.per_module", file=str(path), config_key=key))
    if config.get("target_parameters"):
        raise LoraError(Message("lora.target_parameters", file=str(path), value=str(config['target_parameters'])))
    return config


def read_peft_tensors(folder: str | Path, prefix: str | None = None) -> dict[str, np.ndarray]:
    """adapter_model.safetensors as our parameter names -> arrays; only safetensors are read
    (`prefix`: see `peft_module_prefix`)."""
    path = Path(folder) / ADAPTER_WEIGHTS_NAME
    if not path.is_file():
        pickles = [p.name for p in Path(folder).glob("adapter_model*.bin")]
        raise LoraError(Message("lora.pickle_adapter", file=str(path), files=", ".join(pickles)) if pickles
                        else Message("lora.no_adapter_weights", file=str(path)))
    from safetensors import SafetensorError
    from safetensors.numpy import load_file
    try:
        raw = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise LoraError(Message("weights.unreadable", file=str(path), reason=Message(
            "weights.os_error", os_error=str(exc)) if isinstance(exc, OSError) else Message(
            "weights.safetensors_says", safetensors_says=str(exc)))) from exc
    tensors, foreign = {}, []
    for key, array in raw.items():
        name = from_peft_key(key, prefix)
        if name is None:
            foreign.append(key)
        else:
            tensors[name] = array
    if foreign:
        raise LoraError(first_of("lora.foreign_tensor", sorted(foreign), file=str(path)))
    return tensors


def load_peft_adapter(model: nn.Cell, folder: str | Path) -> list[str]:
    """Load a PEFT LoRA adapter folder into `model`, injecting LoRA layers from its
    adapter_config.json first when the model has none. Returns the LoRA module names."""
    config = read_peft_config(folder)
    prefix = peft_module_prefix(model)
    tensors = read_peft_tensors(folder, prefix)
    source = str(Path(folder) / ADAPTER_WEIGHTS_NAME)
    if not lora_modules(model):
        targets = config["target_modules"]
        if prefix and isinstance(targets, list):
            targets = [from_module_path(t, prefix) for t in targets]
        try:
            inject_lora(model, config["r"], config["lora_alpha"], config.get("lora_dropout", 0.0), targets)
        except LoraError as exc:
            raise LoraError(Message("model.at", where=str(Path(folder) / ADAPTER_CONFIG_NAME),
                                    reason=exc.message)) from exc
    else:
        _check_model_matches(model, config["r"], config["lora_alpha"])
    load_lora_state_dict(model, tensors, source)
    return list(lora_modules(model))
