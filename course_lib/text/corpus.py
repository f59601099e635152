"""Real English text that ships offline. Chapter 1 on.

Every loader reads files that an installed package ships; nothing is downloaded.
Each loader's docstring names the text's source and licence. See
:doc:`/chapters/ch01_counts`.
"""

from __future__ import annotations

import bz2
import functools
import re

from course_lib.text.tokenizers import tokenize

_GALLERY_FILE = re.compile(r"^[^\n|]*\.(?:jpe?g|png|gif|svg|tiff?)(?:\||[ \t]*$)",  # "Name.jpg|" of a gallery line
                           re.IGNORECASE | re.MULTILINE)

def _gensim_data(name: str) -> str:
    from gensim.test.utils import datapath

    return datapath(name)


@functools.lru_cache(maxsize=None)
def lee_documents() -> tuple[str, ...]:
    """The Lee background corpus: 300 short news articles, one string each.

    Source: the corpus of Australian Broadcasting Corporation news articles
    collected by Lee, Pincombe and Welsh (2005) for their study of human
    document-similarity judgements, as shipped in gensim's test data
    (``gensim/test/test_data/lee_background.cor``; gensim is LGPL-2.1).
    About 60 000 words. Chapter 1.
    """
    with open(_gensim_data("lee_background.cor"), encoding="utf-8") as f:
        return tuple(line.strip() for line in f if line.strip())


@functools.lru_cache(maxsize=None)
def wikipedia_articles() -> tuple[tuple[str, str], ...]:
    """106 English Wikipedia articles as ``(title, plain text)`` pairs.

    Source: the first articles of an English Wikipedia dump (the ones from
    "Anarchism" to about "A"), shortened, as shipped in gensim's test data
    (``enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2``).
    Wikipedia text is licensed CC BY-SA 3.0. Wiki markup is removed with
    gensim's ``filter_wiki``, and the file names that it leaves from image
    galleries (a line that starts ``File:Name.jpg|``) are dropped; redirects are skipped. About 450 000 words.
    Chapter 1.
    """
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki

    path = _gensim_data("enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
    articles = []
    with bz2.open(path) as f:
        for title, markup, _page_id in extract_pages(f):
            if markup.lstrip().lower().startswith("#redirect"):
                continue
            articles.append((title, _GALLERY_FILE.sub("", filter_wiki(markup))))
    return tuple(articles)


def english_documents() -> list[list[str]]:
    """All shipped English text, tokenized: Lee's news articles, then Wikipedia's.

    Returns a list of documents, each a list of tokens (about 510 000 tokens in
    406 documents). See :func:`lee_documents` and :func:`wikipedia_articles`
    for sources and licences. Chapter 1.
    """
    docs = [tokenize(text) for text in lee_documents()]
    docs += [tokenize(text) for _title, text in wikipedia_articles()]
    return docs
