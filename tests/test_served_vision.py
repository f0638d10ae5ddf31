"""`swift-rlfactory eval --base-url ... --vision`: images from tools reach a served vision model as image parts.

A real OpenAI-compatible HTTP server on 127.0.0.1 (``conftest.ScriptedChat``) records every request body;
the tools are the image environment's real ones (a Python tool returning a PIL image, an MCP server returning
an image block, a Python tool whose image is over ``limits.max_image_bytes``). Turn 1 calls the three tools,
turn 2 calls one more (past ``limits.max_images_per_trajectory``), turn 3 answers.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from swift_rlfactory.cli import main
from swift_rlfactory.runs.log import read_trajectories

from .conftest import ROOT, ScriptedChat

IMAGES_ENV = ROOT / "tests" / "environments" / "images" / "env.yaml"
NOTES = [  # what the trajectory log keeps, and all a text-only model reads
    "a red square:\n[image: image/png, 75 B]",
    "a blue photo\n[image: image/png, 79 B]",
    "[image: image/png, 12.4 kB]",
    "a green square:\n[image: image/png, 76 B]",
]
TOO_LARGE = "[image: image/png, 12.4 kB; not shown: larger than limits.max_image_bytes (5000)]"
TOO_MANY = "a green square:\n[image: image/png, 76 B; not shown: limits.max_images_per_trajectory reached]"


def _calls(*calls: tuple[str, dict[str, Any]]) -> str:
    return "\n".join(
        f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
        for name, arguments in calls
    )


def scripted(body: dict[str, Any]) -> str:
    """Turn 1: three image tools; turn 2: a fourth image; turn 3: the answer."""
    turn = sum(m["role"] == "assistant" for m in body["messages"]) + 1
    if turn == 1:
        return _calls(("snapshot", {"color": "red"}), ("photo", {}), ("panorama", {}))
    if turn == 2:
        return _calls(("snapshot", {"color": "green"}))
    return "<answer>red and blue</answer>"


def run(tmp_path: Path, *flags: str) -> tuple[list[dict[str, Any]], dict[str, Any], Path]:
    """One eval episode against the scripted server: the request bodies, the trajectory, the output folder."""
    dataset = tmp_path / "test.jsonl"
    row = {"messages": [{"role": "user", "content": "What colours?"}], "solution": "red and blue"}
    dataset.write_text(json.dumps(row) + "\n")
    out = tmp_path / "out"
    with ScriptedChat(scripted) as server:
        argv = [
            "eval", "--env", str(IMAGES_ENV), "--dataset", str(dataset), "--output", str(out),
            "--base-url", f"http://127.0.0.1:{server.port}/v1", "--served-model", "scripted", *flags,
        ]  # fmt: skip
        assert main(argv) == 0
    [trajectory] = read_trajectories(out / "trajectories.jsonl")
    assert len(server.requests) == 3
    return server.requests, trajectory, out


def _pixel(part: dict[str, Any]) -> tuple[int, int, int]:
    assert part["type"] == "image_url"
    prefix, data = part["image_url"]["url"].split(",", 1)
    assert prefix == "data:image/png;base64"
    return Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB").getpixel((0, 0))


def _image_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        part
        for message in body["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


def _tools(body: dict[str, Any]) -> list[Any]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def _check_log(trajectory: dict[str, Any]) -> None:
    """The trajectory log and the rewards keep the notes, whatever the model was sent."""
    assert [c["observation"] for c in trajectory["tool_calls"]] == NOTES
    assert [m["content"] for m in trajectory["messages"] if m["role"] == "tool"] == NOTES
    assert trajectory["stop_reason"] == "answer"


def test_images_go_in_the_tool_message_of_the_turn_after_the_call(tmp_path: Path):
    (first, second, third), trajectory, out = run(tmp_path, "--vision")
    assert _image_parts(first) == []  # before the call: no image anywhere
    red, blue = _tools(second)[:2]
    assert red[0] == {"type": "text", "text": "a red square:\n"} and _pixel(red[1]) == (255, 0, 0)
    assert blue[0] == {"type": "text", "text": "a blue photo\n"} and _pixel(blue[1]) == (0, 0, 255)
    assert len(red) == len(blue) == 2
    assert _tools(second)[2] == TOO_LARGE  # over max_image_bytes: its note, and why
    assert [_pixel(p) for p in _image_parts(second)] == [(255, 0, 0), (0, 0, 255)]
    # turn 3: the history keeps both images; the third image of the trajectory is over max_images (2)
    assert _tools(third)[:3] == _tools(second) and _tools(third)[3] == TOO_MANY
    assert [_pixel(p) for p in _image_parts(third)] == [(255, 0, 0), (0, 0, 255)]
    assert all(m["role"] != "user" for m in third["messages"][2:])  # no message added
    _check_log(trajectory)
    assert json.loads((out / "eval_config.json").read_text())["vision"] == "tool"


def test_images_go_in_a_user_message_after_the_tool_messages_with_vision_user(tmp_path: Path):
    (first, second, third), trajectory, _ = run(tmp_path, "--vision", "user")
    assert _image_parts(first) == []
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "tool", "user"]
    assert _tools(second) == [NOTES[0], NOTES[1], TOO_LARGE]  # the tool messages stay text
    images = second["messages"][-1]["content"]
    assert [_pixel(p) for p in images] == [(255, 0, 0), (0, 0, 255)] and len(images) == 2
    # turn 3: the images stay after turn 1's tool messages; turn 2 showed none, so no message follows it
    assert [m["role"] for m in third["messages"]][7:] == ["assistant", "tool"]
    assert third["messages"][6] == second["messages"][6] and _tools(third)[3] == TOO_MANY
    _check_log(trajectory)


def test_a_text_only_run_sends_the_notes_as_before(tmp_path: Path):
    requests, trajectory, out = run(tmp_path)
    for body in requests:  # every content a plain string: no image part, no added message
        assert all(isinstance(m["content"], str) for m in body["messages"]), body
        assert [m["role"] for m in body["messages"]].count("user") == 1
    assert _tools(requests[1]) == NOTES[:3] and _tools(requests[2]) == NOTES
    _check_log(trajectory)
    assert "vision" not in json.loads((out / "eval_config.json").read_text())  # settings as before


def test_vision_is_for_a_served_model_and_names_a_place(tmp_path: Path, capsys):
    argv = ["eval", "--env", str(IMAGES_ENV), "--dataset", "d.jsonl", "--output", str(tmp_path / "o")]
    assert main([*argv, "--model", "some-model", "--vision"]) == 2
    assert "--vision applies to a served model (--base-url) only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*argv, "--base-url", "http://127.0.0.1:9/v1", "--served-model", "m", "--vision", "screen"])
    assert "invalid choice: 'screen'" in capsys.readouterr().err
