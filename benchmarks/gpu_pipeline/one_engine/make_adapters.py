"""Write LoRA checkpoints of a base model whose answers differ, for checking one engine against several.

``python make_adapters.py MODEL OUT SCALE [SCALE ...]`` writes ``OUT/lora-<i>`` for each SCALE: a rank-16
PEFT adapter on every linear projection, its A matrices PEFT's own initialisation and its B matrices
Gaussian noise of that standard deviation (seed ``i``), so each adapter moves the model by a known,
different amount. Scale 0 is the base model itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def main(model_dir: str, out: str, *scales: str) -> None:
    for i, scale in enumerate(map(float, scales)):
        base = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
        model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules=TARGETS))
        generator = torch.Generator().manual_seed(i)
        with torch.no_grad():
            for name, weight in model.named_parameters():
                if "lora_B" in name:
                    weight.copy_(torch.randn(weight.shape, generator=generator) * scale)
        folder = Path(out) / f"lora-{i}"
        model.save_pretrained(folder)
        print(f"{folder}: B ~ N(0, {scale}^2)")


if __name__ == "__main__":
    main(*sys.argv[1:])
