"""The site's data, below everything that shows it: cache.py the site's one cache and its keys,
sources.py the data sources (bundled recordings, uploads, live), recording_text.py how a
recording reads on the site.
"""
