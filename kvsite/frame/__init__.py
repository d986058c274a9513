"""What every page stands on: page.py the frame every page calls first (setup(): page config,
language, navigation, data source and its badge), chapters.py the one list of chapters, layout.py
how a page groups its elements and the one style sheet (site.css), cache.py the site's one cache,
sources.py the data sources, recording_text.py how a recording reads on the site.
"""
