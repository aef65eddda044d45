"""A training checkpoint merged into its base model, read a tensor (or a block of rows) at a time, as the
GGUF writer's source (core.engine.gguf_export.TensorSource). MindSpore-free: the writing never loads it
(only core.engine.gguf_run's check does).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from core.engine.export import ExportError, adapter_modules, merged_tensor, write_merged
from core.engine.gguf_export import GgufInfo, TensorSource, write_gguf
from core.spec.messages import Message
from core.spec.model_args import read_model_args, weight_files
from core.weights.safetensors_io import SafetensorsReader, to_float32


class MergedSource(TensorSource):
    """The base model's tensors with the checkpoint folded in, each computed when it is read (W +
    (alpha/r)·B·A in float32, core.engine.export's merge of one tensor): the GGUF writer reads the
    merged model without a merged folder on disk. Families whose key map converts tensors (MoE experts
    stacked) take the merged folder instead (`_merged`)."""

    def __init__(self, folder: Path, state: dict, base: Path, args):
        self.readers = [SafetensorsReader(p) for p in weight_files(base)]
        self.trained = SafetensorsReader(folder / "weights.safetensors")
        self.method = state["method"]
        self.scaling = state["lora"]["alpha"] / state["lora"]["rank"] if self.method == "lora" else 0.0
        key_map = args.spec.key_map
        self.where = {key_map.our_name(hub): (reader, hub) for reader in self.readers for hub in reader.tensors
                      if not key_map.is_ignored(hub)}
        expected = set(self.trained.tensors) if self.method != "lora" else set(adapter_modules(self.trained.tensors))
        known = set(self.where) | {name.removesuffix(".weight") for name in self.where}
        unused = sorted(expected - known)
        if unused:
            raise ExportError(Message("export.unused_tensor", file=str(folder / "weights.safetensors"),
                                      name=unused[0], base=str(base)))

    def read(self, name: str) -> np.ndarray:
        reader, hub = self.where[name]
        values = merged_tensor(hub, reader.tensors[hub], reader, self.trained, self.method, name, self.scaling,
                               "float32")()
        return np.asarray(values, dtype=np.float32)

    def row_reader(self, name: str):
        """Rows a..b of the merged tensor (W[a:b] + s·B[a:b]·A for an adapted one)."""
        reader, hub = self.where[name]
        module = name.removesuffix(".weight")
        trained = self.trained
        if self.method != "lora" and name in trained.tensors:
            return lambda a, b: to_float32(trained.read_rows(name, a, b, raw=True), trained.tensors[name].dtype)
        if self.method != "lora" or f"{module}.lora_a" not in trained.tensors:
            return super().row_reader(name)

        def rows(a: int, b: int) -> np.ndarray:
            lora_a = to_float32(trained.read(f"{module}.lora_a", raw=True), trained.tensors[f"{module}.lora_a"].dtype)
            lora_b = to_float32(trained.read_rows(f"{module}.lora_b", a, b, raw=True),
                                trained.tensors[f"{module}.lora_b"].dtype)
            return to_float32(reader.read_rows(hub, a, b, raw=True), reader.tensors[hub].dtype) + \
                np.float32(self.scaling) * (lora_b @ lora_a)
        return rows

    def close(self) -> None:
        super().close()
        self.trained.close()


def _merged(folder: Path, state: dict, out: Path) -> Path:
    """The merged float32 folder (core.engine.export's streamed merge); a checkpoint that disappears
    while it is read (the run pruned it) is named."""
    out.mkdir()
    try:
        write_merged(folder, state, out, "float32")
    except FileNotFoundError as err:
        raise ExportError(Message("gguf.checkpoint_gone", folder=str(folder), error=str(err))) from err
    if not folder.is_dir():
        raise ExportError(Message("gguf.checkpoint_gone", folder=str(folder), error="removed while reading"))
    return out


def write_checkpoint_gguf(folder: Path, state: dict, base: Path, work: Path, target: Path, quant: str,
                          add_bos: bool = False, add_eos: bool = False, **naming) -> GgufInfo:
    """The checkpoint `folder` (on the base model `base`) merged, as GGUF at `target`: tensor by tensor
    from the checkpoint and the base, or (MoE families, whose experts the key map restacks) through a
    merged float32 folder in `work`."""
    args = read_model_args(base)
    if args.spec.key_map.convert_out is None:
        try:
            source = MergedSource(folder, state, base, args)
        except FileNotFoundError as err:
            raise ExportError(Message("gguf.checkpoint_gone", folder=str(folder), error=str(err))) from err
        try:
            return write_gguf(base, target, quant, add_bos=add_bos, add_eos=add_eos, source=source, **naming)
        except (FileNotFoundError, ValueError) as err:
            if not (folder / "weights.safetensors").is_file():  # the run pruned the checkpoint while it was read
                raise ExportError(Message("gguf.checkpoint_gone", folder=str(folder), error=str(err))) from err
            raise
    merged = _merged(folder, state, work / "merged")
    info = write_gguf(merged, target, quant, add_bos=add_bos, add_eos=add_eos, **naming)
    shutil.rmtree(merged)  # the check's model is built from the checkpoint, not from this folder
    return info
