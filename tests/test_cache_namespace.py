"""Environments that share one cache file replay each other's tool results only when they have the same
tools and the same output budget.

A team keeps one ``cache.sqlite_path`` for every experiment. Two environments whose ``search`` tools read
different corpora (same tool name, same arguments) must each see their own results, and an environment
whose ``max_output_tokens`` grew (or that counts tokens with a tokenizer now) must not replay observations
cut to the old budget. Ranks of one run (the
same file) share their results, which is what the shared file is for.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from swift_rlfactory.env.environment import Environment
from swift_rlfactory.tools import ToolCall

TOOL = '''
from swift_rlfactory.tools import tool


@tool
def search(query: str) -> str:
    """Search the corpus.

    Args:
        query: what to look for
    """
    return "{corpus}: " + query * 200
'''


def env_file(folder: Path, corpus: str, shared: Path, max_output_tokens: int = 64) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tools.py").write_text(TOOL.replace("{corpus}", corpus))
    path = folder / "env.yaml"
    path.write_text(
        f"name: {corpus}\ntools: {{python: [tools.py]}}\n"
        f"limits: {{max_output_tokens: {max_output_tokens}}}\n"
        f"cache: {{tools: ['*'], sqlite_path: '{shared}'}}\nreward: [{{name: em}}]\n"
    )
    return path


def search(env_path: Path, count_tokens=None) -> tuple[str, bool]:
    with Environment.load(env_path, count_tokens=count_tokens) as env:
        (record,) = env.executor.execute([ToolCall("search", {"query": "aspirin "})])
    return record.observation, record.cache_hit


def test_each_environment_sees_its_own_tools_results_and_budget(tmp_path: Path):
    shared = tmp_path / "team-cache.sqlite"
    wiki, pubmed = (
        env_file(tmp_path / "wiki", "wikipedia", shared),
        env_file(tmp_path / "pubmed", "pubmed", shared),
    )
    assert search(wiki)[0].startswith("wikipedia: ")
    observation, hit = search(pubmed)
    assert observation.startswith("pubmed: ") and not hit
    assert search(wiki) == (search(wiki)[0], True)  # the same environment again: a hit

    short, _ = search(wiki)
    longer, hit = search(env_file(tmp_path / "wiki", "wikipedia", shared, max_output_tokens=512))
    assert not hit and len(longer) > len(short) and "[truncated" in short

    # cut by a tokenizer (training) or at four characters a token (an eval without one): not the same text
    exact, hit = search(wiki, count_tokens=lambda text: len(text.split()))
    assert not hit and exact != short


def test_a_moved_project_keeps_its_cached_results_and_an_edited_tool_does_not(tmp_path: Path):
    """The digest named the folder's absolute path, so moving a project (or checking it out elsewhere)
    lost every cached result; the same tools elsewhere are the same tools."""
    shared = tmp_path / "team-cache.sqlite"
    before = env_file(tmp_path / "before", "wikipedia", shared)
    observation, hit = search(before)
    assert not hit
    after = tmp_path / "elsewhere" / "after"
    after.parent.mkdir()
    shutil.move(before.parent, after)
    assert search(after / "env.yaml") == (observation, True)
    (after / "tools.py").write_text(TOOL.replace("{corpus}", "wikipedia-2027"))
    assert not search(after / "env.yaml")[1]


def namespace(env_path: Path) -> str:
    env = Environment.load(env_path)  # not started: no server runs
    try:
        return env.executor.cache_namespace
    finally:
        env.close()


def test_the_files_an_mcp_config_names_are_part_of_what_the_tools_are(tmp_path: Path):
    """A server script and the corpus it is given, named in an ``mcp_config`` file: copied elsewhere, the
    same digest; either edited, another."""
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "server.py").write_text("print('search server')\n")
    (project / "data" / "corpus.jsonl").write_text('{"text": "aspirin"}\n')
    servers = {
        "search": {
            "command": "python",
            "args": ["${workspaceFolder}/server.py", "--corpus=data/corpus.jsonl"],
        }
    }
    (project / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    (project / "env.yaml").write_text("tools: {mcp_config: mcp.json}\nreward: [{name: em}]\n")
    original = namespace(project / "env.yaml")

    copy = Path(shutil.copytree(project, tmp_path / "copy"))
    assert namespace(copy / "env.yaml") == original
    (copy / "server.py").write_text("print('search server, faster')\n")
    edited_server = namespace(copy / "env.yaml")
    (copy / "data" / "corpus.jsonl").write_text('{"text": "ibuprofen"}\n')
    assert len({original, edited_server, namespace(copy / "env.yaml")}) == 3


def test_an_mcp_config_in_a_subfolder_names_the_files_its_servers_run(tmp_path: Path):
    """``tools/mcp.json`` saying ``args: [server.py]`` runs ``tools/server.py`` (its servers start in its
    folder, as the loader resolves them): that file's edits change the digest, and a ``server.py`` beside the
    environment file, which no server runs, does not count. A relative ``cwd`` moves the start again."""
    project = tmp_path / "project"
    (project / "tools" / "sub").mkdir(parents=True)
    for where in ("server.py", "tools/server.py", "tools/sub/helper.py"):
        (project / where).write_text(f"print({where!r})\n")
    servers = {
        "search": {"command": "python", "args": ["server.py", "--corpus=data.jsonl"]},
        "helper": {"command": "python", "args": ["helper.py"], "cwd": "sub"},
    }
    (project / "tools" / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    (project / "tools" / "data.jsonl").write_text('{"text": "aspirin"}\n')
    (project / "env.yaml").write_text("tools: {mcp_config: tools/mcp.json}\nreward: [{name: em}]\n")
    seen = [namespace(project / "env.yaml")]
    (project / "server.py").write_text("print('not what any server runs')\n")
    assert namespace(project / "env.yaml") == seen[0]
    for edited in ("tools/server.py", "tools/data.jsonl", "tools/sub/helper.py"):
        (project / edited).write_text("edited\n")
        seen.append(namespace(project / "env.yaml"))
    assert len(set(seen)) == 4, seen


def test_what_an_mcp_config_file_says_is_part_of_what_the_tools_are(tmp_path: Path):
    """A flag that names no file (``--mode=fast``) or a remote server's url changes what a tool answers as
    much as its script does."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "env.yaml").write_text("tools: {mcp_config: mcp.json}\nreward: [{name: em}]\n")
    digests = set()
    for servers in (
        {"search": {"command": "python", "args": ["-m", "search", "--mode=fast"]}},
        {"search": {"command": "python", "args": ["-m", "search", "--mode=slow"]}},
        {"search": {"url": "http://127.0.0.1:8000/mcp"}},
        {"search": {"url": "http://127.0.0.1:8001/mcp"}},
    ):
        (project / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
        digests.add(namespace(project / "env.yaml"))
    assert len(digests) == 4
