"""Each chapter's code, one module per chapter, named by its texts' prefix (chapters listed in
kvsite/frame/chapters.py): home.py, mechanism.py, trap.py (the .nbytes trap), growth.py (linear
growth), decode.py (decode slowdown), prefill.py and batch.py (prefill and decode), savings.py and
quality.py (savings), recordings.py and log.py (recordings, and a runtime's log read back), and
calc/ (the Calculator). A section is one cached function: cheap keys in, everything it shows out;
shared.py holds what the chapters share.
"""
