"""Messages from the console's workers to the app.

Workers do not post one message per core event. A burst of thousands of events would queue
thousands of messages ahead of a keypress, so input would wait for all of them. Instead events
collect in an `EventInbox` and the worker posts a single `EventsArrived`; the app drains the inbox
in bounded slices (see `tui.inbox`), so a keypress waits for at most one slice.
"""

from __future__ import annotations

from textual.message import Message


class EventsArrived(Message):
    """Core events are waiting in the app's inbox."""

    def can_replace(self, message: Message) -> bool:
        # The handler drains the whole inbox, so one pending notice is as good as several.
        return isinstance(message, EventsArrived)
