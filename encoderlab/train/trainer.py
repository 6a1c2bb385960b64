"""The pretraining loop: budgets, accumulation, precision (auto: bf16 autocast where it pays), NaN
guard, checkpoints, exact resume.

One step = grad_accum micro-batches per rank, one optimizer update. Each micro-batch's masking and
sampling draw from a generator seeded by (seed, global micro-batch index), so a step's randomness
depends neither on the number of processes nor on where a run was interrupted; dropout uses the
global RNG, whose state is saved in every checkpoint. Metrics are summed as tensors during the
step and read (one host sync) only when logged.
"""

from __future__ import annotations

import math
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from encoderlab.checkpoint import CheckpointError
from encoderlab.device import resolve_device
from encoderlab.nn.encoder import Encoder
from encoderlab.objectives import build_networks, build_objective, with_defaults
from encoderlab.precision import autocast, machine_kind
from encoderlab.runtime import resolve_runtime
from encoderlab.threads import ThreadsFollower
from encoderlab.train import distributed
from encoderlab.train.budget import BudgetPlan, budgets_of, plan_budget
from encoderlab.train.config import ModelSpec, PretrainConfig
from encoderlab.train.data import describe, make_source
from encoderlab.train.evaluate import describe_accuracy, evaluate
from encoderlab.train.flops import step_flops
from encoderlab.train.init import initialize_from, resolve_model
from encoderlab.train.logger import MetricsLogger
from encoderlab.train.optim import build_optimizer, lr_factor
from encoderlab.train.state import (
    OBJECTIVE,
    checkpoint_info,
    list_checkpoints,
    load_checkpoint,
    load_optimizer_state,
    load_rng_state,
    optimizer_state,
    rng_state,
    save_checkpoint,
)


@dataclass
class RunResult:
    status: str  # completed | interrupted | diverged
    step: int
    tokens: int
    flops: float
    checkpoint: str | None
    eval: dict
    stop_signal: int | None = None  # the signal that interrupted the run (SIGINT: Ctrl-C, SIGTERM)


def pretrain(cfg: PretrainConfig, *, source=None, eval_source=None) -> RunResult:
    """Run (or resume) a pretraining run described by a recipe."""
    clean = False
    try:
        result = Trainer(cfg, source=source, eval_source=eval_source).fit()
        clean = True
        return result
    finally:
        distributed.shutdown(clean=clean)


def _seed_of(seed: int, micro: int) -> int:
    return (seed * 0x9E3779B97F4A7C15 + micro * 0xBF58476D1CE4E5B9 + 1) % (2**63)


class Trainer:
    def __init__(self, cfg: PretrainConfig, *, source=None, eval_source=None):
        t = cfg.trainer
        dev = resolve_device(t.device)
        self.dist = distributed.init(dev.type)
        self.device = torch.device("cuda", self.dist.local_rank) if dev.type == "cuda" else dev
        torch.manual_seed(t.seed)
        info = describe(cfg.data)
        model_cfg = resolve_model(cfg.model, cfg.init, info["vocab_size"])
        ocfg = with_defaults(cfg.objective, info["mask_token_id"], info["special_token_ids"])
        self.cfg = cfg.replace(model=ModelSpec(config=model_cfg), objective=ocfg)  # resolved, saved
        self.model_cfg, self.ocfg, self.tokenizer_dir = model_cfg, ocfg, info["tokenizer_dir"]
        self.run_dir = Path(t.run_dir)
        self.model = build_networks(model_cfg, ocfg).to(self.device)
        self.model.train()
        self.notes = initialize_from(self.model, cfg.init)
        # Kernels decided once, before any forward pass (the first evaluation runs under no_grad).
        self.runtime = resolve_runtime(t.precision, self.device, model_cfg.encoder)
        self.runtime.apply(self.model)
        self.precision = self.runtime.precision
        if t.compile:
            for m in self.model.modules():
                if isinstance(m, Encoder):
                    m.compile()
        self.optimizer = build_optimizer(self.model, cfg.optimizer)
        self.params = [p for g in self.optimizer.param_groups for p in g["params"]]
        sentences = ocfg.kind == "mlm" and ocfg.sentence_loss and model_cfg.head == "pretraining"
        pairs = model_cfg.sentence_objective if sentences else None
        kw = dict(rank=self.dist.rank, world_size=self.dist.world_size, seed=t.seed, pairs=pairs)
        self._source_kw = kw
        # The steps the budget allows, and warm-up and short-sequence steps laid out on them
        # (train/budget.py); a resumed run keeps the plan it started with (its time was measured).
        saved = self._saved_budget()
        self.budget = BudgetPlan.from_dict(saved) if saved and saved.get("budgets") == budgets_of(cfg) else plan_budget(
            self.cfg, model_cfg, ocfg, world_size=self.dist.world_size,
            seconds_per_step=self.seconds_per_step)
        self.cfg = cfg = self.budget.apply(self.cfg)
        self.ocfg = cfg.objective  # clm_then_mlm's switch step is resolved in the steps allowed
        self.objective = build_objective(self.ocfg)
        if source is None:
            source = make_source(cfg.data, split="train", grad_accum=t.grad_accum, **kw)
        self.source = source
        if eval_source is None and cfg.data.eval_batches > 0:
            # Held-out batches are packed full sentences for every model, so all are scored alike.
            eval_source = make_source(cfg.data, split="valid", **dict(kw, rank=0, world_size=1, pairs=None))
        self.eval_batches = []
        if eval_source is not None:
            it = iter(eval_source)
            self.eval_batches = [next(it) for _ in range(cfg.data.eval_batches)]
        self.gen = torch.Generator(device=self.device)
        self.step = self.tokens = self.skipped = self.bad_in_row = 0
        self.flops = 0.0
        self.elapsed_prev = 0.0
        self.sums: dict[str, list[torch.Tensor]] = {}
        self.resumed_from = self._maybe_resume()
        self.iterator = iter(self.source)
        self.stop_signal: int | None = None
        self.last_eval: dict = {}
        # The run's clock (elapsed_s, time budgets); fit() restarts it. Set here too, so that
        # train_step() can be called on its own (the study's speed stage, the benchmarks).
        self.t0 = time.perf_counter()

    # ---- resume -------------------------------------------------------------------------------
    def _resume_path(self) -> Path | None:
        r = self.cfg.trainer.resume
        if r == "never":
            return None
        if r == "auto":
            found = list_checkpoints(self.run_dir)
            return found[-1] if found else None
        return Path(r)

    def _saved_budget(self) -> dict | None:
        """The budget plan of the checkpoint this run resumes from (None: a fresh run, an older
        checkpoint without one, or one _maybe_resume will refuse with its own message)."""
        path = self._resume_path()
        try:
            return checkpoint_info(path).get("budget") if path is not None else None
        except CheckpointError:
            return None

    def seconds_per_step(self, seq_len: int | None = None) -> float:
        """One optimizer step's seconds (full length, or the short phase's at ``seq_len``) on this run's
        model, objective and data, as a time budget and a study's plan (study/estimate.py) read it: one
        warm-up step, then the fastest of three (other work only slows a step down; the upper of two,
        as first written, read 0.93 s a step where a 5-minute bert-tiny run then averaged 0.39 s, so
        its warm-up was scaled for 322 steps of the 768 it took). Weights, optimizer and random
        state are put back."""
        t = self.cfg.trainer
        data = self.cfg.data.replace(short_seq_steps=0)
        if seq_len:  # a short-sequence step: the same tokens a step, in more rows
            data = data.replace(short_seq_len=seq_len).short()
        it = iter(make_source(data, split="train", **self._source_kw))
        batches = [{k: v.to(self.device) for k, v in next(it).items()} for _ in range(t.grad_accum)]
        kept = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        objective, optimizer = build_objective(self.ocfg), build_optimizer(self.model, self.cfg.optimizer)
        gen, times = torch.Generator(device=self.device), []
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            for i in range(4):
                _sync(self.device)
                start = time.perf_counter()
                objective.on_step_start(self.model, 0)
                for batch in batches:
                    gen.manual_seed(i)
                    with autocast(self.precision, self.device):
                        out = objective(self.model, batch, gen, 0)
                    (out.loss / t.grad_accum).backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                _sync(self.device)
                times.append(time.perf_counter() - start)
        self.model.load_state_dict(kept)
        mine = torch.tensor([min(times[1:])], dtype=torch.float64, device=self.device)
        if self.dist.enabled:  # every rank must lay out the same schedule: the slowest rank's time
            import torch.distributed as dist

            distributed.all_reduce_(mine, op=dist.ReduceOp.MAX)
        return float(mine.item())

    def _maybe_resume(self) -> str | None:
        path = self._resume_path()
        if path is None:
            return None
        try:
            info, tensors = load_checkpoint(path, self.model)
        except CheckpointError as e:
            older = [str(p) for p in list_checkpoints(self.run_dir) if p != path]
            hint = f"; earlier checkpoints: {older} (resume one with trainer.resume=PATH)" if older else ""
            raise CheckpointError(f"cannot resume: {e}{hint}") from None
        if info["world_size"] != self.dist.world_size:
            raise CheckpointError(f"{path}: saved by {info['world_size']} process(es), resumed with "
                                  f"{self.dist.world_size}: the data positions would not match")
        load_optimizer_state(self.optimizer, tensors, info["optimizer"])
        load_rng_state(tensors)
        own = {k.removeprefix(OBJECTIVE): v for k, v in tensors.items() if k.startswith(OBJECTIVE)}
        self.objective.load_state_dict(own, self.device)  # an objective's own networks (mask proposal)
        self.step, self.tokens, self.flops = info["step"], info["tokens"], info["flops"]
        self.skipped, self.bad_in_row, self.elapsed_prev = info["skipped"], info["bad_in_row"], info["elapsed_s"]
        self.source.load_state_dict(info["data"][self.dist.rank])
        for name in info["metrics"]:
            self.sums[name] = [tensors[f"metric.{name}.num"].to(self.device),
                               tensors[f"metric.{name}.den"].to(self.device)]
        return str(path)

    # ---- the loop ---------------------------------------------------------------------------
    def fit(self) -> RunResult:
        t = self.cfg.trainer
        self.t0 = time.perf_counter()
        self.threads = ThreadsFollower(self.run_dir)
        self.logger = MetricsLogger(self.run_dir, enabled=self.dist.is_main, progress=t.progress)
        if self.dist.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.cfg.to_yaml(self.run_dir / "config.yaml")
            say = self.logger.message
            say(self.budget.describe())  # the first line: what the budget allows and what it scaled
            for warning in self.budget.warnings:
                say(f"warning: {warning}")
            if self.resumed_from:
                say(f"resumed from step {self.step:,} (checkpoint {self.resumed_from})")
            for note in self.notes:
                say(note)
            say(f"precision {self.precision.precision} ({self.precision.reason})")
            if (measures := describe_accuracy(self.cfg.objective)) is not None:
                say(measures)
        # Every (re)start records the precision it ran in: a resumed run may be on another machine.
        self.logger.log("run", {"step": self.step, "device": self.device.type, "machine": machine_kind(self.device),
                                **self.runtime.to_dict(),
                                "budget": self.budget.describe(), "resumed_from": self.resumed_from})
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for s in old:
            signal.signal(s, self._on_signal)
        status, ckpt = "completed", None
        self._last_log = (time.perf_counter(), self.tokens)
        try:
            while self.progress() < 1.0:
                self.train_step()
                stop = self._agree_to_stop()
                if self.bad_in_row >= t.max_bad_steps:
                    status = "diverged"
                    self.logger.message(f"stopping: {self.bad_in_row} non-finite steps in a row at step "
                                        f"{self.step}; the last good checkpoint is kept ({self._latest()})")
                    break
                if t.log_every and self.step % t.log_every == 0:
                    self.log()
                    self._follow_threads()
                if t.eval_every and self.step % t.eval_every == 0:
                    self.run_eval()
                if stop:
                    status = "interrupted"
                    break
                if t.checkpoint_every and self.step % t.checkpoint_every == 0 and self.bad_in_row == 0:
                    ckpt = self.save()  # never while non-finite steps are being skipped
            if status != "diverged":
                if status == "completed":
                    if self.sums:
                        self.log()
                    if self.last_eval.get("step") != self.step:
                        self.run_eval()
                ckpt = self.save()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            self.logger.close()
        ev = self.last_eval if status == "completed" else {}
        return RunResult(status=status, step=self.step, tokens=self.tokens, flops=self.flops,
                         checkpoint=str(ckpt) if ckpt else self._latest(), eval=ev,
                         stop_signal=self.stop_signal if status == "interrupted" else None)

    def _follow_threads(self) -> None:
        """Take up a thread count written to the run directory (a study does when cores free up)."""
        said = self.threads.poll()
        if said is not None:
            self.logger.message(f"step {self.step}: {said}")
            self.logger.log("run", {"step": self.step, "threads": torch.get_num_threads()})

    def _on_signal(self, signum, frame) -> None:
        self.stop_signal = signum

    def _agree_to_stop(self) -> bool:
        if not self.dist.enabled:
            return self.stop_signal is not None
        flag = torch.tensor([1.0 if self.stop_signal is not None else 0.0], device=self.device)
        distributed.all_reduce_(flag)  # a signal seen by one rank stops all of them at the same step
        return bool(flag.item() > 0)

    def _latest(self) -> str | None:
        found = list_checkpoints(self.run_dir)
        return str(found[-1]) if found else None

    def elapsed(self) -> float:
        return self.elapsed_prev + time.perf_counter() - self.t0

    def progress(self) -> float:
        t = self.cfg.trainer
        p = 0.0
        for used, limit in ((self.step, t.max_steps), (self.tokens, t.max_tokens), (self.flops, t.max_flops),
                            (self.elapsed(), t.max_time_s)):
            if limit is not None:
                p = max(p, used / limit if limit > 0 else 1.0)
        return p

    def train_step(self) -> None:
        t, world = self.cfg.trainer, self.dist.world_size
        self.objective.on_step_start(self.model, self.step)
        lr_scale = lr_factor(self.cfg.optimizer, self.step, self.progress())
        for g in self.optimizer.param_groups:
            g["lr"] = self.cfg.optimizer.lr * lr_scale
        step_sums: dict[str, list[torch.Tensor]] = {}
        flops, tokens = 0, 0
        for a in range(t.grad_accum):
            batch = {k: v.to(self.device, non_blocking=True) for k, v in next(self.iterator).items()}
            micro = (self.step * t.grad_accum + a) * world + self.dist.rank
            self.gen.manual_seed(_seed_of(t.seed, micro))
            with autocast(self.precision, self.device):
                out = self.objective(self.model, batch, self.gen, self.step)
            (out.loss / t.grad_accum).backward()
            for name, (num, den) in out.metrics.items():
                acc = step_sums.setdefault(name, [torch.zeros((), device=self.device),
                                                  torch.zeros((), device=self.device)])
                acc[0] += num
                acc[1] += den
            B, T = batch["input_ids"].shape
            flops += step_flops(self.model_cfg, self.ocfg, B, T, out.num_masked, out.num_predicted, self.step,
                                sentence_labels="sentence_label" in batch).total
            tokens += out.tokens
        if self.dist.enabled:
            distributed.average_gradients(self.params, world)
            totals = torch.tensor([float(flops), float(tokens)], dtype=torch.float64, device=self.device)
            distributed.all_reduce_(totals)
            flops, tokens = totals[0].item(), int(totals[1].item())
        clip = self.cfg.optimizer.clip_norm
        max_norm = clip if clip > 0 else math.inf
        norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm, foreach=True)
        # The guard's one host sync per optimizer step (free on CPU, small on CUDA).
        finite = bool(torch.isfinite(norm)) if t.nan_guard else True
        if finite:
            self.optimizer.step()
            self.bad_in_row = 0
            step_sums["grad_norm"] = [norm.detach().float(), torch.ones((), device=self.device)]
            step_sums["lr"] = [torch.tensor(self.optimizer.param_groups[0]["lr"], device=self.device),
                               torch.ones((), device=self.device)]
            for name, (num, den) in step_sums.items():
                acc = self.sums.setdefault(name, [torch.zeros((), device=self.device),
                                                  torch.zeros((), device=self.device)])
                acc[0] += num
                acc[1] += den
        else:
            self.skipped += 1
            self.bad_in_row += 1
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        self.tokens += tokens
        self.flops += flops

    # ---- logging, evaluation, checkpoints ------------------------------------------------------
    def log(self) -> None:
        names = sorted(self.sums)
        if self.dist.enabled and names:
            flat = torch.stack([x for n in names for x in self.sums[n]])
            distributed.all_reduce_(flat)
            vals = flat.view(-1, 2)  # numerators and denominators both summed: means stay means
        else:
            vals = torch.stack([torch.stack(self.sums[n]) for n in names]) if names else torch.zeros(0, 2)
        vals = vals.cpu().tolist()
        now = time.perf_counter()
        dt = max(now - self._last_log[0], 1e-9)
        rec = {"step": self.step, "progress": self.progress(), "tokens": self.tokens, "flops": self.flops,
               "elapsed_s": round(self.elapsed(), 3),
               "tokens_per_s": (self.tokens - self._last_log[1]) / dt, "skipped_steps": self.skipped,
               "peak_memory_mb": peak_memory_mb(self.device), "device": self.device.type,
               "precision": self.precision.precision, "threads": torch.get_num_threads()}
        for n, (num, den) in zip(names, vals):
            rec[n] = num / den if den else float("nan")
        self.logger.log("train", rec)
        self._last_log = (now, self.tokens)
        self.sums = {}

    def run_eval(self) -> dict:
        if not self.eval_batches:
            self.last_eval = {}
            return {}
        ev = evaluate(self.model, self.ocfg, self.eval_batches, device=self.device,
                      precision=self.precision.precision)
        self.logger.log("eval", {"step": self.step, "tokens": self.tokens, "flops": self.flops, **ev})
        self.last_eval = dict(ev, step=self.step)
        return ev

    def save(self) -> Path | None:
        tensors, opt_info = optimizer_state(self.optimizer)
        tensors.update(rng_state())
        tensors.update({f"{OBJECTIVE}{k}": v for k, v in self.objective.state_dict().items()})
        for name, (num, den) in self.sums.items():
            tensors[f"metric.{name}.num"], tensors[f"metric.{name}.den"] = num, den
        data_states = distributed.all_gather_object(self.source.state_dict())
        if not self.dist.is_main:
            return None
        info = {"world_size": self.dist.world_size, "precision": self.precision.precision, "tokens": self.tokens,
                "flops": self.flops,
                "skipped": self.skipped, "bad_in_row": self.bad_in_row, "elapsed_s": self.elapsed(),
                "data": data_states, "optimizer": opt_info, "metrics": sorted(self.sums),
                "budget": self.budget.to_dict()}
        return save_checkpoint(self.run_dir, self.step, self.model, tensors=tensors, info=info,
                               recipe_yaml=self.cfg.to_yaml(), keep_last=self.cfg.trainer.keep_last,
                               tokenizer_dir=self.tokenizer_dir)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    # VmHWM is this process image's own peak; ru_maxrss survives exec, so a run launched from a
    # larger process (a study) would report its parent's peak.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB

