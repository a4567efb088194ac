"""The import hygiene tests that train, start a server or run a subprocess (the integration tier);
the quick ones are in `tests/unit/test_import_hygiene.py`."""

from tests.unit.test_import_hygiene import CORE_MODULES, _loaded_after


def test_core_modules_do_not_import_textual():
    loaded = _loaded_after("\n".join(f"import {m}" for m in CORE_MODULES))
    assert "textual" not in loaded and "tui" not in loaded
