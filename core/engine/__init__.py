"""The MindSpore engine: layers, the model built from a family spec, mixture of experts, LoRA, the
CPU's fused kernels (kernels/: their C++ sources), the device paths, the compiled train step,
preference objectives, checkpoints, generation and export. Imports core.spec, core.data, core.run,
core.weights and core.eval; the console never imports it.
"""
