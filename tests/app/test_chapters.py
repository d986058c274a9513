"""One list of chapters (kvsite/frame/chapters.py): what Streamlit shows from pages/ is exactly that list, and a chapter
added there reaches the navigation and the home page."""

from __future__ import annotations

from app_helpers import ROOT, page
from i18n_keys import missing_keys

from kvsite import i18n
from kvsite.frame import chapters


def test_every_page_file_is_a_chapter_and_every_chapter_a_page_file():
    files = sorted(
        p.name for p in (ROOT / "pages").glob("*.py") if not p.name.startswith(("_", "."))
    )
    assert files == sorted(
        c.file for c in chapters.CHAPTERS
    )  # Streamlit would list any other file in the menu
    assert [int(c.file.split("_")[0]) for c in chapters.CHAPTERS] == sorted(
        int(c.file.split("_")[0]) for c in chapters.CHAPTERS
    )


def chapter_keys() -> list[str]:
    """The texts every chapter has: its navigation entry, title, lead and its line on the home page."""
    return [
        key
        for c in chapters.all_pages()
        for key in (f"nav.{c.slug}", f"{c.texts}.title", f"{c.texts}.lead", f"home.ch.{c.slug}")
        if key != "home.ch.home"
    ]


def test_every_chapter_has_its_texts_in_every_language():
    keys = chapter_keys()
    assert len(keys) >= 4 * len(chapters.CHAPTERS)
    assert not (gaps := missing_keys(keys)), gaps


def test_a_chapter_text_missing_in_one_language_names_the_file_and_the_key(monkeypatch):
    """A chapter added with its English texts only: the check above says which file lacks which key."""
    glossary = chapters.Chapter("glossary", "10_Glossary.py", "glossary")
    monkeypatch.setattr(chapters, "CHAPTERS", (*chapters.CHAPTERS, glossary))
    for key in ("nav.glossary", "glossary.title", "home.ch.glossary"):  # and no glossary.lead
        monkeypatch.setitem(i18n.texts("en"), key, "Glossary")
    assert missing_keys(chapter_keys()) == (
        "add glossary.lead to kvsite/i18n/ja.yaml and kvsite/i18n/en.yaml\n"
        "add glossary.title to kvsite/i18n/ja.yaml\n"
        "add home.ch.glossary to kvsite/i18n/ja.yaml\n"
        "add nav.glossary to kvsite/i18n/ja.yaml"
    )


def test_the_navigation_number_is_the_file_number(rec_dir):
    for c in chapters.CHAPTERS:  # "9 · Recordings" lives in pages/9_...: one name per chapter
        assert i18n.translate("en", f"nav.{c.slug}").startswith(c.file.split("_")[0] + " ·"), c


def test_a_chapter_registered_in_the_list_reaches_navigation_and_home(
    rec_dir, tmp_path, monkeypatch
):
    """In a copy of the site's entry file and pages/ (nothing is written into the repository)."""
    import shutil

    shutil.copytree(
        ROOT / "pages", tmp_path / "pages", ignore=shutil.ignore_patterns("__pycache__")
    )
    app = str(shutil.copy(ROOT / "streamlit_app.py", tmp_path))
    (tmp_path / "pages" / "9_Throwaway.py").write_text(
        'from kvsite.frame.page import setup\nf = setup("throwaway")\nf.intro()\n', encoding="utf-8"
    )
    extra = chapters.Chapter("throwaway", "9_Throwaway.py", "throwaway")
    monkeypatch.setattr(chapters, "CHAPTERS", (*chapters.CHAPTERS, extra))
    for key, value in {
        "nav.throwaway": "9 · Throwaway",
        "throwaway.title": "Throwaway",
        "throwaway.lead": "A lead.",
        "home.ch.throwaway": "A throw-away chapter.",
    }.items():
        monkeypatch.setitem(i18n.texts("en"), key, value)
    at = page(None, "en", app=app)
    assert sum(link.proto.page == "Throwaway" for link in at.get("page_link")) == 2, (
        "the sidebar and the home page list it"
    )
    at = page(extra.path, "en", app=app)
    assert not at.exception and at.markdown[0].value.startswith("# Throwaway")
    assert (
        sum(link.proto.label == "9 · Throwaway" for link in at.get("page_link")) == 1
    )  # the sidebar


def test_a_language_added_with_its_file_reaches_the_switch_and_the_pages(
    rec_dir, tmp_path, monkeypatch
):
    import shutil

    import yaml

    for lang in i18n.LANGUAGES:
        shutil.copy(i18n.FOLDER / f"{lang}.yaml", tmp_path / f"{lang}.yaml")
    texts = yaml.safe_load((i18n.FOLDER / "en.yaml").read_text(encoding="utf-8"))
    texts["home"]["title"] = "Throwaway home"
    (tmp_path / "xx.yaml").write_text(yaml.safe_dump(texts, allow_unicode=True), encoding="utf-8")
    monkeypatch.setattr(i18n, "FOLDER", tmp_path)
    monkeypatch.setitem(i18n.LANGUAGES, "xx", "Throwaway")
    i18n.texts.cache_clear()
    try:
        at = page(None, "xx")
        assert not at.exception and at.markdown[0].value.startswith("# Throwaway home")
        switch = [o.content for o in at.get("button_group")[0].proto.options]
        assert (
            switch == list(i18n.LANGUAGES.values()) and switch[-1] == "Throwaway"
        )  # the switch offers it, by its name
        assert not page(chapters.CHAPTERS[1].path, "xx").exception
    finally:
        i18n.texts.cache_clear()


def by_path(path: str) -> chapters.Chapter:
    return next(c for c in chapters.all_pages() if c.path == path)


def test_every_chapter_ends_with_the_previous_and_the_next_from_the_list(rec_dir):
    """The reading path in the page body (a phone folds the sidebar away): each page's last links are the pages
    before and after it in kvsite/frame/chapters.py, named as the navigation names them."""
    pages = chapters.all_pages()
    for lang in i18n.LANGS:
        t = i18n.translator(lang)
        for i, c in enumerate(pages):
            at = page(None if c.slug == "home" else c.path, lang)
            main = [link.proto for link in at.main.get("page_link")]
            want = []
            if i > 0:
                want.append(
                    (pages[i - 1].path, t("nav.previous", name=t("nav." + pages[i - 1].slug)))
                )
            if i + 1 < len(pages):
                want.append((pages[i + 1].path, t("nav.next", name=t("nav." + pages[i + 1].slug))))
            got = [(link.page, link.label) for link in main[-len(want) :]]
            assert [label for _, label in got] == [label for _, label in want], (lang, c.slug)
            assert [p for p, _ in got] == [  # Streamlit names a page link by the page's URL path
                by_path(p).url for p, _ in want
            ], (lang, c.slug)


def test_home_links_both_articles_to_their_cards(rec_dir):
    from kvsite.sections import home as home_sections

    for lang in i18n.LANGS:
        at = page(None, lang)
        links = {link.proto.label: link.proto for link in at.main.get("page_link")}
        for key, rec_id in home_sections.ARTICLES.items():
            link = links[i18n.translate(lang, f"home.{key}")]
            assert link.query_string == f"lang={lang}&rec={rec_id}"
