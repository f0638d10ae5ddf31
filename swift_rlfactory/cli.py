"""``swift-rlfactory``: try tools before training, and find the ms-swift plugin.

    swift-rlfactory tools list ENV.yaml                 # every tool and the schema the model sees
    swift-rlfactory tools call ENV.yaml NAME '{"a": 1}' # one real call: observation, latency, cache status
    swift-rlfactory plugin-path                         # the file to pass to --external_plugins

Exit codes: 0 success, 1 the tool call failed, 2 the environment or the arguments are invalid.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console

from .env.config import EnvConfigError

console = Console()
errors = Console(stderr=True)


def _tools_list(args: argparse.Namespace) -> int:
    from .env.environment import Environment

    with Environment.load(args.env) as env:
        for name, tool in env.executor.tools.items():
            console.rule(f"[bold]{name}")
            if tool.spec.description:
                console.print(tool.spec.description, markup=False, highlight=False)
            console.print_json(data=tool.spec.parameters)
        console.print(f"{len(env.executor.tools)} tools in environment {env.name!r}")
    return 0


def _tools_call(args: argparse.Namespace) -> int:
    from .env.environment import Environment
    from .tools.parsing import ToolCall

    try:
        arguments = json.loads(args.arguments)
    except json.JSONDecodeError as exc:
        errors.print(f"ARGUMENTS is not valid JSON: {exc}", markup=False)
        return 2
    if not isinstance(arguments, dict):
        errors.print("ARGUMENTS must be a JSON object, e.g. '{\"query\": \"...\"}'", markup=False)
        return 2
    with Environment.load(args.env) as env:
        if args.name not in env.executor.tools:
            known = ", ".join(env.executor.tools) or "none"
            errors.print(f"unknown tool {args.name!r}; available: {known}", markup=False)
            return 2
        for _ in range(args.repeat):
            record = env.executor.execute([ToolCall(name=args.name, arguments=arguments)])[0]
            console.print(record.observation, markup=False, highlight=False, soft_wrap=True)
            status = "hit" if record.cache_hit else "miss"
            console.print(f"[dim]latency {record.latency_s * 1000:.1f} ms · cache {status} · attempts {record.attempts}")
            if record.error:
                errors.print(f"tool call failed: {record.error}", markup=False)
                return 1
    return 0


def _plugin_path(_: argparse.Namespace) -> int:
    print(Path(__file__).with_name("plugin.py"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    parser = argparse.ArgumentParser(prog="swift-rlfactory", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    tools = sub.add_parser("tools", help="list or call an environment's tools").add_subparsers(
        dest="tools_command", required=True
    )
    listing = tools.add_parser("list", help="print every tool and its JSON schema")
    listing.add_argument("env", help="environment YAML file")
    listing.set_defaults(func=_tools_list)
    call = tools.add_parser("call", help="run one tool call and print the observation")
    call.add_argument("env", help="environment YAML file")
    call.add_argument("name", help="tool name, as `tools list` shows it")
    call.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments")
    call.add_argument("--repeat", type=int, default=1, help="call N times (shows the cache at work)")
    call.set_defaults(func=_tools_call)

    sub.add_parser("plugin-path", help="print the file for --external_plugins").set_defaults(func=_plugin_path)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Console entry point."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except EnvConfigError as exc:
        errors.print(f"invalid environment: {exc}", markup=False)
        return 2
    except Exception as exc:  # start-up failures (a server that won't start) read as one clear line
        errors.print(f"error: {type(exc).__name__}: {exc}", markup=False)
        return 2


if __name__ == "__main__":
    sys.exit(main())
