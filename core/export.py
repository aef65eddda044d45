"""`python -m core.export`: every export format from one command line (see core.engine.export's doc).

The zipped formats (peft, merged, mindspore) are core.engine.export's and never load MindSpore for
peft and merged; the GGUF formats (gguf, gguf-lora, ollama) are core.engine.gguf_run's, which loads
llama.cpp and MindSpore (the check), so it is imported only for them.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `core` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.engine.export import EXPORT_DTYPES, FORMATS, ExportError, export_run
from core.engine.gguf_export import GGUF_QUANTS
from core.run.rundir import POINTERS
from core.spec.errors import CheckpointError, report

GGUF_FORMATS = ("gguf", "gguf-lora", "ollama")
DEFAULT_QUANT = {"gguf": "f16", "gguf-lora": "f16", "ollama": "q4_k_m"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.export", description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="run folder, e.g. runs/<id>")
    parser.add_argument("--which", default="best", choices=list(POINTERS))
    parser.add_argument("--format", default="peft", choices=FORMATS + GGUF_FORMATS)
    parser.add_argument("--quant", choices=GGUF_QUANTS, default=None,
                        help="gguf / ollama: the GGUF type (default f16; ollama: q4_k_m)")
    parser.add_argument("--dtype", default="stored", choices=EXPORT_DTYPES,
                        help="merged export: the weights' dtype (default: as the base stores them)")
    parser.add_argument("--zip", action="store_true", help="also write a .zip of the export")
    args = parser.parse_args(argv)
    try:
        if args.format in GGUF_FORMATS:
            path = _export_gguf(args.run, args.which, args.format, args.quant or DEFAULT_QUANT[args.format])
        else:
            path = export_run(args.run, args.which, args.format, args.zip, args.dtype)
    except (ExportError, CheckpointError) as exc:
        report(exc)
        return 2
    print(path)
    return 0


def _export_gguf(run: str, which: str, fmt: str, quant: str) -> Path:
    from core.engine import gguf_run  # llama.cpp and MindSpore: only for these formats
    try:
        if fmt == "gguf":
            return gguf_run.export_gguf(run, which, quant)
        if fmt == "gguf-lora":
            return gguf_run.export_lora_gguf(run, which)
        return gguf_run.export_ollama(run, which, quant)
    except (gguf_run.GgufError, gguf_run.TemplateError) as exc:
        raise ExportError(*exc.args) from exc


if __name__ == "__main__":
    sys.exit(main())
