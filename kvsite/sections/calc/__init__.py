"""The Calculator chapter (pages/8_Calculator.py): source.py the parts of its inputs (memory, context, KV formats,
the model source read into a geometry), gguf_browser.py its own-GGUF picker (a GGUF header read in the browser by
gguf_reader.js), inputs.py its widgets read into one kvcore.capacity.request.Request, compute.py the cached
sections drawn from the engine's result, outputs.py each part of the page drawn from the request and the result.
"""
