"""What a model is: its geometry (what each layer caches), its config, its family's rules, its parameters.

Data types at the bottom (geometry), the rules that read them above (config, families, params, layers).
"""
