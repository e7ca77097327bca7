"""The README's tour, run as written against a fresh server started the way `make run` starts it.

The shell and Python blocks of the README's tour section run verbatim, in order, in a fresh folder (with
`.venv` pointing at this checkout's virtualenv), with no COMMIT_OWNER_* variable inherited. The server is
started with the commands of the Makefile's `migrate` and `run` recipes and their default variables. One
substitution, because 127.0.0.1:8080 may be taken on a shared machine: the server gets a free port, the
blocks' `127.0.0.1:8080` is rewritten to it, and COMMIT_OWNER_ENDPOINT (the CLI's documented variable for
the owner's URL, default http://127.0.0.1:8080) names it. Afterwards delta-rs must read the table.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT, free_port, wait_http

TOUR = "## A 60-second tour"


def tour_blocks() -> list[tuple[str, str]]:
    """(language, code) of every fenced block in the README's tour section, in order."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(TOUR):]
    section = section[:section.index("\n## ", len(TOUR))]
    return re.findall(r"^```(sh|python)\n(.*?)^```", section, re.M | re.S)


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
            # $(or $(COMMIT_OWNER_X),default): the tour's environment sets no COMMIT_OWNER_* variable
            line = re.sub(r"\$\(or \$\((\w+)\),([^)]*)\)", lambda m: values.get(m.group(1)) or m.group(2), line)
            line = re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], line)
        return line

    return [expand(line.strip()) for line in recipe.group(1).splitlines()]


def test_the_readme_tour_leaves_a_table_delta_rs_reads(tmp_path: Path) -> None:
    blocks = tour_blocks()
    assert [lang for lang, _ in blocks].count("python") >= 1 and "tables create" in blocks[0][1]
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMMIT_OWNER_")}
    env["COMMIT_OWNER_ENDPOINT"] = f"http://127.0.0.1:{port}"

    *setup, serve = make_recipe("migrate", {"PORT": str(port)}) + make_recipe("run", {"PORT": str(port)})
    for line in setup:
        subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=120)
    log_path = tmp_path / "server.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(["bash", "-c", f"exec {serve}"], cwd=tmp_path, env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
    outputs = []
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc=server)
        for lang, code in blocks:
            code = code.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
            argv = ["bash", "-e", "-c", code] if lang == "sh" else [str(tmp_path / ".venv/bin/python"), "-c", code]
            res = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
            assert res.returncode == 0, f"{lang} block failed:\n{code}\n{res.stdout}\n{res.stderr}"
            outputs.append(res.stdout)
    finally:
        server.terminate()
        server.wait(30)

    import deltalake

    dt = deltalake.DeltaTable(str(tmp_path / "warehouse" / "t1"))
    assert dt.version() == 1
    assert sorted(dt.to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3]
    shown = outputs[-1]
    assert sorted(re.findall(r"^\| (\d+) +\|$", shown, re.M)) == ["1", "2", "3"], shown  # delta-rs's printed rows
    assert "latestTableVersion       1" in shown and "latestBackfilledVersion  1" in shown
