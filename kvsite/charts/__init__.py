"""How a result is shown: chart.py every chart with its table and its CSV / PNG / SVG downloads,
tables.py tables for readers (Arrow, markdown, CSV).
"""
