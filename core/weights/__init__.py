"""Weight files without MindSpore: safetensors read and written a tensor at a time, and the PEFT
adapter layout. Imports no other package of core.
"""
