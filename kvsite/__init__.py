"""The site's shared code, one package per part (the arithmetic is kvcore's), each importing only the parts
before it here (tests/test_module_graph.py, SITE_LAYERS): layout.py how a page groups its elements and the one
style sheet, i18n/ the reader's texts (one YAML file per language), data/ the one cache, the data sources and
recordings in words, charts/ how a chart or a table is shown, inputs/ what a reader hands in (link values,
choices, uploads, live runs), frame/ what every page calls first (setup(), the chapter list), and sections/ each
chapter's code, one module per chapter (the Calculator a package of its own).
"""
