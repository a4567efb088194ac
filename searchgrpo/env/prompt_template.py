"""The Executor's prompt as a Jinja2 template file (`prompt.template`): loaded, checked and rendered.

A template renders one state as the Executor's chat messages: its `{% block user %}` is the user
message and its optional `{% block system %}` the system message, each without its leading and
trailing newlines. The built-in template (`templates/executor.jinja`, used when `prompt.template`
is null) is the prompt searchgrpo has always used, to the character; a user's own template makes
training see their production system's prompt. The variables a template gets are those of
`template_context` (listed in the built-in file and in docs/own-system.md).

Templates run in Jinja's immutable sandbox with undefined variables as errors, `trim_blocks` and
`lstrip_blocks` (a line holding only a tag leaves nothing behind). A template is one
self-contained file (macros defined in it; no `{% include %}`, `{% import %}` or `{% extends %}`),
so that the one file recorded with a run and a merged model is the whole prompt. A missing file, a
syntax error or an undefined variable is one line naming the file and the line (`TemplateError`).
`digest` (SHA-256 of the file's bytes) identifies the prompt: prompt caches are keyed by it, a run
records it, and a merged model folder carries the file and its digest (`prompt_record`).
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgrpo.data.traces import DocumentRecord, SearchState
from searchgrpo.errors import UserError, one_line, printable

TEMPLATES = Path(__file__).with_name("templates")
DEFAULT_TEMPLATE = TEMPLATES / "executor.jinja"
"""The built-in Executor prompt (prompt.template: null)."""
CLUE_FORMATS = ("lines", "numbered", "json")
MAX_TEMPLATE_BYTES = 1024 * 1024
_VERDICT_ORDER = {"IMPORTANT": 0, "RELEVANT": 1}


class TemplateError(UserError):
    """A prompt template that cannot be read, compiled or rendered; the message names file and line."""


def short(text: str, limit: int = 140) -> str:
    """`text` on one line (runs of whitespace become one space), cut to `limit` characters with an
    ellipsis: the `short` filter of templates.

    >>> short("a  b\\n c"), short("abcdef", 4)
    ('a b c', 'abc…')
    """
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def documents_by_use(documents: Sequence[DocumentRecord]) -> list[DocumentRecord]:
    """Documents most useful first: IMPORTANT, RELEVANT, then the rest; newest first within each
    (a long tail of IRRELEVANT ones is what a table cut drops)."""
    return sorted(documents, key=lambda d: (_VERDICT_ORDER.get(d.verdict.upper(), 2), -d.round))


def template_context(
    state: SearchState, *, max_rows: int, min_clues: int, max_clues: int, clue_format: str
) -> dict[str, Any]:
    """The variables a template renders a state with (see the module docstring)."""
    b = state.before
    return {
        "question": state.question,
        "question_id": state.question_id,
        "round": state.round,
        "sub_goals": list(state.sub_goals),
        "entities": list(b.entities),
        "goals": list(b.goals),
        "documents": list(b.documents),
        "documents_by_use": documents_by_use(b.documents),
        "context": list(b.context),
        "discovered_docids": list(b.discovered_docids),
        "max_rows": max_rows,
        "min_clues": min_clues,
        "max_clues": max_clues,
        "clue_format": clue_format,
    }


def _recording(render: Any, name: str, captured: dict[str, str]) -> Any:
    """A block's render function that also keeps the block's text in `captured[name]`."""

    def record(ctx: Any) -> Any:
        parts = list(render(ctx))
        captured[name] = "".join(parts)
        yield from parts

    return record


@functools.cache
def _default_digest() -> str:
    return hashlib.sha256(DEFAULT_TEMPLATE.read_bytes()).hexdigest()


def _line_in(exc: BaseException, filename: str) -> int | None:
    """The line of the template file `filename` where a render error arose (the innermost frame
    of that file in the traceback Jinja rewrote), or None."""
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


@dataclass(frozen=True)
class PromptTemplate:
    """A loaded template: `messages(state, ...)` renders it; `digest` identifies its text."""

    path: Path
    text: str
    digest: str
    """SHA-256 of the file's bytes (hex)."""
    clue_format: str
    template: Any
    """The compiled jinja2 Template."""

    @property
    def is_default(self) -> bool:
        """The built-in template's text (wherever this copy was read from)."""
        return self.digest == _default_digest()

    @property
    def version(self) -> str:
        """A short name of this prompt for logs and reports: `executor-template:<12 hex digits>`."""
        return f"executor-template:{self.digest[:12]}"

    def blocks(self, context: dict[str, Any]) -> dict[str, str]:
        """The text of every block the file renders with `context` (rendered once, with the file)."""
        template = self.template
        env = template.environment
        try:
            try:
                ctx = template.new_context(context)
                captured: dict[str, str] = {}
                for name, stack in ctx.blocks.items():  # each block keeps its text as the file renders it
                    stack[0] = _recording(stack[0], name, captured)
                for _ in template.root_render_func(ctx):  # the whole file: its macros, then its blocks
                    pass
                return captured  # a block the file did not render (inside a false if) is not a message
            except Exception:
                env.handle_exception()  # re-raises with the template's own lines in the traceback
                raise  # not reached
        except UserError:
            raise
        except Exception as exc:
            line = _line_in(exc, template.filename)
            where = f"{printable(self.path)}:{line}" if line else printable(self.path)
            raise TemplateError(
                f"{where}: prompt template failed to render ({type(exc).__name__}: {one_line(exc, 300)})"
            ) from None

    def messages(self, state: SearchState, *, max_rows: int, min_clues: int, max_clues: int) -> list[dict[str, str]]:
        """The Executor's chat messages for `state`: system (when the template has that block), then user."""
        blocks = self.blocks(
            template_context(
                state, max_rows=max_rows, min_clues=min_clues, max_clues=max_clues, clue_format=self.clue_format
            )
        )
        if "user" not in blocks:
            raise TemplateError(
                f"{printable(self.path)}: prompt template rendered no {{% block user %}} for state {state.state_id!r}"
            )
        out = []
        system = blocks.get("system", "").strip("\n")
        if system:
            out.append({"role": "system", "content": system})
        out.append({"role": "user", "content": blocks["user"].strip("\n")})
        return out


def load_template(path: str | os.PathLike[str] | None = None, clue_format: str = "lines") -> PromptTemplate:
    """The template at `path` (None: the built-in one), compiled; TemplateError naming the file
    and line when it is missing, unreadable, not a template or has no `user` block."""
    from jinja2 import StrictUndefined, TemplateSyntaxError, nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    if clue_format not in CLUE_FORMATS:
        raise TemplateError(f"prompt.clue_format = {clue_format!r}: expected one of {', '.join(CLUE_FORMATS)}")
    p = Path(path).expanduser() if path is not None else DEFAULT_TEMPLATE
    shown = printable(p)
    try:
        size = p.stat().st_size
        if not p.is_file():
            raise TemplateError(f"{shown}: prompt template is not a file (prompt.template)")
        if size > MAX_TEMPLATE_BYTES:
            raise TemplateError(f"{shown}: prompt template of {size} bytes, above the {MAX_TEMPLATE_BYTES}-byte limit")
        raw = p.read_bytes()
    except FileNotFoundError:
        raise TemplateError(f"{shown}: prompt template not found (prompt.template)") from None
    except OSError as exc:
        raise TemplateError(f"{shown}: prompt template cannot be read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TemplateError(f"{shown}: prompt template is not valid UTF-8 (byte {exc.start})") from None
    env = ImmutableSandboxedEnvironment(
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["short"] = short
    filename = str(p.resolve())
    try:
        tree = env.parse(text, p.name, filename)
        template = env.template_class.from_code(env, env.compile(tree, p.name, filename), env.make_globals(None), None)
    except TemplateSyntaxError as exc:
        raise TemplateError(
            f"{shown}:{exc.lineno}: prompt template syntax error ({one_line(exc.message or exc, 300)})"
        ) from None
    other = next(tree.find_all((nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport)), None)
    if other is not None:
        raise TemplateError(
            f"{shown}:{other.lineno}: a prompt template is one self-contained file ({{% include %}}, {{% import %}} "
            "and {% extends %} are not supported): define macros in the file itself"
        )
    if "user" not in template.blocks:
        raise TemplateError(f"{shown}: prompt template has no {{% block user %}} (the user message)")
    return PromptTemplate(p, text, hashlib.sha256(raw).hexdigest(), clue_format, template)
