"""The models the capture tool knows, built from their configurations with random weights.

Nothing is downloaded: torchvision models take weights=None and transformers models are built
from a config object (HF_HUB_OFFLINE=1 is set before transformers is imported). Building on the
meta device allocates no memory, so GPT2-XL costs nothing but Python time.
"""

import os
from dataclasses import dataclass
from typing import Callable

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


@dataclass
class Workload:
    """A model, one batch of inputs for it, and how to get a scalar loss from them."""
    name: str
    model: torch.nn.Module
    inputs: dict                                 # name -> tensor, on the model's device
    loss: Callable[[torch.nn.Module, dict], torch.Tensor]
    description: str


def _gpt2(n_embd, n_layer, n_head):
    def build(batch, seq, device):
        from transformers import GPT2Config, GPT2LMHeadModel
        seq = seq or 1024
        # Eager attention: the implementation the GPT-2 results in the DELTA paper were measured
        # with, and what SDPA would fall back to on the meta device anyway.
        config = GPT2Config(n_embd=n_embd, n_layer=n_layer, n_head=n_head, n_positions=max(1024, seq),
                            use_cache=False, attn_implementation="eager")
        with torch.device(device):
            model = GPT2LMHeadModel(config)
        return model, _token_batch(batch, seq, config.vocab_size, device), _language_model_loss, seq
    return build


def _bert_large(batch, seq, device):
    from transformers import BertConfig, BertForMaskedLM
    seq = seq or 512
    config = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                        intermediate_size=4096, max_position_embeddings=max(512, seq),
                        attn_implementation="eager")
    with torch.device(device):
        model = BertForMaskedLM(config)
    # No attention mask: with one, transformers asks whether it is all ones, a data-dependent
    # question meta tensors cannot answer; without one BERT attends to every token all the same.
    return model, _token_batch(batch, seq, config.vocab_size, device, mask=False), _language_model_loss, seq


def _resnet(depth):
    def build(batch, seq, device):
        import torchvision
        with torch.device(device):
            model = getattr(torchvision.models, f"resnet{depth}")(weights=None)
        images = torch.randn(batch, 3, 224, 224, device=device)
        labels = torch.randint(0, 1000, (batch,), device=device)
        loss = lambda m, x: torch.nn.functional.cross_entropy(m(x["images"]), x["labels"])  # noqa: E731
        return model, {"images": images, "labels": labels}, loss, None
    return build


def _token_batch(batch, seq, vocab, device, mask=True):
    """What a tokenizer hands a training loop: ids and an attention mask (all tokens real).
    The mask also keeps transformers from inspecting position ids for packed sequences, a
    data-dependent check that meta tensors cannot answer."""
    ids = torch.randint(0, vocab, (batch, seq), device=device)
    if not mask:
        return {"input_ids": ids}
    return {"input_ids": ids, "attention_mask": torch.ones(batch, seq, dtype=torch.long, device=device)}


def _language_model_loss(model, batch):
    """The language-modelling loss over every token: labels are the inputs (the model shifts
    them for causal models; masked-LM heads score every position)."""
    return model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask"),
                 labels=batch["input_ids"]).loss


BUILDERS = {
    "resnet18": _resnet(18),
    "resnet50": _resnet(50),
    "resnet101": _resnet(101),
    "bert-large": _bert_large,
    "gpt2-large": _gpt2(1280, 36, 20),
    "gpt2-xl": _gpt2(1600, 48, 25),
}


def build_workload(name, batch, seq=None, device="meta"):
    if name not in BUILDERS:
        raise ValueError(f"unknown model '{name}' (known: {', '.join(BUILDERS)})")
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    if seq is not None and seq < 1:
        raise ValueError(f"sequence length must be at least 1, got {seq}")
    model, inputs, loss, used_seq = BUILDERS[name](batch, seq, device)
    description = f"{name} batch {batch}" + (f" seq {used_seq}" if used_seq else "")
    return Workload(name, model, inputs, loss, description)
