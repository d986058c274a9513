"""What a reader hands the site, checked before it is used: guard.py link values no widget can take (and the
run's last line of defence), choices.py the model and weights choices several chapters offer, uploads.py a
reader's own recordings, live.py live measurement on this machine. (The Calculator's GGUF picker is its own:
kvsite/sections/calc/gguf_browser.py.)
"""
