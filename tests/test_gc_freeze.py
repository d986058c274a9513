"""The site freezes what its process keeps (kvsite.frame.page._freeze_what_stays): modules, classes and functions
that live as long as the server are moved out of the cyclic collector's walk once a page has imported them, so a
full collection in the middle of a reader's slider step walks only what the pages made since."""

from __future__ import annotations

import gc
import sys
import types

from kvsite.frame import page

NEW = "_kvsite_test_new_module"


def test_what_the_imports_made_is_frozen_once_and_again_only_after_new_imports():
    gc.unfreeze()
    page._FROZEN_AT[0] = 0
    try:
        page._freeze_what_stays()
        frozen = gc.get_freeze_count()
        assert frozen > 10_000  # Streamlit, pandas, Altair and kvcore's objects
        assert page._FROZEN_AT[0] == len(sys.modules)
        page._freeze_what_stays()  # nothing new imported: no collection, nothing more frozen
        assert gc.get_freeze_count() == frozen
        sys.modules[NEW] = types.ModuleType(NEW)  # a page imports a module more
        page._freeze_what_stays()  # what it made is frozen too
        assert gc.get_freeze_count() > frozen
    finally:
        sys.modules.pop(NEW, None)
        gc.unfreeze()
