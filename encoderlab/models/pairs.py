"""ELECTRA's two-network models: a generator (a small MLM) and a main network trained on its
samples, the generator's embedding tables shared into the main network.

- :class:`ElectraPair`: the main network is the discriminator (replaced-token detection): the paper.
- :class:`MLMPair`: the main network is an MLM the discriminator's size, for the paper's Replace-MLM
  and All-Tokens-MLM ablations (encoderlab.objectives.rtd).

:func:`deployed` answers, for any model a checkpoint holds, which network is kept after
pretraining (fine-tuned, exported, timed, scored by default): a pair's main network, else the
model itself. Attribute names (``generator``, ``discriminator``, ``mlm``) are the state-dict
prefixes of saved checkpoints and stay as they are.

Shape letters: V vocabulary (or positions, token types), E embedding width.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from encoderlab.config import ConfigError
from encoderlab.models.config import EmbeddingSharing, ModelConfig
from encoderlab.models.networks import Discriminator, MaskedLM
from encoderlab.nn.encoder import init_weights

SHARED_TABLES = ("word_embeddings", "position_embeddings", "token_type_embeddings")


class Pair(nn.Module):
    """A generator and the main network trained on its samples (see the subclasses).

    A pair saves and restores itself through four methods that checkpoint.py and train/state.py
    call for either kind: :meth:`networks` (each network with the config it is saved under, by
    directory name), :meth:`network_states` (their weights, GDES tables written as plain tables),
    :meth:`extra_state` (what those weights do not hold exactly: each GDES delta, a copy gate) and
    :meth:`load_networks` (the inverse). Where a checkpoint puts them is one class attribute,
    ``MAIN_AT_ROOT`` (see MLMPair); the names are those of checkpoints already saved."""

    config: ModelConfig
    generator: MaskedLM
    MAIN: ClassVar[str]  # the main network's attribute: its state-dict prefix and checkpoint directory
    DELTA: ClassVar[str]  # extra_state's name of the main network's exact GDES delta of table {}
    # False: a checkpoint holds the pair (its networks in generator/ and MAIN/, extra_state in
    # extra.safetensors). True: it holds the main network at its root, a plain network that loads
    # alone, the generator in generator/, extra_state in the trainer's state (train/state.py).
    MAIN_AT_ROOT: ClassVar[bool] = False

    @property
    def main(self) -> nn.Module:
        return getattr(self, self.MAIN)

    def share_embeddings(self) -> None:
        share_embeddings(self.generator, self.main, self.config.embedding_sharing)

    def networks(self) -> dict[str, tuple[ModelConfig, nn.Module]]:
        """The generator and the main network, by directory name, each with the config it is saved
        under (the generator's holds its own encoder)."""
        cfg = self.config
        return {"generator": (cfg.with_head("mlm", encoder=cfg.generator, generator=None), self.generator),
                self.MAIN: (self.main.config, self.main)}

    def network_states(self) -> dict[str, dict]:
        """Each network's weights as saved: GDES tables as plain tables E_G + delta."""
        return {name: materialized_state(net) for name, (_, net) in self.networks().items()}

    def extra_state(self) -> dict[str, torch.Tensor]:
        """What the saved weights do not hold exactly: each GDES delta of the main network (E_G +
        delta - E_G would round)."""
        return {self.DELTA.format(n): t.delta.detach() for n, t in gdes_tables(self.main.encoder.embeddings).items()}

    def load_networks(self, states: dict[str, dict], extra: dict[str, torch.Tensor]) -> None:
        """Load what network_states and extra_state gave (``extra`` may hold other tensors too).
        A plain table of a GDES one becomes its delta over the generator's: the saved delta where
        ``extra`` has it, else w - E_G (checkpoints written before the position and token-type
        tables were disentangled shared them plainly: their delta is that zero difference)."""
        self.generator.load_state_dict(states["generator"])
        exact = {n: extra[k] for n in SHARED_TABLES if (k := self.DELTA.format(n)) in extra}
        # Shared tables load twice with equal values; strict loading still checks every name.
        self.main.load_state_dict(gdes_deltas(states[self.MAIN], self.main.encoder.embeddings,
                                              "encoder.embeddings.", exact))

    def pretraining_devices(self) -> dict[str, nn.Module]:
        """Trained parts outside both networks (saved in extra_state only): none here."""
        return {}


class ElectraPair(Pair):
    """ELECTRA's generator (a small MLM) and discriminator (RTD), with embedding sharing. Its
    checkpoint holds the pair: generator/, discriminator/ and the exact deltas in extra.safetensors."""

    MAIN, DELTA = "discriminator", "discriminator.{}.delta"

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.generator = MaskedLM(cfg.with_head("mlm", generator=None), encoder_cfg=cfg.generator)
        self.discriminator = Discriminator(cfg.with_head("discriminator", generator=None))
        self.share_embeddings()


class MLMPair(Pair):
    """Generator + an MLM the size of the discriminator, for the Replace-MLM / All-Tokens-MLM
    ablations, with the embedding sharing of the ELECTRA they ablate. With gdes the MLM's tables
    (its tied output layer included) are stopgrad(generator's) + its own deltas, so an ablation of
    a gdes ELECTRA changes the objective alone. Its checkpoint holds the MLM with effective tables
    (E_G + delta, a plain MLM for fine-tuning and export); the trainer keeps each delta itself.

    ``copy_gate``: All-Tokens-MLM's copy mechanism, a linear read-out of the MLM's last hidden
    state giving each token's copy logit (D = sigmoid of it; encoderlab.objectives.rtd). A
    pretraining device like the generator: it is not part of the deployed MLM.

    Its checkpoint is the MLM (MAIN_AT_ROOT): fine-tuning, export and evaluation load it as a plain
    MaskedLM; the generator is in generator/, the exact deltas (mlm_gdes.*) and the copy gate
    (copy_gate.*) in the trainer's state."""

    MAIN, DELTA, MAIN_AT_ROOT = "mlm", "mlm_gdes.{}", True
    COPY_GATE = "copy_gate."  # extra_state's prefix of the copy gate

    def __init__(self, cfg: ModelConfig, copy_gate: bool = False):
        super().__init__()
        if cfg.head != "electra":
            raise ConfigError("MLMPair is built from an ELECTRA config (head: electra)")
        self.config = cfg
        self.generator = MaskedLM(cfg.with_head("mlm", encoder=cfg.generator, generator=None))
        self.mlm = MaskedLM(cfg.with_head("mlm", generator=None))
        self.copy_gate = nn.Linear(cfg.encoder.hidden_size, 1) if copy_gate else None
        if self.copy_gate is not None:
            init_weights(self.copy_gate, cfg.encoder.initializer_range)  # D = 1/2 at the start
        self.share_embeddings()

    def extra_state(self) -> dict[str, torch.Tensor]:
        gate = self.copy_gate.state_dict() if self.copy_gate is not None else {}
        return {**super().extra_state(), **{self.COPY_GATE + k: v.detach() for k, v in gate.items()}}

    def load_networks(self, states: dict[str, dict], extra: dict[str, torch.Tensor]) -> None:
        super().load_networks(states, extra)
        gate = {k.removeprefix(self.COPY_GATE): v for k, v in extra.items() if k.startswith(self.COPY_GATE)}
        if self.copy_gate is not None and not gate:
            raise ConfigError(f"holds no copy gate ({self.COPY_GATE}*), but the objective sets copy_mechanism: "
                              "it was trained without one")
        if self.copy_gate is None and gate:
            raise ConfigError(f"holds a copy gate ({self.COPY_GATE}*), but the objective does not set "
                              "copy_mechanism: it was trained with one")
        if gate:
            self.copy_gate.load_state_dict(gate)

    def pretraining_devices(self) -> dict[str, nn.Module]:
        return {"copy_gate": self.copy_gate} if self.copy_gate is not None else {}


def deployed(model: nn.Module) -> nn.Module:
    """The network kept after pretraining: a pair's main network (ELECTRA: the discriminator),
    else the model itself. What fine-tuning starts from, ONNX exports and studies time."""
    return model.main if isinstance(model, Pair) else model


# ---- embedding sharing ---------------------------------------------------------------------------
def share_embeddings(generator: MaskedLM, main: nn.Module, mode: EmbeddingSharing) -> None:
    """shared: the main network's word, position and token-type tables are the generator's (as in
    the ELECTRA paper). gdes: each is stopgrad(generator's) + its own delta. Disentangling the
    position table too matters at small scale: with it shared, the discriminator's 50x-weighted
    loss steers the positions the generator needs to leave the unigram plateau (docs/benchmarks.md)."""
    if mode == "none":
        return
    g, d = generator.encoder.embeddings, main.encoder.embeddings
    for name in SHARED_TABLES:
        table = getattr(g, name)
        if table is not None:
            setattr(d, name, table if mode == "shared" else GDESEmbedding(table))
    if isinstance(main, MaskedLM):
        main.tie()  # its output layer reads its input table, which is now the generator's


class GDESEmbedding(nn.Module):
    """DeBERTa-v3's gradient-disentangled embedding: E_D = stopgrad(E_G) + delta, delta from zero.

    The discriminator's loss reaches only delta; the generator's table learns from MLM alone.
    The source table is held in a list so it is not registered (and saved) twice.
    """

    def __init__(self, source: nn.Embedding):
        super().__init__()
        self.source = [source]
        self.delta = nn.Parameter(torch.zeros_like(source.weight))

    @property
    def weight(self) -> torch.Tensor:
        return self.source[0].weight.detach() + self.delta  # (V, E)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight)


def gdes_tables(embeddings: nn.Module) -> dict[str, GDESEmbedding]:
    """The GDES tables of an embeddings module, by attribute name (none unless gdes sharing)."""
    return {n: t for n in SHARED_TABLES if isinstance(t := getattr(embeddings, n, None), GDESEmbedding)}


def gdes_deltas(state: dict, embeddings: nn.Module, prefix: str, exact: dict | None = None) -> dict:
    """The inverse of materialize_gdes: ``state`` with each plain table w of a GDES table written as
    its delta, ``exact[name]`` where given (a delta saved itself), else w - E_G (E_G: the table's
    generator source, as loaded now). Tables whose shape differs are left as they are (the caller
    resizes or reports them)."""
    for n, t in gdes_tables(embeddings).items():
        key, base = f"{prefix}{n}", t.source[0].weight.detach()
        w = state.get(key + ".weight")
        if w is None or (key + ".delta") in state or w.shape != base.shape:
            continue
        del state[key + ".weight"]
        given = (exact or {}).get(n)
        state[key + ".delta"] = given if given is not None else w - base.to(w.device)  # w may be on the CPU
    return state


def materialized_state(net: nn.Module) -> dict:
    """A network's state with its GDES tables (if any) written as plain tables E_G + delta."""
    return materialize_gdes(net.state_dict(), net.encoder.embeddings, "encoder.embeddings.")


def materialize_gdes(state: dict, embeddings: nn.Module, prefix: str) -> dict:
    """``state`` with each GDES table written as a plain table E_G + delta, as transformers (and a
    classifier fine-tuned from the discriminator) expect; ``prefix`` locates the embeddings."""
    for n, t in gdes_tables(embeddings).items():
        state.pop(f"{prefix}{n}.delta")
        state[f"{prefix}{n}.weight"] = t.weight.detach()
    return state
