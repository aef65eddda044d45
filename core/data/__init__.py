"""Training data, MindSpore-free: files and dataset folders, formats and column mapping, the tokenizer
and chat template, packing, preference records. Imports core.spec and core.run (atomic writes of the
cache) only.
"""
