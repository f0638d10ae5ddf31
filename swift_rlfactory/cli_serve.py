"""``swift-rlfactory web-ui``, ``view`` and ``serve-agent``: the commands that serve (``docs/ui.md``,
``docs/serve-agent.md``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from .cli_args import add_model_arguments, add_turn_arguments, policy_settings, positive

errors = Console(stderr=True, emoji=False, highlight=False)


def _auth(value: str | None) -> tuple[str, str] | None:
    if value is None:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise argparse.ArgumentTypeError("--auth takes USER:PASS")
    return user, password


def _port_taken(host: str, port: int) -> str | None:
    """Why ``--port`` cannot be served on ``host`` (in use, not allowed), or ``None`` if it can."""
    import socket

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        return (
            f"--port {port}: cannot serve on {host}:{port} ({exc.strerror or exc}); another web-ui or view "
            f"may be running there: pass --port with a free port, e.g. --port {port + 1}"
        )
    return None


def _web_ui(args: argparse.Namespace) -> int:
    from .adapters.swift_webui import WebUIUnsupported, launch
    from .ui.page import build_agent_tab, serve_options
    from .ui.probe import patient_probe

    if taken := _port_taken(args.host, args.port):
        errors.print(taken, markup=False)
        return 2
    env = str(args.env) if args.env else ""
    run = str(args.run) if args.run else ""
    try:
        serve = serve_options(args.host, args.port, _auth(args.auth))
        launch(lambda: build_agent_tab(env, run), serve, args.lang, patient_probe)
    except (WebUIUnsupported, argparse.ArgumentTypeError) as exc:
        errors.print(str(exc), markup=False)
        return 2
    return 0


def _view(args: argparse.Namespace) -> int:
    from .adapters.swift_webui import is_loopback
    from .ui.page import serve_options, viewer_app
    from .ui.probe import patient_probe

    if not args.run.is_dir():
        errors.print(f"no such folder: {args.run}", markup=False)
        return 2
    if taken := _port_taken(args.host, args.port):
        errors.print(taken, markup=False)
        return 2
    if not is_loopback(args.host) and not args.auth:
        errors.print(
            f"note: {args.host} lets anyone who reaches it read this run; --auth USER:PASS", markup=False
        )
    with patient_probe():
        viewer_app(str(args.run)).launch(**serve_options(args.host, args.port, _auth(args.auth)))
    return 0


def add_ui_parsers(sub: argparse._SubParsersAction) -> None:
    """The ``web-ui`` and ``view`` subcommands."""
    web = sub.add_parser(
        "web-ui",
        help="ms-swift's web UI plus an Agent RL tab (environment, tools, rewards, launch, metrics, trajectories)",
        description="Every tab of `swift web-ui`, its GRPO tab pre-filled for the rlfactory plugin, and the "
        "Agent RL tab. Needs the ui extra: pip install 'swift-rlfactory[ui]'. The page can start training "
        "runs and call tools: keep it on 127.0.0.1, or give --auth.",
    )
    view = sub.add_parser(
        "view",
        help="metrics and trajectory viewer for one run or eval folder (nothing that runs code)",
        description="Plots of logging.jsonl and a step -> group -> trajectory viewer of trajectories.jsonl.",
    )
    view.add_argument("run", type=Path, help="a swift rlhf output folder or an `eval --output` folder")
    web.add_argument("--env", type=Path, help="environment YAML to pre-fill")
    web.add_argument("--run", type=Path, help="run or eval folder to pre-fill in the viewer")
    web.add_argument("--lang", choices=["en", "zh"], default="en", help="ms-swift's UI language (default en)")
    for parser in (web, view):
        parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=7860, help="port (default 7860)")
        parser.add_argument("--auth", help="USER:PASS required to open the page")
    web.set_defaults(func=_web_ui)
    view.set_defaults(func=_view)


def _serve_agent(args: argparse.Namespace) -> int:
    from .eval.policy import PolicyOptions
    from .eval.serve_agent import serve

    options = PolicyOptions(**policy_settings(args), adapters=args.adapters)
    return serve(
        args.env, options, transport=args.transport, host=args.host, port=args.port, tool_name=args.tool_name
    )


def add_agent_parser(sub: argparse._SubParsersAction) -> None:
    """The ``serve-agent`` subcommand."""
    agent = sub.add_parser(
        "serve-agent",
        help="serve a trained agent (model, environment, tools) as an MCP server with one tool",
        description="One MCP tool: a task in words in, the agent's final answer and a short trace (tool "
        "calls, turns, stop reason) out, as text and structured content. Each call is one episode of the "
        "agent loop `eval` runs, greedy unless --temperature; another environment lists it in mcpServers.",
    )
    agent.add_argument("env", type=Path, help="the agent's environment YAML (its tools, prompt and limits)")
    add_model_arguments(agent, adapters={"help": "LoRA checkpoint folder to answer with"})
    turns = agent.add_argument_group("sampling and scale")
    add_turn_arguments(turns, "default 0 (greedy)")
    turns.add_argument(
        "--concurrency", type=positive, default=16, help="episodes in flight; more calls wait (default 16)"
    )
    mcp = agent.add_argument_group("the MCP server")
    mcp.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="http: address to bind (default 127.0.0.1)")
    mcp.add_argument("--port", type=int, default=8000, help="http: port, 0 for any free one (default 8000)")
    mcp.add_argument("--tool-name", help="the tool's name (default: the environment's name)")
    agent.set_defaults(func=_serve_agent)
