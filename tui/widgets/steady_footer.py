"""A footer that rebuilds its keys only when the keys it shows change.

Textual's Footer recomposes (removes every key widget, builds and restyles new ones) whenever the
screen's bindings may have changed, which is every focus change: moving focus between two
widgets with the same keys, as Tab does through a pane's buttons, costs a full restyle of the
footer for nothing. `SteadyFooter` remembers what it last showed (each key, its label, whether it
is enabled, its tooltip and group) and skips the rebuild when that is unchanged.
"""

from __future__ import annotations

from collections.abc import Hashable

from textual.app import ComposeResult
from textual.widgets import Footer


class SteadyFooter(Footer):
    """A Footer that skips a recompose which would show the same keys."""

    _shown: Hashable = None
    """What the keys on screen show; None until a compose has put keys there."""

    def _what_it_would_show(self) -> Hashable:
        bindings = tuple(
            (
                binding.key,
                self.app.get_key_display(binding),
                binding.action,
                binding.description,
                enabled,
                tooltip,
                binding.group,
            )
            for (_, binding, enabled, tooltip) in self.screen.active_bindings.values()
            if binding.show
        )
        return bindings, self.show_command_palette, self.app.ENABLE_COMMAND_PALETTE

    def compose(self) -> ComposeResult:
        keys = list(super().compose())
        # Footer composes nothing until the screen's bindings are ready: only keys on screen count.
        self._shown = self._what_it_would_show() if keys else None
        yield from keys

    async def recompose(self) -> None:
        if self._shown is not None and self.is_attached and self._what_it_would_show() == self._shown:
            return
        await super().recompose()
