"""Security: no pickle is ever loaded, servers listen on 127.0.0.1 by default, the API key comes
only from the environment and never reaches a file or a log, and nothing in the data can make
the program read or write outside its folders.

Reading outside the traces folder (`../`, absolute names, symlinks) is refused in
`test_bad_data.py` (`checkpoint_path_escape`, `checkpoint_absolute_path`, `checkpoint_symlink_outside`,
`checkpoint_symlinked_question_outside`); this file covers writing, pickles, binds and secrets.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch

from searchgrpo.config import CheckerConfig, field_docs
from searchgrpo.train.checkpoints import latest_checkpoint
from tests.helpers import ROOT
from tests.helpers.faults import FaultServer, assert_one_error_line, main_in_process
from tests.helpers.tiny import SETS

SOURCE_DIRS = ("searchgrpo", "tui", "benchmarks", "tests")

# --------------------------------------------------------------------------- no pickle, no eval


def _call_name(node: ast.Call) -> str:
    parts = []
    f = node.func
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if isinstance(f, ast.Name):
        parts.append(f.id)
    return ".".join(reversed(parts))


def _kw(node: ast.Call, name: str) -> object:
    for k in node.keywords:
        if k.arg == name:
            return k.value.value if isinstance(k.value, ast.Constant) else k.value
    return None


UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "shelve", "marshal", "joblib"}


def unsafe_uses(path: Path) -> list[str]:
    """Every place in one source file that could run code from data, or listen on every address."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            )
            if any(n.split(".")[0] in UNSAFE_MODULES for n in names):
                found.append(f"{where}: imports {names}")
        elif isinstance(node, ast.Call):
            name = _call_name(node)
            last = name.rsplit(".", 1)[-1]
            if name in ("eval", "exec", "compile", "__import__"):
                found.append(f"{where}: {name}()")
            elif name.endswith("torch.load") or name == "torch_load":
                if _kw(node, "weights_only") is not True:
                    found.append(f"{where}: {name}() without weights_only=True")
            elif last == "load" and name.split(".")[0] in ("np", "numpy"):
                if _kw(node, "allow_pickle") is not False and _kw(node, "allow_pickle") is not None:
                    found.append(f"{where}: {name}(allow_pickle=...)")
            elif name in ("yaml.load", "yaml.unsafe_load", "yaml.full_load", "yaml.load_all", "yaml.unsafe_load_all"):
                found.append(f"{where}: {name}() (use yaml.safe_load)")
            elif last in ("read_pickle", "system", "popen") and name.split(".")[0] in ("pd", "pandas", "os"):
                found.append(f"{where}: {name}()")
            elif _kw(node, "shell") is True:
                found.append(f"{where}: {name}(shell=True)")
            elif _kw(node, "trust_remote_code") is True:
                found.append(f"{where}: {name}(trust_remote_code=True)")
            elif _kw(node, "allow_pickle") is True:
                found.append(f"{where}: {name}(allow_pickle=True)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip() in ("0.0.0.0", "::"):
            found.append(f"{where}: binds every address ({node.value!r})")
    return found


def test_no_pickle_eval_or_wildcard_bind_anywhere_in_the_source():
    # Every Python file but this one, whose scanner and its self-test spell out what it looks for.
    files = [p for d in SOURCE_DIRS for p in sorted((ROOT / d).rglob("*.py")) if p != Path(__file__).resolve()]
    assert len(files) > 60
    problems = [problem for f in files for problem in unsafe_uses(f)]
    assert problems == []


def test_the_scanner_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import pickle\nimport torch, yaml, numpy as np\ntorch.load('x')\nyaml.load(s)\n"
        "np.load('x', allow_pickle=True)\neval('1')\nmodel.eval()\nHOST = '0.0.0.0'\n"
        "torch.load('y', weights_only=True)\nyaml.safe_load(s)\n"
    )
    import tests.reliability.test_security as me

    old_root = me.ROOT
    me.ROOT = tmp_path
    try:
        found = unsafe_uses(bad)
    finally:
        me.ROOT = old_root
    assert [f.split(": ", 1)[1] for f in found] == [
        "imports ['pickle']",
        "torch.load() without weights_only=True",
        "yaml.load() (use yaml.safe_load)",
        "np.load(allow_pickle=...)",
        "eval()",
        "binds every address ('0.0.0.0')",
    ]


class Payload:
    """Unpickling this would run a shell command that creates a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_poisoned_checkpoint_is_refused_and_its_payload_never_runs(tmp_path, capsys, monkeypatch):
    """A checkpoint whose optimizer.pt carries a code-running pickle: resume refuses it in one line
    (torch.load with weights_only=True), and the command never runs. An eval checkpoint that
    offers only a pickled adapter_model.bin is refused before anything is loaded."""
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "pwned"
    args = ["train", "--headless", *SETS, "--set", "train.run_name=r", "--set", "train.max_steps=1"]
    assert main_in_process(args, capsys, monkeypatch)[0] == 0
    info = latest_checkpoint(Path("runs/r"))
    torch.save({"state": {}, "param_groups": [], "x": Payload(marker)}, info.path / "optimizer.pt")
    code, out = main_in_process(
        [*args[:-2], "--set", "train.max_steps=2", "--resume", "--allow-changes"], capsys, monkeypatch
    )
    assert code == 2
    assert_one_error_line(
        out, f"{info.path}: checkpoint could not be loaded (UnpicklingError: Weights only load failed"
    )
    assert not marker.exists()

    adapter = info.path / "adapter"
    torch.save({"weight": Payload(marker)}, adapter / "adapter_model.bin")
    (adapter / "adapter_model.safetensors").unlink()
    for cmd in (["eval", "--baseline", "--checkpoint", str(info.path)], ["merge", "--checkpoint", str(info.path)]):
        code, out = main_in_process([*cmd, *SETS], capsys, monkeypatch)
        assert code == 2
        assert_one_error_line(out, "adapter_model.safetensors", "never from pickled .bin files")
    assert not marker.exists()


# --------------------------------------------------------------------------- 127.0.0.1 by default


def test_servers_listen_on_127_0_0_1_by_default():
    from searchgrpo import cli
    from searchgrpo.agents.server import EmbeddedServer

    assert inspect.signature(EmbeddedServer.__init__).parameters["host"].default == "127.0.0.1"
    serve_host = inspect.signature(cli.serve).parameters["host"].default
    assert getattr(serve_host, "default", serve_host) == "127.0.0.1"
    assert "start llama.cpp (xllamacpp) on 127.0.0.1" in field_docs(CheckerConfig)["server"]


def _outward_address() -> str | None:
    """This machine's address on its default route (no packet is sent), or None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            address = s.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") else address


def test_the_embedded_server_is_not_reachable_from_another_address(tiny_gguf):
    from searchgrpo.agents.server import EmbeddedServer

    outward = _outward_address()
    with EmbeddedServer(tiny_gguf, parallel=1, threads=1) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert json.loads(urllib.request.urlopen(server.base_url + "/models", timeout=10).read())["data"]
        if outward is None:
            pytest.skip("no non-loopback address on this machine to try")
        with pytest.raises((urllib.error.URLError, OSError)):
            urllib.request.urlopen(f"http://{outward}:{server.port}/v1/models", timeout=3)


# --------------------------------------------------------------------------- the API key


def test_the_api_key_never_reaches_a_file_or_the_output(tmp_path, capsys, monkeypatch):
    """Train (checkpoints every step) and eval with the LLM checker over HTTP while the key is set.
    The server receives the key and even echoes it in its replies; afterwards no file anywhere
    under the run, the eval report or the verdict cache holds it, nor does anything printed."""
    import dataclasses as dc

    import searchgrpo.policy.samplers as samplers

    secret = "sk-live-SECRET-7f3a9c1e5b"
    monkeypatch.setenv("SEARCHGRPO_CHECKER_API_KEY", secret)
    monkeypatch.chdir(tmp_path)
    real_generate = samplers.generate
    monkeypatch.setattr(
        samplers,
        "generate",
        lambda *a, **kw: [
            [dc.replace(c, text="founder company\nuniversity city born") for c in g] for g in real_generate(*a, **kw)
        ],
    )
    with FaultServer(label=f"Maybe. Authorization: Bearer {secret}") as server:
        checker = [
            "--set",
            "checker.backend=llm",
            "--set",
            f"checker.server={server.url}",
            "--set",
            f"checker.cache_path={tmp_path / 'cache' / 'verdicts.sqlite'}",
        ]
        code, out = main_in_process(
            [
                "train",
                "--headless",
                *SETS,
                *checker,
                "--set",
                "train.run_name=r",
                "--set",
                "train.max_steps=2",
                "--set",
                "train.save_every=1",
                "--set",
                "train.eval_every=2",
                "--set",
                "train.eval_states=2",
            ],
            capsys,
            monkeypatch,
        )
        assert code == 0, out
        ckpt = latest_checkpoint(Path("runs/r")).path
        code, eval_out = main_in_process(
            [
                "eval",
                "--baseline",
                "--checkpoint",
                str(ckpt),
                "--limit",
                "2",
                *SETS,
                *checker,
                "--output",
                "report.json",
            ],
            capsys,
            monkeypatch,
        )
        assert code == 0, eval_out
        assert server.chat_requests() and all(
            r["headers"].get("Authorization") == f"Bearer {secret}" for r in server.records
        )
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "events.jsonl" for p in files) and any(p.name == "report.json" for p in files)
    assert any(p.name == "config.yaml" for p in files) and any(p.suffix == ".sqlite" for p in files)
    assert any(p.name == "adapter_model.safetensors" for p in files)
    leaks = [str(p) for p in files if secret.encode() in p.read_bytes()]
    assert leaks == [] and secret not in out + eval_out
    events = (tmp_path / "runs" / "r" / "events.jsonl").read_text()
    assert "[api key]" in events  # the echoed key was blanked out of the verdicts' reasons
