"""Readers of inputs: a config.json, a GGUF file's header, the bundled presets; each builds a model geometry
under a runtime, and refuses what it cannot read in one sentence.
"""
