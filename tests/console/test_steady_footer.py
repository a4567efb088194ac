"""The footer rebuilds its keys when the keys to show change, and only then."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Static
from textual.widgets._footer import FooterKey

from tests.helpers.waiting import until
from tui.widgets.steady_footer import SteadyFooter


class Ex(Static, can_focus=True):
    BINDINGS = [Binding("x", "noop", "Ex")]


class Why(Static, can_focus=True):
    BINDINGS = [Binding("y", "noop", "Why")]


class CountingFooter(SteadyFooter):
    """Counts the recomposes asked of it (whether or not it rebuilt its keys)."""

    asked = 0

    async def recompose(self) -> None:
        await super().recompose()
        self.asked += 1


class Keys(App[None]):
    def compose(self) -> ComposeResult:
        yield Ex("a", id="a")
        yield Ex("b", id="b")
        yield Why("c", id="c")
        yield CountingFooter()


def shown(footer: SteadyFooter) -> list[str]:
    return [key.description for key in footer.query(FooterKey)]


async def test_a_focus_change_rebuilds_the_footer_only_when_its_keys_change():
    app = Keys()
    async with app.run_test() as pilot:
        footer = app.query_one(CountingFooter)
        app.set_focus(app.query_one("#a"))
        await until(pilot, lambda: "Ex" in shown(footer), "the footer showing a's key")
        keys, asked = list(footer.query(FooterKey)), footer.asked

        app.set_focus(app.query_one("#b"))  # the same keys: asked, and the key widgets kept
        await until(pilot, lambda: footer.asked > asked, "the footer asked to recompose after b's focus")
        assert list(footer.query(FooterKey)) == keys and shown(footer)[0] == "Ex"

        app.set_focus(app.query_one("#c"))  # other keys: rebuilt
        await until(pilot, lambda: "Why" in shown(footer), "the footer showing c's key")
        assert "Ex" not in shown(footer) and not set(footer.query(FooterKey)) & set(keys)
