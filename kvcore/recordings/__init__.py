"""Recordings: one YAML file per run; its schema, its checks, the store that loads and saves them, provenance,
and the figures quoted from publications.
"""
