"""Charts: `metrics.jsonl` read incrementally, drawn as SVG, and the figures that judge a run."""
