"""``swift-rlfactory``: train, evaluate, try tools before training, and find the ms-swift plugin.

The subcommands and exit codes: docs/README.md ("The command line").
"""

from __future__ import annotations

import argparse
import json
import sys
from itertools import chain, islice
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError
from rich.console import Console

from swift_rlfactory.redaction import redact

from .cli_args import (
    add_model_arguments,
    add_turn_arguments,
    fraction,
    non_negative_float,
    policy_settings,
    positive,
    positive_float,
)
from .cli_serve import add_agent_parser, add_ui_parsers
from .env.config import EnvConfigError

if TYPE_CHECKING:
    from .env.environment import Environment

# Observations and model text are printed as they are: no emoji codes (":x:"), markup or highlighting.
console = Console(emoji=False, highlight=False)
errors = Console(stderr=True, emoji=False, highlight=False)


def _environment(target: str) -> Environment:
    """The environment file ``target``; a URL (``http://``, ``https://``) stands for an environment whose
    tools are those of the one MCP server there (streamable HTTP, else HTTP+SSE): a server tried as it is,
    with OAuth (discovery, registration, a headless authorization) should it answer 401."""
    from .env.config import EnvConfig
    from .env.environment import Environment

    if not target.startswith(("http://", "https://")):
        return Environment.load(target)
    server = {"mcpServers": {"server": {"url": target, "auth": "oauth"}}}
    try:
        return Environment(EnvConfig.model_validate({"name": "mcp-server", "tools": {"mcp": server}}))
    except ValidationError as exc:
        raise EnvConfigError(f"{target}: {exc.errors()[0]['msg']}") from None


def _tools_list(args: argparse.Namespace) -> int:
    with _environment(args.env) as env:
        for name, tool in env.executor.tools.items():
            console.rule(f"[bold]{name}")
            if tool.spec.description:
                console.print(tool.spec.description, markup=False, highlight=False)
            console.print_json(data=tool.spec.parameters)
        console.print(f"{len(env.executor.tools)} tools in environment {env.name!r}")
    return 0


def _tools_call(args: argparse.Namespace) -> int:
    from .env.episode import EpisodeSetupError

    try:
        arguments = json.loads(args.arguments)
    except json.JSONDecodeError as exc:
        errors.print(f"ARGUMENTS is not valid JSON: {exc}", markup=False)
        return 2
    if not isinstance(arguments, dict):
        errors.print('ARGUMENTS must be a JSON object, e.g. \'{"query": "..."}\'', markup=False)
        return 2
    with _environment(args.env) as env:
        if args.name not in env.executor.tools:
            known = ", ".join(env.executor.tools) or "none"
            errors.print(f"unknown tool {args.name!r}; available: {known}", markup=False)
            return 2
        for _ in range(args.repeat):
            try:
                record = env.try_tool(args.name, arguments)
            except EpisodeSetupError as exc:
                errors.print(str(exc), markup=False)
                return 1
            # The observation is exactly what the model reads, error text included: printed once, as is.
            console.print(record.observation, markup=False, soft_wrap=True)
            status = "hit" if record.cache_hit else "miss"
            outcome = "[red]failed[/]" if record.error else "ok"
            console.print(
                f"[dim]{outcome} · latency {record.latency_s * 1000:.1f} ms · cache {status} · attempts {record.attempts}"
            )
            if record.error:
                return 1
    return 0


def _tools_login(args: argparse.Namespace) -> int:
    import asyncio

    from .tools.mcp.oauth.login import login

    servers = _environment(args.env).config.mcp_servers().mcpServers
    chosen = {n: s for n, s in servers.items() if s.auth is not None and args.server in (None, n)}
    if not chosen:
        which = f"server {args.server!r}" if args.server else "no server"
        errors.print(f"{which} of {args.env} has OAuth ('auth: oauth') to log in to", markup=False)
        return 2
    for config in chosen.values():
        asyncio.run(login(config, lambda text: console.print(text, markup=False, soft_wrap=True)))
    return 0


def _plugin_path(_: argparse.Namespace) -> int:
    print(Path(__file__).with_name("plugin.py"))
    return 0


def _train(args: argparse.Namespace) -> int:
    from dataclasses import fields

    from .run_config import RunConfig
    from .train import train

    values = {f.name: getattr(args, f.name) for f in fields(RunConfig) if f.name != "swift_args"}
    if values["mode"] is None and args.use_vllm is not None:
        values["mode"] = "colocate" if args.use_vllm else "cpu"
    config = RunConfig(**values, swift_args=args.swift_args)
    from .validation import ValOptions

    validation = ValOptions.from_args(args)
    return train(config, console, verbose=args.verbose, dry_run=args.dry_run, validation=validation)


_KINDS = {"count": positive, "rate": positive_float, "fraction": fraction}


def _train_flag(name: str) -> dict:
    """argparse settings of the train flag of :class:`RunConfig` field ``name``, from its declaration."""
    from dataclasses import fields

    from swift_rlfactory.bundled.models import MODELS

    from .run_config import CPU, DEFAULT_ENV, GPU, MODES, RunConfig, field_default

    f = next(f for f in fields(RunConfig) if f.name == name)
    text, default = f.metadata["help"], field_default(name)
    if f.metadata.get("kind"):
        cpu, gpu = getattr(CPU, name), getattr(GPU, name)
        defaults = [f"{cpu} on CPU"] if cpu is not None else []
        defaults.append(f"{gpu} with vLLM" if gpu is not None else "the env's with vLLM")
        return {"type": _KINDS[f.metadata["kind"]], "help": f"{text}; default {', '.join(defaults)}"}
    settings: dict = {"default": default, "help": text}
    if name == "model":
        known = ", ".join(f"{n} ({m.description})" for n, m in MODELS.items())
        settings["help"] = f"{text}; bundled: {known} (default {default})"
    elif name == "mode":
        settings["choices"] = MODES
    elif "Path" in str(f.type):
        settings["type"] = Path
    elif isinstance(default, int):
        settings["type"] = int
    if default == DEFAULT_ENV:
        settings["help"] += " (default: the bundled calculator)"
    elif default is not None and name != "model":
        settings["help"] += f" (default {default})"
    return settings


def _add_train_parser(sub: argparse._SubParsersAction) -> None:
    from dataclasses import fields

    from .run_config import RunConfig

    train = sub.add_parser(
        "train",
        help="GRPO-train a tool-using agent (no arguments: a CPU demo that needs no model hub)",
        description="Run `swift rlhf --rlhf_type grpo` with the rlfactory plugin, print the reward per step "
        "and a sample trajectory. Everything after `--` is passed to swift rlhf as is (later flags win).",
        usage="swift-rlfactory train [options] [-- SWIFT_RLHF_FLAGS ...]",
    )
    for f in fields(RunConfig):  # every knob of the run, as RunConfig documents it
        if f.name != "swift_args":
            train.add_argument("--" + f.name.replace("_", "-"), dest=f.name, **_train_flag(f.name))
    train.add_argument(
        "--use-vllm", action=argparse.BooleanOptionalAction, default=None,
        help="the same as --mode colocate (--no-use-vllm: --mode cpu)",
    )  # fmt: skip
    train.add_argument(
        "-v", "--verbose", action="store_true", help="show ms-swift's output (always saved to swift.log)"
    )
    train.add_argument("--dry-run", action="store_true", help="print the swift rlhf command and stop")
    _add_val_arguments(train)
    train.set_defaults(func=_train)


def _add_val_arguments(train: argparse.ArgumentParser) -> None:
    val = train.add_argument_group(
        "validation beside training",
        "score step 0 and every checkpoint saved (more often: `-- --save_steps N`) on a val set and its phrasing "
        "shifts, one `eval` at a time beside training, into validation.jsonl and validation.json (docs/run.md)",
    )
    val.add_argument("--val-file", type=Path, help="the val set (a dataset as `eval --dataset` takes)")
    val.add_argument("--val-shifts", default="all", help="all, or shift names with commas (default all)")
    val.add_argument(
        "--val-margin",
        type=non_negative_float,
        default=0.05,
        help="alarm when a shift's EM falls more than this below step 0's or the reference's (0.05)",
    )
    val.add_argument(
        "--val-reference", type=Path, help="an earlier eval's metrics.json (or folder) to compare with"
    )
    val.add_argument("--val-stop-on-alarm", action="store_true", help="stop training after an alarm")
    val.add_argument("--val-engine", help="the validation eval's --engine (default: eval's)")
    val.add_argument("--val-limit", type=positive, help="score the first N questions only")  # fmt: skip


def _eval(args: argparse.Namespace) -> int:
    from .eval.command import EvalOptions, run_eval, run_evals

    options = EvalOptions(
        env=args.env,
        dataset=args.dataset,
        output=args.output,
        **policy_settings(args),
        adapters=args.adapters[0] if args.adapters and len(args.adapters) == 1 else None,
        samples=args.samples,
        limit=args.limit,
        group_by=args.group_by or [],
        shifts=args.shifts,
        shift_seed=args.shift_seed,
        shift_margin=args.shift_margin,
        reference=args.reference,
        fail_on_alarm=args.fail_on_alarm,
        choose_by=args.choose_by,
        choose_over=args.choose_over,
    )
    if args.choose_by and not (args.adapters and len(args.adapters) > 1):
        raise ValueError("--choose-by chooses among several --adapters")
    if args.adapters and len(args.adapters) > 1:
        return run_evals(options, args.adapters, console)
    return run_eval(options, console)


def _add_eval_parser(sub: argparse._SubParsersAction) -> None:
    ev = sub.add_parser(
        "eval",
        help="evaluate a model with the training agent loop: EM, F1, reward, tool use, pass@k",
        description="Run every question (SAMPLES times) through the same agent loop, tools and rewards as "
        "training, with a local model (ms-swift engines) or an OpenAI-compatible server. Resumable: episodes "
        "already in OUTPUT/trajectories.jsonl are skipped, unless they failed or their dataset row (golden "
        "answers, any column) changed since.",
    )
    ev.add_argument("--env", type=Path, required=True, help="environment YAML (tools, limits, reward)")
    ev.add_argument(
        "--dataset",
        type=Path,
        required=True,
        help="JSONL/JSON rows {messages, solution|golden_answers} or {question, golden_answers}; parquet, "
        "csv/tsv; .gz, .bz2 or .xz compressed",
    )
    ev.add_argument(
        "--output", type=Path, required=True, help="folder for trajectories.jsonl and metrics.json"
    )
    add_model_arguments(
        ev,
        adapters={
            "nargs": "+",
            "help": "LoRA checkpoint folder (e.g. output/run/v0-.../checkpoint-100); several: one engine "
            "scores each into OUTPUT/<folder name>/",
        },
    )
    run = ev.add_argument_group("sampling and scale")
    run.add_argument(
        "--samples", type=positive, default=1, help="samples per question: k of pass@k (default 1)"
    )
    add_turn_arguments(run, "default 0 for one sample, 1.0 for several")
    run.add_argument("--limit", type=positive, help="only the first N questions")
    run.add_argument(
        "--group-by",
        action="append",
        help="also report metrics per value of this dataset column (e.g. hops; repeatable)",
    )
    run.add_argument("--concurrency", type=positive, default=16, help="episodes in flight (default 16)")
    _add_shift_arguments(ev)
    ev.set_defaults(func=_eval)


def _add_shift_arguments(ev: argparse.ArgumentParser) -> None:
    from .eval.choose import CHOOSE_BY
    from .eval.shifts import registered

    check = ev.add_argument_group(
        "robustness under phrasing shifts",
        "score the set again with each question reworded (its answer kept), beside the original; an alarm "
        "when a score falls more than --shift-margin below the original's on the same questions or below "
        "--reference's (docs/eval.md)",
    )
    check.add_argument(
        "--shifts",
        metavar="LIST",
        help=f"comma-separated: all, {', '.join(registered())}, module:function or a YAML file listing them",
    )
    check.add_argument("--shift-seed", type=int, default=0, help="seeds the shifts' choices (default 0)")
    check.add_argument(
        "--shift-margin",
        type=non_negative_float,
        default=0.05,
        help="EM drop that raises an alarm (default 0.05)",
    )
    check.add_argument(
        "--reference", type=Path, help="metrics.json (or its eval folder) of an earlier model to compare with"
    )
    check.add_argument("--fail-on-alarm", action="store_true", help="exit 3 when an alarm is raised")
    check.add_argument(
        "--choose-by",
        choices=list(CHOOSE_BY),
        help="with several --adapters: write the best one by EM, or by EM under its worst shift, to "
        "OUTPUT/chosen.json",
    )
    check.add_argument(
        "--choose-over",
        type=Path,
        metavar="FOLDER",
        help="with --choose-by: an earlier eval's output folder on this set (the starting model's), kept "
        "unless the best checkpoint beats it on more questions than a sign test allows by chance",
    )


def _select(args: argparse.Namespace) -> int:
    from .eval.select import select

    stratify = [c for c in (args.stratify or "").split(",") if c]
    kept, scored = select(
        args.eval, args.dataset, args.out, args.metric, args.low, args.high,
        stratify=stratify, per_stratum=args.per_stratum, seed=args.seed,
    )  # fmt: skip
    console.print(
        f"{kept} of {scored} scored questions have their {args.metric} rate in ({args.low:g}, {args.high:g}) -> {args.out}"
    )
    return 0 if kept else 1


def _add_select_parser(sub: argparse._SubParsersAction) -> None:
    sel = sub.add_parser(
        "select",
        help="keep the questions an evaluation sometimes solved (GRPO data with a learning signal)",
        description="Read an `eval` run (several samples per question) and write the dataset rows whose mean "
        "metric over samples lies strictly between --low and --high: the groups GRPO gets a gradient from.",
    )
    sel.add_argument("--eval", type=Path, required=True, help="the eval run's --output folder")
    sel.add_argument("--dataset", type=Path, required=True, help="the dataset that run evaluated")
    sel.add_argument("--out", type=Path, required=True, help="JSONL file for the kept rows")
    sel.add_argument("--metric", default="em", help="episode metric to average (default em)")
    sel.add_argument("--low", type=float, default=0.0, help="keep rates above this (default 0)")
    sel.add_argument("--high", type=float, default=1.0, help="keep rates below this (default 1)")
    sel.add_argument("--stratify", help="comma-separated columns (e.g. hops,family) to balance the rows over")
    sel.add_argument(
        "--per-stratum", type=positive, help="with --stratify: keep at most N rows per combination"
    )
    sel.add_argument("--seed", type=int, default=0, help="with --stratify: which rows a full stratum keeps")
    sel.set_defaults(func=_select)


def _rewards(args: argparse.Namespace) -> int:
    from .env.environment import Environment
    from .rewards.rescore import TrajectoryFileError, batches, iter_run, trajectories_file
    from .rewards.rescore_report import print_rescored

    try:
        path = trajectories_file(args.trajectories)
        recorded = batches(islice(iter_run(args.trajectories), args.limit))  # a resumed run's whole chain
        first = next(recorded)  # the first file is checked whole before anything is scored
    except TrajectoryFileError as exc:
        errors.print(f"--trajectories: {exc}", markup=False)
        return 2
    env = Environment.load(args.env)
    try:
        return print_rescored(chain([first], recorded), env, path, args, console, errors)
    except TrajectoryFileError as exc:  # a later log of the chain
        errors.print(f"--trajectories: {exc}", markup=False)
        return 2
    finally:
        env.close()


def _add_rewards_parser(sub: argparse._SubParsersAction) -> None:
    rw = sub.add_parser(
        "rewards",
        help="re-score recorded trajectories with an environment's rewards (try a reward before training)",
        description="Read a trajectories.jsonl written by training or by `eval` (or its folder), score every "
        "trajectory with ENV's reward spec in one batch, and print each component, the per-turn scores "
        "and the total next to the total recorded then.",
    )
    rw.add_argument("env", type=Path, help="environment YAML whose `reward:` to use")
    rw.add_argument("--trajectories", type=Path, required=True, help="trajectories.jsonl, or its folder")
    rw.add_argument("--limit", type=positive, help="only the first N trajectories")
    rw.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    rw.set_defaults(func=_rewards)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    parser = argparse.ArgumentParser(prog="swift-rlfactory", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    tools = sub.add_parser("tools", help="list or call an environment's tools").add_subparsers(
        dest="tools_command", required=True
    )
    listing = tools.add_parser("list", help="print every tool and its JSON schema")
    listing.add_argument("env", help="environment YAML file, or the URL of one MCP server")
    listing.set_defaults(func=_tools_list)
    call = tools.add_parser("call", help="run one tool call and print the observation")
    call.add_argument("env", help="environment YAML file, or the URL of one MCP server")
    call.add_argument("name", help="tool name, as `tools list` shows it")
    call.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments")
    call.add_argument("--repeat", type=positive, default=1, help="call N times (shows the cache at work)")
    call.set_defaults(func=_tools_call)
    log_in = tools.add_parser("login", help="authorize OAuth servers once, for later runs (opens a browser)")
    log_in.add_argument("env", help="environment YAML file, or the URL of one MCP server")
    log_in.add_argument("--server", help="only this server of the environment")
    log_in.set_defaults(func=_tools_login)

    _add_train_parser(sub)
    _add_eval_parser(sub)
    _add_select_parser(sub)
    _add_rewards_parser(sub)
    add_ui_parsers(sub)
    add_agent_parser(sub)
    sub.add_parser("plugin-path", help="print the file for --external_plugins").set_defaults(
        func=_plugin_path
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Console entry point."""
    argv = list(sys.argv[1:] if argv is None else argv)
    swift_args: list[str] = []
    if "--" in argv:  # everything after `--` belongs to swift rlhf
        cut = argv.index("--")
        argv, swift_args = argv[:cut], argv[cut + 1 :]
    parser = build_parser()
    args = parser.parse_args(argv)
    if swift_args and args.command != "train":
        parser.error("only `train` takes flags after `--`")
    args.swift_args = swift_args
    try:
        return args.func(args)
    # Errors are printed unwrapped (soft_wrap), so a path in them can be copied as it is.
    except EnvConfigError as exc:
        errors.print(redact(f"invalid environment: {exc}"), markup=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        errors.print("interrupted", markup=False)
        return 130
    except ValueError as exc:  # a bad argument: the message says which and what is accepted
        errors.print(redact(f"error: {exc}"), markup=False, soft_wrap=True)
        return 2
    except Exception as exc:  # start-up failures (a server that won't start) read as one clear line
        errors.print(redact(f"error: {type(exc).__name__}: {exc}"), markup=False, soft_wrap=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
