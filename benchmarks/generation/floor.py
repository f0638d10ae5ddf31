"""Floors of a GRPO step's phases, measured on the GPU from the run's own trajectories.

    python benchmarks/generation/floor.py gen --traj T.jsonl --model M --out gen.json [--enforce-eager true]
    python benchmarks/generation/floor.py train --traj T.jsonl --model M --out train.json

* ``gen``: a standalone vLLM engine with the run's settings replays every logged step's requests
  (:mod:`step_requests`: turn by turn, the same prompts, exactly the tokens the run wrote, sampled at the run's
  temperature with the sampled token's log-prob, as ms-swift asks). Step 1 warms up; each later step runs
  ``--repeats`` times and its floor is the fastest, the sum over its turns.
* ``train``: a forward and backward of the same tokens (each step's 32 whole conversations, one padded
  batch, loss on the completion tokens) and an AdamW step of a LoRA r16 all-linear adapter on the plain
  transformers model, with and without gradient checkpointing; and the weight-sync floor: the bytes of the
  merged model (what colocate ms-swift loads into vLLM each step) and of the adapter (``vllm_enable_lora``),
  moved by one device-to-device copy.

The replay resets the prefix cache before each step, as ms-swift does after each weight sync. A later turn's
prompt holds the run's own text of the earlier turns, which the floor engine did not sample, so the floor
prefills it where the run found it cached: a slightly pessimistic floor.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_requests import read_steps, train_sequence, turn_batches  # noqa: E402  (the file beside this one)


def _bool(text: str) -> bool:
    return text.lower() in ("1", "true", "yes")


def replay(llm, batches) -> list[float]:
    """Seconds per turn batch, each generated in one call as the colocate driver does."""
    from vllm import SamplingParams

    llm.reset_prefix_cache()  # as ms-swift does after every weight sync: no step finds another's prompts
    seconds = []
    for batch in batches:
        prompts = [{"prompt_token_ids": r.prompt_ids} for r in batch]
        params = [
            SamplingParams(
                temperature=1.0, max_tokens=r.new_tokens, min_tokens=r.new_tokens, ignore_eos=True, logprobs=0
            )
            for r in batch
        ]
        t0 = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        seconds.append(time.perf_counter() - t0)
    return seconds


def gen_floor(args) -> dict:
    """Replay every step on a standalone engine; the fastest of ``repeats`` per step is its floor."""
    from transformers import AutoTokenizer
    from vllm import LLM

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    steps = {s: turn_batches(t, tokenizer, args.max_tokens) for s, t in read_steps(args.traj).items()}
    t0 = time.perf_counter()
    llm = LLM(
        model=args.model,
        dtype="bfloat16",
        seed=0,
        gpu_memory_utilization=args.gpu_mem,
        max_model_len=args.max_model_len,
        enforce_eager=args.enforce_eager,
        max_num_seqs=args.max_num_seqs,
        enable_prefix_caching=args.prefix_caching,
        logprobs_mode="processed_logprobs",
    )
    start_s = time.perf_counter() - t0
    first = min(steps)
    replay(llm, steps[first])  # warm-up, as the run's step 1 is
    out = {}
    for step, batches in steps.items():
        if step == first:
            continue
        runs = [replay(llm, batches) for _ in range(args.repeats)]
        best = min(runs, key=sum)
        out[step] = {
            "floor_s": sum(best),
            "turn_s": best,
            "all_s": [sum(r) for r in runs],
            "requests": [len(b) for b in batches],
            "new_tokens": sum(r.new_tokens for b in batches for r in b),
            "prompt_tokens": sum(len(r.prompt_ids) for b in batches for r in b),
        }
    return {"engine_start_s": start_s, "settings": {k: str(v) for k, v in vars(args).items()}, "steps": out}


def _batch(tokenizer, trajectories, device):
    import torch

    seqs = [train_sequence(t, tokenizer) for t in trajectories]
    width = max(len(ids) for ids, _ in seqs)
    pad = tokenizer.pad_token_id or 0
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    loss_mask = torch.zeros_like(ids, dtype=torch.float)
    for row, (seq, prompt) in enumerate(seqs):  # left padding: every completion lies in the last `keep`
        ids[row, width - len(seq) :] = torch.tensor(seq)
        mask[row, width - len(seq) :] = 1
        loss_mask[row, width - len(seq) + prompt :] = 1
    keep = int(max(len(s) - p for s, p in seqs)) + 1
    return ids.to(device), mask.to(device), loss_mask.to(device), keep, sum(len(s) for s, _ in seqs)


def _train_step(model, optimizer, batch) -> float:
    import torch

    ids, mask, loss_mask, keep, _ = batch
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=keep).logits[:, :-1].float()
    target, weight = ids[:, -keep + 1 :], loss_mask[:, -keep + 1 :]
    logps = torch.log_softmax(logits, -1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
    loss = -(logps * weight).sum() / weight.sum().clamp(min=1)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def _copy_s(nbytes: int) -> float:
    """Median seconds of one device-to-device copy of ``nbytes``."""
    import torch

    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    times = []
    for _ in range(21):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return statistics.median(times[1:])


def train_floor(args) -> dict:
    """Forward-backward-AdamW of each step's tokens, with and without gradient checkpointing."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    steps = read_steps(args.traj)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16).cuda()
    full_bytes = sum(p.numel() * 2 for p in model.parameters())
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))
    adapter_bytes = sum(p.numel() * 2 for p in model.parameters() if p.requires_grad)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.0)
    batches = {s: _batch(tokenizer, t, "cuda") for s, t in steps.items()}
    out: dict = {"full_bytes": full_bytes, "adapter_bytes": adapter_bytes}
    out["copy_full_s"], out["copy_adapter_s"] = _copy_s(full_bytes), _copy_s(adapter_bytes)
    for checkpointing in (True, False):
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.enable_input_require_grads()
        else:
            model.gradient_checkpointing_disable()
        torch.cuda.reset_peak_memory_stats()
        _train_step(model, optimizer, batches[min(batches)])  # warm-up
        key = "checkpointing" if checkpointing else "no_checkpointing"
        out[key] = {s: _train_step(model, optimizer, b) for s, b in batches.items() if s != min(batches)}
        out[key + "_peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    out["tokens"] = {s: b[4] for s, b in batches.items()}
    return out


def main(argv: list[str] | None = None) -> None:
    """``gen`` or ``train``; writes the JSON to ``--out`` and prints a one-line summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["gen", "train"])
    parser.add_argument("--traj", type=Path, required=True, help="the run's trajectories.jsonl")
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--enforce-eager", type=_bool, default=True)
    parser.add_argument("--prefix-caching", type=_bool, default=True)
    parser.add_argument("--gpu-mem", type=float, default=0.3)
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--max-num-seqs", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=256, help="the run's --max_completion_length")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    result = gen_floor(args) if args.part == "gen" else train_floor(args)
    args.out.write_text(json.dumps(result, indent=1))
    if args.part == "gen":
        floors = [s["floor_s"] for s in result["steps"].values()]
        print(
            f"[floor gen] {args.traj.name}: median floor {statistics.median(floors):.3f} s over {len(floors)} steps"
        )
    else:
        med = {k: statistics.median(result[k].values()) for k in ("checkpointing", "no_checkpointing")}
        print(f"[floor train] {args.traj.name}: fwd+bwd {med}, copy full {result['copy_full_s']:.5f} s")


if __name__ == "__main__":
    main()
