"""The suite's order (tests/conftest.py): the longest files are collected first, every name in
LONGEST_FILES is a test file that exists, and every other test keeps its place."""

import pytest

from tests.conftest import LONGEST_FILES, TESTS, pytest_collection_modifyitems


def test_every_longest_file_exists_once():
    assert len(set(LONGEST_FILES)) == len(LONGEST_FILES)
    missing = [name for name in LONGEST_FILES if not (TESTS / name).is_file()]
    assert not missing, f"LONGEST_FILES names files that do not exist: {missing}"


class Item:
    """The two attributes the hook reads of a pytest item."""

    def __init__(self, path):
        self.path = path

    def get_closest_marker(self, name):
        return None

    def add_marker(self, marker):
        pass


def test_the_longest_files_come_first_in_their_order_and_the_rest_keep_theirs():
    first, second = (TESTS / LONGEST_FILES[0], TESTS / LONGEST_FILES[1])
    others = [TESTS / "unit" / "test_config.py", TESTS / "unit" / "a.py", TESTS / "unit" / "b.py"]
    items = [Item(others[0]), Item(second), Item(others[1]), Item(first), Item(second), Item(others[2])]
    pytest_collection_modifyitems(pytest.Config.__new__(pytest.Config), items)
    assert [i.path for i in items] == [first, second, second, *others]
