"""Fits of the time model to recorded runs: each run's decode bandwidth and slowdown (decode), and the shares of
peak compute and bandwidth per runtime class fitted on published runs (shares).
"""
