"""MXNet word-level LSTM language model on PTB (`mxnet-ptb-lstm-train`), with Gluon: embedding,
a multi-layer `gluon.rnn.LSTM`, a dense decoder, truncated BPTT, SGD with gradient-norm clipping,
as in Gluon's word language model example and Zaremba et al. (2014).

The gpu profile is their medium model (2 x 650, dropout 0.5, BPTT 35, batch 20); cpu-small their
small one (2 x 200, no dropout, BPTT 20, batch 20). Both run on the CPU: MXNet 1.9.1's CUDA builds
target CUDA 11.2, which the driver stacks of current GPU hosts do not pair with (see
`workloads.mxnet_inception`). Reads `ptb.train.txt` from spec.data_dir (a real PTB copy drops in),
builds the vocabulary from it (each line's words plus an end-of-sentence token), reports tokens/s and
the training loss over the first and the last steps (`loss_start`, `loss_end`).
"""

from __future__ import annotations

from typing import Any

from workloads.loop import StepClock, new_meter, run_epochs
from workloads.measure import bottleneck_label
from workloads.mxnet_inception import CPU_ONLY_REASON, import_mxnet, mxnet_versions
from workloads.protocol import AT_LEAST_ONE, NOT_NEGATIVE, POSITIVE, Range, Result, Spec, Workload, register
from workloads.ptb_corpus import BpttWindows, batch_columns, loss_summary, read_corpus, train_file


def build_model(mx: Any, vocab_size: int, hidden: int, layers: int, dropout: float, init: float):
    from mxnet import gluon

    class LstmLanguageModel(gluon.Block):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.drop = gluon.nn.Dropout(dropout)
                self.embedding = gluon.nn.Embedding(vocab_size, hidden, weight_initializer=mx.init.Uniform(init))
                self.lstm = gluon.rnn.LSTM(hidden, layers, dropout=dropout if layers > 1 else 0.0, input_size=hidden,
                                           i2h_weight_initializer=mx.init.Uniform(init),
                                           h2h_weight_initializer=mx.init.Uniform(init))
                self.decoder = gluon.nn.Dense(vocab_size, in_units=hidden, flatten=False,
                                              weight_initializer=mx.init.Uniform(init))

        def forward(self, tokens, state):
            out, state = self.lstm(self.drop(self.embedding(tokens)), state)
            return self.decoder(self.drop(out)), state

    return LstmLanguageModel()


@register
class MxnetPtbLstmTrain(Workload):
    name = "mxnet-ptb-lstm-train"
    framework = "mxnet"
    interpreter = "mxnet"
    requires_modules = ("mxnet", "numpy")
    unit = "tokens/s"
    dataset = "ptb"
    description = "MXNet Gluon word-level LSTM language model on PTB, on the CPU (2 x 650; cpu-small: 2 x 200)"
    stresses = "CPU (the model runs on it), little else"
    choices = {"device": ("cpu",)}  # CPU_ONLY_REASON
    setting_types = {"threads": (int, type(None))}
    ranges = {"hidden": AT_LEAST_ONE, "layers": AT_LEAST_ONE, "dropout": Range(0, 1), "bptt": AT_LEAST_ONE,
              "batch_size": AT_LEAST_ONE, "init": NOT_NEGATIVE, "lr": NOT_NEGATIVE, "clip": POSITIVE,
              "warmup_steps": NOT_NEGATIVE, "threads": AT_LEAST_ONE}
    defaults = {
        "gpu": {"hidden": 650, "layers": 2, "dropout": 0.5, "bptt": 35, "batch_size": 20, "init": 0.05, "lr": 1.0,
                "clip": 5.0, "device": "cpu", "threads": None, "warmup_steps": 5},
        "cpu-small": {"hidden": 200, "layers": 2, "dropout": 0.0, "bptt": 20, "batch_size": 20, "init": 0.1, "lr": 1.0,
                      "clip": 5.0, "device": "cpu", "threads": None, "warmup_steps": 3},
    }

    def prepare(self, spec: Spec) -> None:
        train_file(spec.data_dir)

    def run(self, spec: Spec) -> Result:
        cfg = self.config_for(spec)
        result = self.new_result(spec, cfg)
        if cfg["device"] != "cpu":
            raise ValueError(f"config device={cfg['device']!r}: {CPU_ONLY_REASON}")
        path = train_file(spec.data_dir)
        vcpus = max(1, int(spec.vcpus))
        threads = int(cfg["threads"] or vcpus)
        mx = import_mxnet(threads)
        import numpy as np
        from mxnet import autograd, gluon

        mx.random.seed(spec.seed)
        ctx = mx.cpu()
        ids, vocab = read_corpus(path)
        batch_size, bptt = int(cfg["batch_size"]), int(cfg["bptt"])
        columns = batch_columns(ids, batch_size, bptt, path)
        # (steps, batch): column b is the b-th contiguous slice of the corpus, as in batchify.
        matrix = np.asarray(ids[: columns * batch_size], dtype=np.float32).reshape(batch_size, columns).T
        data = mx.nd.array(matrix, ctx=ctx)

        hidden, layers = int(cfg["hidden"]), int(cfg["layers"])
        model = build_model(mx, len(vocab), hidden, layers, float(cfg["dropout"]), float(cfg["init"]))
        model.initialize(ctx=ctx)
        params = model.collect_params()
        trainer = gluon.Trainer(params, "sgd", {"learning_rate": float(cfg["lr"]), "momentum": 0, "wd": 0})
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        clip = float(cfg["clip"])
        losses: list[float] = []
        state: list[Any] = [None]

        def step(window) -> float:
            position, x, y = window
            if position == 0 or state[0] is None:  # a new pass over the corpus starts from zero state
                state[0] = model.lstm.begin_state(batch_size=batch_size, ctx=ctx)
            h = [s.detach() for s in state[0]]  # truncated BPTT: no gradient into the last window
            with autograd.record():
                logits, state[0] = model(x, h)
                loss = loss_fn(logits.reshape((-1, len(vocab))), y.reshape((-1,))).mean()
            loss.backward()
            grads = [p.grad(ctx) for p in params.values() if p.grad_req != "null"]
            gluon.utils.clip_global_norm(grads, clip)
            trainer.step(1)  # the loss is already a mean over the window's tokens
            losses.append(float(loss.asscalar()))  # also waits for the step: MXNet is asynchronous
            return float(y.size)

        warmup = int(cfg["warmup_steps"])
        meter = new_meter(spec, cfg, warmup, "cpu")
        extra = result.extra
        extra.update(
            versions=mxnet_versions(mx),
            device="cpu",
            device_note=CPU_ONLY_REASON,
            operator_threads=threads,
            vocabulary=len(vocab),
            corpus_tokens=len(ids),
        )
        run_epochs(meter, BpttWindows(data, bptt), step, StepClock("cpu"), extra)
        meter.finish(result, vcpus)

        extra.update(loss_summary(losses, warmup))
        result.bottleneck = bottleneck_label(result.counters, vcpus)
        return result
