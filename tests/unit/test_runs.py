"""runs.quiet_libraries: which library chatter it keeps out of the terminal, and what it lets through."""

import warnings

from searchgrpo.runs import quiet_libraries

INDUCTOR_NOTE = (
    "\nOnline softmax is disabled on the fly since Inductor decides to\nsplit the reduction. Cut an issue to "
    "PyTorch if this is an\nimportant use case and you want to speed it up with online\nsoftmax.\n"
)
"""The warning as torch 2.11's Inductor words it (torch/_inductor/lowering.py), leading newline included."""


def test_inductors_online_softmax_note_is_silenced_and_other_user_warnings_are_not():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet_libraries()
        warnings.warn(INDUCTOR_NOTE, UserWarning, stacklevel=1)
        warnings.warn("a clue set was cut at the token limit", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["a clue set was cut at the token limit"]
