"""The public tree, the students' environment and the book.

- :mod:`.public`, :mod:`.public_files`: what students may see (``_build/public``), for a calendar
  (:mod:`.course_calendar`), leak-checked;
- :mod:`.install_cells`, :mod:`.student_install`: the install lines every page shows, from one source;
- :mod:`.student_env`: the students' environment, made from those lines over HTTP;
- :mod:`.chapter_notebooks`, :mod:`.citations`, :mod:`.plain_markdown`: the downloadable chapter notebooks;
- :mod:`.book_execution`, :mod:`.chapter`: chapters executed two at a time before ``jupyter-book build``;
- :mod:`.browser`: Chromium and a local server, for the browser tests and figures.
"""
