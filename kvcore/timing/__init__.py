"""Time: chips and their bandwidth, the decode model (bytes per token over an effective bandwidth), its fits to
recorded runs, and time to first token.
"""
