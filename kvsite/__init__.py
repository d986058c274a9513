"""The site's shared code, one package per part (the arithmetic is kvcore's): frame/ what every page
stands on (setup(), the chapter list, layout, the one cache, data sources), i18n/ the reader's texts
(one YAML file per language), inputs/ what a reader hands in (link values, choices, uploads, a GGUF
header read in the browser, live runs), charts/ how a chart or a table is shown, and sections/ each
chapter's code, one module per chapter (the Calculator a package of its own).
"""
