"""eaq's eager decode step against transformers' own generate() on a sliding-window model, and against the cache eaq
built before session 29 (DynamicCache() without the config: every position kept).

The 1.1B Llama shape as a Mistral with sliding_window=256 (random weights, bf16, CUDA), 16 prompts of 2048 ids:
- generate(): 64 new tokens (min = max, greedy) and 1 new token; its time per output token is their difference over 63;
- eaq's Decoder as the benchmark runs it (Decoder.step, each sequence restarted from the prompt's cache), with the
  dynamic cache built from the config (this session) and without it (before), per step;
- the tokens of each against generate()'s (the share equal; random weights' logits are near ties, so in bf16 a
  different attention kernel, generate's masked one against eaq's unmasked one, flips some picks).
From the repository root, on the GPU: python3 docs/results/2026-11-27-h100-session29/against-generate.py [bf16|fp32]
"""

import sys
import time

import torch
from omegaconf import OmegaConf
from transformers import DynamicCache

from eaq.config import ModelConfig
from eaq.models import load_model
from eaq.workloads import generate as gen

BATCH, PROMPT, NEW, REPS = 16, 2048, 64, 5
fields = OmegaConf.to_container(OmegaConf.load("conf/model/llama_1b_random.yaml"))
fields["architecture"] |= {"model_type": "mistral", "max_position_embeddings": 4096, "sliding_window": 256}
device = torch.device("cuda")
dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[sys.argv[1] if len(sys.argv) > 1 else "bf16"]
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
model = load_model(ModelConfig(**fields), with_tokenizer=False, device=device).model.to(dtype).eval()
print(f"{dtype}, batch {BATCH}, prompts of {PROMPT} ids, {NEW} new tokens, sliding_window 256, {torch.cuda.get_device_name()}")
ids = torch.randint(0, model.config.vocab_size, (BATCH, PROMPT), generator=torch.Generator().manual_seed(0)).to(device)


def timed(run, reps=REPS):
    run()  # warm
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


with torch.inference_mode():
    def hf(new):
        return model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=new,
                              min_new_tokens=new, pad_token_id=0)

    full_s, one_s = timed(lambda: hf(NEW)), timed(lambda: hf(1))
    expected = hf(NEW)[:, PROMPT:]
    print(f"generate(): {NEW} tokens {full_s * 1e3:.1f} ms, 1 token {one_s * 1e3:.1f} ms: "
          f"{(full_s - one_s) / (NEW - 1) * 1e3:.2f} ms per output token after the first")
    cache_layers = type(model.generate(ids[:, :PROMPT], max_new_tokens=1, min_new_tokens=1, pad_token_id=0,
                                       return_dict_in_generate=True).past_key_values.layers[0]).__name__
    print(f"generate()'s cache layers: {cache_layers}")

    for label, without_config in (("eaq, cache from the config (this session)", False),
                                  ("eaq, DynamicCache() without the config (before)", True)):
        if without_config:
            gen.Generator.new_cache = lambda self: DynamicCache()
        generator = gen.Generator(model, model, model.config, PROMPT, NEW, device, generation_config=model.generation_config)
        decoder = gen.Decoder(generator, ids)

        def sequence():
            for _ in range(decoder.steps):
                decoder.step()

        per_step = timed(sequence) / decoder.steps
        sequence()
        same = f"{(decoder.tokens == expected).float().mean().item():.3f}"
        layer = decoder.cache.layers[0]
        print(f"{label}: {per_step * 1e3:.2f} ms per decode step; cache layer {type(layer).__name__} holding "
              f"{layer.keys.shape[-2]} positions after a sequence; share of tokens equal to generate()'s: {same}; "
              f"KV bytes read per step {decoder.kv_bytes_read_per_step() / 1e6:.1f} MB")
