"""`python -m app`: the console's front door.

The Gradio console is not built yet (it is the console issue, after the training engine). Until
then this entry point says so plainly and shows what already works from the shell.
"""
import argparse
import sys

NOT_YET = """\
mindtune: the browser console is not built yet.

What works today, from the shell:
  python -m core.generate --model models/tiny-demo --prompt "Mia has a red kite."
  python -m core.generate --model models/tiny-demo --chat --prompt "Tell me a story about Tom."
  python -m core.config --config configs/lora_demo.yaml        # resolve and validate a run config
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app", description="mindtune console")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7860)
    parser.parse_args(argv)
    print(NOT_YET, end="")
    return 1


if __name__ == "__main__":
    sys.exit(main())
