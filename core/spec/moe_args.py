"""Mixture-of-experts settings of a checkpoint, read without MindSpore (the console imports this to
describe a model): the router's size and normalisation, which layers are sparse, the expert
tensors' key mapping between the hub's layouts and ours, and the parameter counts (active per
token and total).

Our parameters hold a layer's experts stacked, as transformers 5 does at run time:
`mlp.experts.gate_up_proj.weight` (E, 2·I, H), gate rows first, then up; `mlp.experts.down_proj.weight`
(E, H, I); the router `mlp.gate.weight` (E, H). The hub ships one tensor per expert and projection
(Mixtral `block_sparse_moe.experts.N.w1/w3/w2`, Qwen3-MoE `mlp.experts.N.gate_proj/up_proj/down_proj`),
which transformers 5's save_pretrained still writes; a state dict saved straight from a transformers 5
model has the stacked layout (`mlp.experts.gate_up_proj`, no `.weight`). Both are read; exports write
the hub's per-expert layout.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from core.spec.errors import MessageError, ModelConfigError
from core.spec.messages import Message


class MoeConfigError(MessageError):
    """A config.json MoE setting mindtune cannot build; the message names the file and key."""


@dataclass(frozen=True)
class MoeArgs:
    num_experts: int
    top_k: int
    expert_intermediate_size: int
    normalize_top_k: bool  # top-k weights renormalised to sum to 1 (Mixtral always; Qwen3-MoE: norm_topk_prob)
    sparse_layers: tuple[int, ...]  # the decoder layers whose MLP is the sparse block; the others are dense
    router_aux_loss_coef: float
    hub_layout: str  # "mixtral" (block_sparse_moe, w1/w3/w2) or "qwen" (mlp, gate_proj/up_proj/down_proj)

    def is_sparse(self, layer: int) -> bool:
        return layer in self.sparse_layers

    def parameter_shapes(self, args, prefix: str) -> dict[str, tuple[int, ...]]:
        """A sparse layer's parameters under `prefix` (`model.layers.N.mlp.`), in model order."""
        h, i, e = args.hidden_size, self.expert_intermediate_size, self.num_experts
        return {f"{prefix}gate.weight": (e, h), f"{prefix}experts.gate_up_proj.weight": (e, 2 * i, h),
                f"{prefix}experts.down_proj.weight": (e, h, i)}

    def dense_shapes(self, args, prefix: str) -> dict[str, tuple[int, int]]:
        """What LoRA can target in a sparse layer, (in, out) per module: the router (a Dense) and
        each expert stack, whose LoRA is that size once per expert (`experts_of`)."""
        h, i, e = args.hidden_size, self.expert_intermediate_size, self.num_experts
        return {f"{prefix}gate": (h, e), f"{prefix}experts.gate_up_proj": (h, 2 * i),
                f"{prefix}experts.down_proj": (i, h)}

    def experts_of(self, module: str) -> int:
        """How many experts a module name of `dense_shapes` stacks (1 for the router and Dense layers)."""
        return self.num_experts if ".experts." in module else 1

    def active_parameters(self, args) -> int:
        """ModelArgs.active_parameters of a mixture of experts: see `active_parameters`."""
        return active_parameters(args)

    def lora_target_names(self, args) -> tuple[str, ...]:
        """ModelArgs.lora_target_names of a mixture of experts: see `lora_target_names`."""
        return lora_target_names(args)


def _int(cfg: dict, key: str, source: str, default=None) -> int:
    value = cfg.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise _error(source, key, Message("model.positive_int", py_value=repr(value)))
    return value


def _experts(cfg: dict, source: str, *keys: str) -> int:
    """The expert count under whichever spelling config.json uses (transformers 5's save_pretrained
    writes Qwen3-MoE's `num_experts` as `num_local_experts`)."""
    for key in keys:
        if key in cfg:
            return _int(cfg, key, source)
    raise _error(source, keys[0], Message("moe.experts_missing"))


def _error(source: str, key: str, reason: Message) -> MoeConfigError:
    """'<source>: <key>: <reason>.' by id (as core.spec.errors.check says it)."""
    return MoeConfigError(Message("model.at", where=source, reason=Message("model.at_setting", setting=key,
                                                                           reason=reason)))


def _router(cfg: dict, source: str, experts: int) -> tuple[int, float]:
    top_k = _int(cfg, "num_experts_per_tok", source, 2)
    if top_k > experts:
        raise _error(source, "num_experts_per_tok", Message("moe.top_k", top_k=top_k, experts=experts))
    coef = cfg.get("router_aux_loss_coef", 0.001)
    if not isinstance(coef, (int, float)) or isinstance(coef, bool) or coef < 0:
        raise _error(source, "router_aux_loss_coef", Message("moe.aux_loss", py_value=repr(coef)))
    return top_k, float(coef)


def mixtral_extra_args(cfg: dict, source: str) -> dict:
    """`FamilySpec.extra_args` of Mixtral: ModelArgs' `moe`."""
    return _extra_args(mixtral_args, cfg, source)


def qwen3_moe_extra_args(cfg: dict, source: str) -> dict:
    """`FamilySpec.extra_args` of Qwen3-MoE: ModelArgs' `moe`."""
    return _extra_args(qwen3_moe_args, cfg, source)


def _extra_args(read, cfg: dict, source: str) -> dict:
    try:
        return {"moe": read(cfg, source)}
    except MoeConfigError as exc:
        raise ModelConfigError(exc.message) from exc


def mixtral_args(cfg: dict, source: str) -> MoeArgs:
    """Mixtral: every layer sparse, softmax over all experts then the top-k renormalised."""
    experts = _experts(cfg, source, "num_local_experts", "num_experts")
    top_k, coef = _router(cfg, source, experts)
    jitter = cfg.get("router_jitter_noise", 0.0) or 0.0
    if jitter:
        raise _error(source, "router_jitter_noise", Message("moe.jitter", py_value=repr(jitter)))
    layers = _int(cfg, "num_hidden_layers", source)
    return MoeArgs(experts, top_k, _int(cfg, "intermediate_size", source), True, tuple(range(layers)), coef,
                   "mixtral")


def qwen3_moe_args(cfg: dict, source: str) -> MoeArgs:
    """Qwen3-MoE: softmax, top-k, renormalised only with norm_topk_prob; layer l is sparse unless it
    is in mlp_only_layers or (l + 1) is not a multiple of decoder_sparse_step (those have the dense
    MLP of width intermediate_size)."""
    experts = _experts(cfg, source, "num_experts", "num_local_experts")
    top_k, coef = _router(cfg, source, experts)
    layers = _int(cfg, "num_hidden_layers", source)
    if cfg.get("use_sliding_window"):  # transformers 5 would window every layer, whatever max_window_layers says
        raise _error(source, "use_sliding_window", Message("moe.qwen_window"))
    step = _int(cfg, "decoder_sparse_step", source, 1)
    dense = cfg.get("mlp_only_layers") or []
    if not isinstance(dense, list) or not all(isinstance(i, int) and 0 <= i < layers for i in dense):
        raise _error(source, "mlp_only_layers", Message("moe.dense_layers", layers=layers, py_value=repr(dense)))
    sparse = tuple(i for i in range(layers) if i not in dense and (i + 1) % step == 0)
    return MoeArgs(experts, top_k, _int(cfg, "moe_intermediate_size", source), bool(cfg.get("norm_topk_prob", False)),
                   sparse, coef, "qwen")


# ---- key mapping --------------------------------------------------------------------------------

# hub projection names per layout: (gate, up, down)
HUB_PROJECTIONS = {"mixtral": ("w1", "w3", "w2"), "qwen": ("gate_proj", "up_proj", "down_proj")}
GATE_UP, DOWN = "gate_up_proj", "down_proj"
_PER_EXPERT = re.compile(r"^(?P<prefix>.*\.mlp\.experts)\.(?P<expert>\d+)\.(?P<proj>\w+)\.weight$")
_STACKED = re.compile(r"^(?P<prefix>.*\.mlp\.experts)\.(?P<proj>gate_up_proj|down_proj)$")


def convert_in(tensors: dict, args) -> dict:
    """`KeyMap.convert_in` of the MoE families (args: ModelArgs)."""
    return experts_in(tensors, args.moe)


def convert_out(tensors: dict, args) -> dict:
    """`KeyMap.convert_out` of the MoE families."""
    return experts_out(tensors, args.moe)


def experts_in(tensors: dict, moe: MoeArgs) -> dict:
    """Our tensors from a checkpoint's (block_sparse_moe already renamed to mlp): per-expert
    projections stacked into `experts.gate_up_proj.weight` / `experts.down_proj.weight`, stacked
    ones renamed. Another projection name, a missing or duplicated expert is an error naming the
    tensor (KeyError, reported by the loader with the file)."""
    gate, up, down = HUB_PROJECTIONS[moe.hub_layout]
    out, groups = {}, {}
    for name, array in tensors.items():
        if match := _STACKED.match(name):
            out[f"{match['prefix']}.{match['proj']}.weight"] = array
        elif match := _PER_EXPERT.match(name):
            if match["proj"] not in (gate, up, down):
                raise KeyError(f"tensor {name}: expert projection {match['proj']!r} is not one of "
                               f"{gate}, {up}, {down}")
            groups.setdefault(match["prefix"], {})[(int(match["expert"]), match["proj"])] = (name, array)
        else:
            out[name] = array
    for prefix, parts in groups.items():
        arrays = {}
        for proj in (gate, up, down):
            for e in range(moe.num_experts):
                if (e, proj) not in parts:
                    raise KeyError(f"tensor {prefix}.{e}.{proj}.weight is missing "
                                   f"(config.json says {moe.num_experts} experts)")
            arrays[proj] = np.stack([parts[(e, proj)][1] for e in range(moe.num_experts)])
        extra = sorted(n for (e, _), (n, _) in parts.items() if e >= moe.num_experts)
        if extra:
            raise KeyError(f"tensor {extra[0]}: expert index beyond the {moe.num_experts} experts config.json says")
        if f"{prefix}.{GATE_UP}.weight" in out:
            raise KeyError(f"{prefix}: experts stored both per expert and stacked")
        out[f"{prefix}.{GATE_UP}.weight"] = np.concatenate([arrays[gate], arrays[up]], axis=1)  # (E, 2I, H)
        out[f"{prefix}.{DOWN}.weight"] = arrays[down]  # (E, H, I)
    return out


def experts_out(tensors: dict, moe: MoeArgs) -> dict:
    """The inverse of `experts_in` into the hub's per-expert layout (Mixtral's `block_sparse_moe`
    names included, as the hub and transformers' save_pretrained write them)."""
    gate, up, down = HUB_PROJECTIONS[moe.hub_layout]
    out = {}
    for name, array in tensors.items():
        match = re.match(r"^(?P<prefix>.*\.mlp\.experts)\.(?P<proj>gate_up_proj|down_proj)\.weight$", name)
        if match is None:
            out[_hub_block(name, moe)] = array
            continue
        prefix = _hub_block(match["prefix"], moe)
        if match["proj"] == GATE_UP:
            half = array.shape[1] // 2
            for e in range(array.shape[0]):
                out[f"{prefix}.{e}.{gate}.weight"] = np.ascontiguousarray(array[e, :half])
                out[f"{prefix}.{e}.{up}.weight"] = np.ascontiguousarray(array[e, half:])
        else:
            for e in range(array.shape[0]):
                out[f"{prefix}.{e}.{down}.weight"] = np.ascontiguousarray(array[e])
    return out


def _hub_block(name: str, moe: MoeArgs) -> str:
    """Mixtral's sparse block is `block_sparse_moe` on the hub (`mlp` in transformers 5 and here)."""
    if moe.hub_layout == "mixtral":
        return re.sub(r"\.mlp\.(experts|gate)\b", r".block_sparse_moe.\1", name)
    return name


# ---- parameter counts -----------------------------------------------------------------------------

def lora_target_names(args) -> tuple[str, ...]:
    """What LoRA can target in a mixture of experts (ModelArgs with `moe`), for the console's
    checkboxes: the attention's projections, the dense layers' MLP projections where there are any,
    and the two expert stacks. Not the router (`gate`): a LoRA target only when named explicitly."""
    spec = args.spec
    dense = len(args.moe.sparse_layers) < args.num_layers
    names = spec.attention_projections + (spec.mlp_projections if dense else ()) + (GATE_UP, DOWN)
    return tuple(dict.fromkeys(names))  # down_proj names a dense layer's and the experts' (a suffix match)


def active_parameters(args) -> int:
    """Parameters one token goes through (ModelArgs with `moe`): the total less, in every sparse
    layer, the experts the router does not pick (num_experts − top_k of them)."""
    total = args.num_parameters()
    moe = args.moe
    if moe is None:
        return total
    expert = 3 * args.hidden_size * moe.expert_intermediate_size
    return total - len(moe.sparse_layers) * (moe.num_experts - moe.top_k) * expert
