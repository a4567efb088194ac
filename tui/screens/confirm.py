"""Questions in a modal dialog: yes/no (`ConfirmScreen`: True only on an explicit yes) and one of
several answers (`ChoiceScreen`: the console's `q` while a job runs)."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    """Ask `question`; `yes_label` names the action so the button says what it does."""

    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str, yes_label: str = "Yes") -> None:
        super().__init__()
        self.question = question
        self.yes_label = yes_label

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog"):
            yield Static(self.question, id="confirm-question")
            with Horizontal(id="confirm-buttons"):
                yield Button(f"{self.yes_label} (y)", variant="error", id="confirm-yes")
                yield Button("Cancel (n)", variant="primary", id="confirm-no")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class ChoiceScreen(ModalScreen[str]):
    """Ask `question` with several answers: (key, label, value) each, the last one the way back
    (also `escape`); returns the value of the answer chosen."""

    def __init__(self, question: str, choices: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self.question = question
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog"):
            yield Static(self.question, id="confirm-question")
            with Horizontal(id="confirm-buttons"):
                for i, (key, label, value) in enumerate(self.choices):
                    last = i == len(self.choices) - 1
                    yield Button(f"{label} ({key})", variant="primary" if last else "error", id=f"choice-{value}")

    def on_mount(self) -> None:
        self.query_one(f"#choice-{self.choices[-1][2]}", Button).focus()

    def on_key(self, event: Any) -> None:
        for key, _, value in self.choices:
            if event.key == key:
                event.stop()
                self.dismiss(value)
                return
        if event.key == "escape":
            event.stop()
            self.dismiss(self.choices[-1][2])

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(str(event.button.id).removeprefix("choice-"))
