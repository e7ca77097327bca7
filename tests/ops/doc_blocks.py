"""Run a doc's code blocks as written, against a server started the way `make run` starts it.

Shared by the README's tour (tests/ops/test_readme_tour.py) and the first-hour page
(tests/ops/test_first_hour.py). The blocks run verbatim, in order, in a fresh folder whose `.venv` points at
this checkout's virtualenv, with no COMMIT_OWNER_* variable inherited. The server is started with the
commands of the Makefile's `migrate` and `run` recipes and their default variables. One substitution,
because 127.0.0.1:8080 may be taken on a shared machine: the server gets a free port, the blocks'
`127.0.0.1:8080` is rewritten to it, and COMMIT_OWNER_ENDPOINT (the CLI's documented variable for the
owner's URL, default http://127.0.0.1:8080) names it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT, free_port, wait_http


def fenced_blocks(doc: Path, heading: str | None = None) -> list[tuple[str, str]]:
    """(language, code) of every ```sh / ```python block of ``doc`` (of the section under ``heading``, up to
    the next heading of the same level, when given), in order."""
    text = doc.read_text()
    if heading is not None:
        level = heading.split(" ", 1)[0]
        text = text[text.index(heading):]
        end = text.find(f"\n{level} ", len(heading))
        text = text if end < 0 else text[:end]
    return re.findall(r"^```(sh|python)\n(.*?)^```", text, re.M | re.S)


def make_recipe(target: str, variables: dict[str, str]) -> list[str]:
    """The recipe lines of a Makefile target, with the Makefile's variables expanded."""
    text = (ROOT / "Makefile").read_text()
    values = dict(re.findall(r"^(\w+)\s*\?=\s*(.*?)\s*$", text, re.M))
    values.update(re.findall(r"^(\w+)\s*:=\s*(.*?)\s*$", text, re.M))
    values.update(variables)
    recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", text, re.M)
    assert recipe, f"no recipe for {target}"

    def expand(line: str) -> str:
        for _ in range(5):
            # $(or $(COMMIT_OWNER_X),default): the blocks' environment sets no COMMIT_OWNER_* variable
            line = re.sub(r"\$\(or \$\((\w+)\),([^)]*)\)", lambda m: values.get(m.group(1)) or m.group(2), line)
            line = re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], line)
        return line

    return [expand(line.strip()) for line in recipe.group(1).splitlines()]


# What C++'s std::terminate prints when a native thread is still running as the interpreter exits: seen once in
# about ten CI runs, after a Python block using pyarrow and deltalake had printed all it prints (its output is
# what the callers check). Not the project's code, and nothing of the block's work is undone by it.
_EXIT_ABORT = "terminate called without an active exception"


def _aborted_at_exit(lang: str, res: subprocess.CompletedProcess) -> bool:
    """A Python block that ran to its end and was aborted only by a native library's teardown at exit."""
    return lang == "python" and res.returncode == -signal.SIGABRT and res.stderr.strip() == _EXIT_ABORT


def run_blocks(folder: Path, blocks: list[tuple[str, str]], *, timeout: float = 180) -> list[str]:
    """Start the owner as `make run` does in ``folder``, run ``blocks`` there in order (each must exit 0) and
    stop the owner; the blocks' standard outputs, in order."""
    (folder / ".venv").symlink_to(Path(sys.executable).parent.parent)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMMIT_OWNER_")}
    env["COMMIT_OWNER_ENDPOINT"] = f"http://127.0.0.1:{port}"

    *setup, serve = make_recipe("migrate", {"PORT": str(port)}) + make_recipe("run", {"PORT": str(port)})
    for line in setup:
        subprocess.run(["bash", "-c", line], cwd=folder, env=env, check=True, capture_output=True, timeout=120)
    with open(folder / "server.log", "wb") as log:
        server = subprocess.Popen(["bash", "-c", f"exec {serve}"], cwd=folder, env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
    outputs = []
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc=server)
        for lang, code in blocks:
            code = code.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
            argv = ["bash", "-e", "-c", code] if lang == "sh" else [str(folder / ".venv/bin/python"), "-c", code]
            res = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
            assert res.returncode == 0 or _aborted_at_exit(lang, res), \
                f"{lang} block failed:\n{code}\n{res.stdout}\n{res.stderr}"
            outputs.append(res.stdout)
    finally:
        server.terminate()
        server.wait(30)
    return outputs
