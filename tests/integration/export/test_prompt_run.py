"""A run trains with the user's prompt template, records it, refuses a changed one on resume, and a
merge of its checkpoint carries the template (and its digest) into the merged model folder;
`searchgrpo prompt` shows what a template renders."""

from __future__ import annotations

import json

import pytest

from searchgrpo.env.prompt_record import read_prompt_record
from searchgrpo.env.prompt_template import load_template
from searchgrpo.errors import UserError
from searchgrpo.events import LogMessage, StepFinished
from searchgrpo.export.merge import MergeRequest, run_merge
from searchgrpo.train.control import TrainerControl
from searchgrpo.train.run_history import read_history
from searchgrpo.train.trainer import Trainer
from tests.helpers.faults import assert_one_error_line, main_in_process
from tests.helpers.tiny import tiny_config

TEMPLATE = """{% block system %}You write search queries.{% endblock %}
{% block user %}
Q: {{ question }}
Known: {% for e in entities[-max_rows:] %}{{ e.name }}; {% endfor %}

Numbered queries ({{ min_clues }}-{{ max_clues }}):
{% endblock %}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prompt-run")
    template = tmp / "prod.jinja"
    template.write_text(TEMPLATE, encoding="utf-8")
    overrides = (
        f"prompt.template={template}",
        "prompt.clue_format=numbered",
        "train.run_name=r",
        "train.save_every=1",
        "train.max_steps=2",
    )
    control = TrainerControl()

    def stop_after_one_step(event):
        if isinstance(event, StepFinished):
            control.stop.set()  # a step is left for the resumes below

    summary = Trainer(tiny_config(tmp, *overrides), sink=stop_after_one_step, control=control).train()
    return tmp, template, overrides, summary.run_dir


def test_the_run_records_the_prompt_it_trained_with(run):
    _, template, _, run_dir = run
    record = read_prompt_record(run_dir)
    assert record.template.text == TEMPLATE and record.template.clue_format == "numbered"
    assert record.info["source"] == str(template) and record.sizes.max_rows == 4  # TINY_OVERRIDES' table rows
    (entry,) = read_history(run_dir)
    assert entry["prompt"]["sha256"] == load_template(template).digest


def test_a_resume_with_an_edited_template_is_refused_then_allowed(run, capsys, monkeypatch):
    tmp, template, overrides, run_dir = run
    original = template.read_text()
    template.write_text(original.replace("search queries", "web queries"), encoding="utf-8")
    try:
        cfg = tiny_config(tmp, *overrides)
        with pytest.raises(UserError) as info:
            Trainer(cfg, run_dir=run_dir, resume=True).train()
        assert "the prompt template changed" in str(info.value) and "--allow-changes" in str(info.value)
        events = []
        Trainer(cfg, run_dir=run_dir, resume=True, allow_changes=True, sink=events.append).train()
        assert any(isinstance(e, LogMessage) and "resuming with a changed prompt" in e.text for e in events)
        history = read_history(run_dir)
        assert history[-1]["prompt"]["sha256"] == load_template(template).digest != history[0]["prompt"]["sha256"]
        assert "web queries" in (run_dir / "prompt_template.jinja").read_text()
    finally:
        template.write_text(original, encoding="utf-8")


def test_a_merged_model_carries_the_prompt_its_checkpoint_trained_with(run, tmp_path):
    tmp, _, overrides, run_dir = run
    ckpt = sorted((run_dir / "checkpoints").iterdir())[-1]
    events = []
    cfg = tiny_config(tmp, *overrides[2:])  # the config names no template now: the built-in one
    (out,) = run_merge(cfg, MergeRequest([str(ckpt)], output_dir=str(tmp_path), dtype="float32"), events.append)
    record = read_prompt_record(out)
    assert record.template.text == (run_dir / "prompt_template.jinja").read_text()
    meta = json.loads((out / "searchgrpo_merge.json").read_text())
    assert meta["prompt"]["sha256"] == record.template.digest and meta["prompt"]["clue_format"] == "numbered"
    assert any(isinstance(e, LogMessage) and "not the configured one" in e.text for e in events)


def test_searchgrpo_prompt_shows_the_template_and_the_recorded_one(run, capsys, monkeypatch):
    tmp, _, overrides, run_dir = run
    sets = [a for o in (*overrides[:2], "data.demo.questions=24", "data.demo.distractors=40") for a in ("--set", o)]
    code, out = main_in_process(["prompt", *sets, "--first", "2"], capsys, monkeypatch)
    assert code == 0 and out.count("=== ") == 2 and out.count("--- system\nYou write search queries.") == 2
    assert "Numbered queries (2-4):" in out
    code, out = main_in_process(["prompt", "--from", str(run_dir), "--json", *sets[4:]], capsys, monkeypatch)
    (line,) = out.splitlines()
    system = json.loads(line)["messages"][0]["content"]  # the run's record: the resume test may have changed it
    assert system.startswith("You write ") and system in (run_dir / "prompt_template.jinja").read_text()
    code, out = main_in_process(["prompt", "--template-source"], capsys, monkeypatch)
    assert code == 0 and out.startswith("{#-") and "{% block user %}" in out
    code, out = main_in_process(["prompt", *sets, "--state", "nope"], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, "--state nope", "no such state")
    bad = tmp / "bad.jinja"
    bad.write_text("{% block user %}\n{{ question }\n{% endblock %}")
    code, out = main_in_process(["prompt", "--set", f"prompt.template={bad}"], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, f"{bad}:2:", "syntax error")


def test_check_renders_every_state_with_the_template_and_names_a_broken_one(tmp_path):
    from searchgrpo.check import run_health_checks

    template = tmp_path / "first.jinja"
    template.write_text(
        "{% block user %}\n{{ question }}\n{{ entities[0].name }}\n{% endblock %}"
    )  # fails on empty tables
    results = run_health_checks(tiny_config(tmp_path, f"prompt.template={template}"), "test", with_model=False)
    (prompt,) = [r for r in results if r.name == "prompt"]
    assert prompt.status == "FAIL" and f"{template}:3:" in prompt.detail and "prompt.template" in prompt.fix
    results = run_health_checks(tiny_config(tmp_path), "test", with_model=False)
    (prompt,) = [r for r in results if r.name == "prompt"]
    assert prompt.status == "PASS" and "the built-in template" in prompt.detail and "renders all" in prompt.detail
