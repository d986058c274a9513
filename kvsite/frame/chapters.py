"""The site's chapters, in one list: navigation, the home page, page tests, benchmarks, the screenshot script and
the server's URLs all read it. A chapter is one entry here plus its page file in pages/ (Streamlit's folder-based
multipage mode shows every file there; a test holds the two to each other).

Example: by_slug("nbytes_trap").url -> "Nbytes_trap"; by_slug("nbytes_trap").texts -> "trap" (its i18n prefix).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True)
class Chapter:
    slug: str  # the name pages call setup() with; nav.<slug> and home.ch.<slug> are its navigation texts
    file: str  # the page file under pages/ (home: the entry point)
    texts: (
        str  # its texts' prefix in kvsite/i18n/*.yaml: <texts>.title, <texts>.lead, <texts>.faq_*
    )
    section: str | None = None  # the recording section its data-source picker offers

    @property
    def path(self) -> str:
        """What st.page_link and AppTest.switch_page take: 'pages/2_Nbytes_trap.py' (home: 'streamlit_app.py')."""
        return self.file if self.slug == "home" else f"pages/{self.file}"

    @property
    def url(self) -> str:
        """The page's URL path as Streamlit derives it from the file name ('' for home)."""
        return "" if self.slug == "home" else Path(self.file).stem.split("_", 1)[1]


HOME = Chapter("home", "streamlit_app.py", "home")
CHAPTERS: tuple[Chapter, ...] = (
    Chapter("mechanism", "1_Mechanism.py", "mechanism", "mechanism"),
    Chapter("nbytes_trap", "2_Nbytes_trap.py", "trap", "trap"),
    Chapter("linear_growth", "3_Linear_growth.py", "growth", "growth"),
    Chapter("decode_slowdown", "4_Decode_slowdown.py", "decode", "decode"),
    Chapter("prefill_decode", "5_Prefill_and_decode.py", "prefill", "batch"),
    Chapter("savings", "6_Savings.py", "savings"),
    Chapter("conversations", "7_Many_conversations.py", "servers", "server"),
    Chapter("calculator", "8_Calculator.py", "calc"),
    Chapter("recordings", "9_Recordings.py", "recordings"),
)


def all_pages() -> tuple[Chapter, ...]:
    """Home first, then the chapters in reading order."""
    return (HOME, *CHAPTERS)


def by_slug(slug: str) -> Chapter:
    for chapter in all_pages():
        if chapter.slug == slug:
            return chapter
    raise KeyError(f"no chapter {slug!r} in kvsite/frame/chapters.py")
