"""What every page calls first: page.py the frame (setup(): page config, language, navigation, data source and
its badge), chapters.py the one list of chapters.
"""
