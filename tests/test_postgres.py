"""The throwaway PostgreSQL server (course_tools.grading.postgres): real PostgreSQL, real nbgrader gradebook."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import sqlalchemy
from nbgrader.api import Gradebook

from course_tools.grading.postgres import throwaway_postgres

pytestmark = pytest.mark.slow


def test_a_throwaway_server_holds_a_gradebook_asks_for_its_password_and_leaves_nothing():
    before = set(Path("/tmp").glob("course-postgres-*"))
    with throwaway_postgres() as url:
        parts = urlsplit(url)
        assert parts.hostname == "127.0.0.1" and parts.path == "/gradebook"
        with Gradebook(url) as gb:
            gb.add_student("ada", first_name="Ada")
            gb.add_assignment("ps01_counts")
        with Gradebook(url) as gb:  # a second connection sees what the first committed
            assert [s.id for s in gb.students] == ["ada"] and gb.find_assignment("ps01_counts").name == "ps01_counts"
        wrong = url.replace(f":{parts.password}@", ":not-the-password@")
        with pytest.raises(sqlalchemy.exc.OperationalError, match="password authentication failed"):
            sqlalchemy.create_engine(wrong).connect()
        ours = set(Path("/tmp").glob("course-postgres-*")) - before
        assert len(ours) == 1 and (ours.pop() / "data" / "PG_VERSION").read_text().strip() == "16"
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", parts.port)) != 0, "the server stopped"
    assert set(Path("/tmp").glob("course-postgres-*")) <= before, "its folder is deleted"
