"""MindSpore-free specs: what a run is and what it will take, checked before anything loads. Imports no
other package of core.
"""
