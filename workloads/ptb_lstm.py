"""Word-level LSTM language model on PTB (`ptb-lstm-train`), after Zaremba et al. (2014).

The gpu profile is their medium model: 2 layers x 650 units, dropout 0.5, untied embeddings,
35-step truncated BPTT, batch 20, SGD at learning rate 1 with gradient-norm clipping at 5, weights
uniform in +-0.05. The cpu-small profile is their small model: 2 x 200, no dropout, 20-step BPTT,
weights in +-0.1. Reads `ptb.train.txt` from spec.data_dir (a real PTB copy drops in), builds the
vocabulary from it (each line's words plus an end-of-sentence token) and reports tokens/s, with the
training loss averaged over the first and the last few steps (`loss_start`, `loss_end`).
"""

from __future__ import annotations

import itertools
from typing import Any

from workloads import distributed
from workloads.gpu_memory_use import allocator_peaks
from workloads.kernel_split import record_split
from workloads.loop import StepClock, new_meter, run_epochs
from workloads.measure import bottleneck_label, stage_done
from workloads.protocol import AT_LEAST_ONE, NOT_NEGATIVE, POSITIVE, Range, Result, Spec, Workload, register
from workloads.ptb_corpus import BpttWindows, batch_columns, loss_summary, read_corpus, train_file
from workloads.torch_common import (
    DEVICES,
    PRECISIONS,
    autocast,
    framework_versions,
    prefer_sleeping_openmp,
    setup_device,
)


def build_model(vocab_size: int, hidden: int, layers: int, dropout: float, tied: bool, init: float):
    import torch
    from torch import nn

    class LstmLanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(dropout)
            self.embedding = nn.Embedding(vocab_size, hidden)
            self.lstm = nn.LSTM(hidden, hidden, layers, dropout=dropout if layers > 1 else 0.0)
            self.decoder = nn.Linear(hidden, vocab_size)
            if tied:
                self.decoder.weight = self.embedding.weight
            for p in self.parameters():
                nn.init.uniform_(p, -init, init)

        def forward(self, tokens: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
            out, state = self.lstm(self.drop(self.embedding(tokens)), state)
            return self.decoder(self.drop(out)), state

        def zero_state(self, batch: int, device: str):
            shape = (layers, batch, hidden)
            return (torch.zeros(shape, device=device), torch.zeros(shape, device=device))

    return LstmLanguageModel()


@register
class PtbLstmTrain(Workload):
    name = "ptb-lstm-train"
    framework = "pytorch"
    unit = "tokens/s"
    description = "Word-level LSTM language model on PTB (Zaremba et al.'s medium model; cpu-small: their small one)"
    dataset = "ptb"
    stresses = "GPU, little else"
    requires_modules = ("torch",)
    choices = {"device": DEVICES, "precision": PRECISIONS}
    ranges = {"hidden": AT_LEAST_ONE, "layers": AT_LEAST_ONE, "dropout": Range(0, 1), "bptt": AT_LEAST_ONE,
              "batch_size": AT_LEAST_ONE, "init": NOT_NEGATIVE, "lr": NOT_NEGATIVE, "clip": POSITIVE,
              "warmup_steps": NOT_NEGATIVE}
    defaults = {
        "gpu": {"hidden": 650, "layers": 2, "dropout": 0.5, "bptt": 35, "batch_size": 20, "tied": False,
                "init": 0.05, "lr": 1.0, "clip": 5.0, "device": "cuda", "precision": "fp32", "warmup_steps": 5,
                "cudnn_benchmark": False},
        "cpu-small": {"hidden": 200, "layers": 2, "dropout": 0.0, "bptt": 20, "batch_size": 20, "tied": False,
                      "init": 0.1, "lr": 1.0, "clip": 5.0, "device": "cpu", "precision": "fp32", "warmup_steps": 3},
    }

    def prepare(self, spec: Spec) -> None:
        train_file(spec.data_dir)

    def run(self, spec: Spec) -> Result:
        cfg = self.config_for(spec)
        result = self.new_result(spec, cfg)
        path = train_file(spec.data_dir)
        result.extra["openmp_sleeps"] = prefer_sleeping_openmp(cfg)

        import torch
        import torch.nn.functional as F

        stage_done("torch_imported")
        device = setup_device(cfg, spec.vcpus, spec.seed)
        ids, vocab = read_corpus(path)
        batch_size, bptt = int(cfg["batch_size"]), int(cfg["bptt"])
        columns = batch_columns(ids, batch_size, bptt, path)
        data = torch.tensor(ids[: columns * batch_size], dtype=torch.long).view(batch_size, columns).t().contiguous().to(device)

        model = build_model(len(vocab), int(cfg["hidden"]), int(cfg["layers"]), float(cfg["dropout"]),
                            bool(cfg["tied"]), float(cfg["init"])).to(device)
        model.train()
        stage_done("model_built")
        params = list(model.parameters())
        optimizer = torch.optim.SGD(params, lr=float(cfg["lr"]))
        clip = float(cfg["clip"])
        losses: list[Any] = []
        state: list[Any] = [None]

        def step(window) -> float:
            position, x, y = window
            if position == 0 or state[0] is None:  # a new pass over the corpus starts from zero state
                state[0] = model.zero_state(batch_size, device)
            h = tuple(s.detach() for s in state[0])  # truncated BPTT: no gradient into the last window
            with autocast(device, cfg["precision"]):
                logits, state[0] = model(x, h)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, clip)
            optimizer.step()
            losses.append(loss.detach())
            return float(y.numel())

        warmup = int(cfg["warmup_steps"])
        meter = new_meter(spec, cfg, warmup, device)
        extra = result.extra
        extra.update(versions=framework_versions(), vocabulary=len(vocab), corpus_tokens=len(ids))
        run_epochs(meter, BpttWindows(data, bptt), step, StepClock(device), extra)
        meter.finish(result, spec.vcpus)
        if device == "cuda" and distributed.current() is None:  # the corpus is on the GPU: its ceiling
            full = [w for w in BpttWindows(data, bptt) if len(w[2]) == bptt]
            measured, windows = len(losses), itertools.cycle(full)
            record_split(result.counters, lambda: step(next(windows)), float(batch_size * bptt), cfg["precision"])
            del losses[measured:]  # the profiled steps' losses are not the run's
        result.counters.update(allocator_peaks())

        extra.update(loss_summary(torch.stack(losses).float().cpu().tolist(), warmup))
        result.bottleneck = bottleneck_label(result.counters, spec.vcpus)
        return result
