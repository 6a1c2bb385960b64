"""Everything a study will read, opened before any compute: corpus paths (or the token store and
tokenizer it reuses), every variant's recipe, every task it fine-tunes, prompts or perturbs, and the
BLiMP folder, minimal pairs and generation task it scores.

A newcomer's misspelled task file was found after 35 s of tokenizer and store work, and a label
column that was not in the file (``label: category`` where the column is ``cat``) after all the
pretraining (issue 51). So each task here is read whole, as ``encoderlab finetune`` reads it
(eval/tasks.load_task: columns, labels, encodings, empty files, the dev split), and an error is its
message, prefixed with where the study names the task. This runs in seconds, before the data stage;
the demo task alone is left to it (the data stage derives its files from the demo corpus).
"""

from __future__ import annotations

from pathlib import Path

from encoderlab.checkpoint import load_config
from encoderlab.config import ConfigError
from encoderlab.data.corpus import resolve_paths
from encoderlab.data.store import TokenStore
from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.errors import InputNotFoundError
from encoderlab.eval.intrinsic import read_minimal_pairs
from encoderlab.eval.tasks import TaskDataError, load_task, resolve_dir
from encoderlab.study import blimp
from encoderlab.study.config import StudyConfig, TaskRef
from encoderlab.study.measure import DEMO_TASK, task_spec
from encoderlab.study.plan import check_networks, run_name, variant_recipe
from encoderlab.study.prompt import task_ref

FOLDER_HINT = "(the study's glue_dir, or the task's data_dir in tasks, names the folder)"


def check_inputs(cfg: StudyConfig, out: Path) -> None:
    """Stop the study with the first input it could not use, before anything is computed."""
    check_text(cfg)
    check_recipes(cfg, out)
    check_task_files(cfg, planned_data(cfg, out))
    check_evaluation_files(cfg)


def planned_data(cfg: StudyConfig, out: Path) -> dict:
    """The task-related entries of the data stage's record, known before it runs: the GLUE-style root
    and where the demo task will be (data_stage.prepare_data makes it when the study has no corpus)."""
    demo = None if cfg.corpus or cfg.store else str(out / "data" / "demo" / "task")
    return {"glue_dir": cfg.glue_dir, "demo_task": demo}


def check_text(cfg: StudyConfig) -> None:
    """The corpus paths exist (or the reused token store and tokenizer open)."""
    if cfg.store:
        TokenStore(cfg.store)
    elif cfg.corpus:
        resolve_paths(cfg.corpus)
    if cfg.tokenizer:
        load_tokenizer(cfg.tokenizer)


def check_recipes(cfg: StudyConfig, out: Path) -> None:
    """Every variant's networks build and its recipe, overrides included, is a valid PretrainConfig (at
    the study's vocab_size: the store's is not known yet); init checkpoints exist and load."""
    check_networks(cfg)
    placeholder = {"store": str(out / "data" / "store"), "tokenizer": str(out / "data" / "tokenizer")}
    for v in cfg.variants:
        try:
            recipe = variant_recipe(cfg, v, placeholder, out / "runs" / run_name(v.name, 0),
                                    vocab_size=cfg.vocab_size)
        except (ConfigError, ValueError) as e:
            raise ConfigError(str(e) if str(e).startswith("variant ") else f"variant {v.name!r}: {e}") from None
        for key in ("checkpoint", "generator", "discriminator"):
            path = getattr(recipe.init, key)
            if path is None:
                continue
            if not Path(path).exists():
                raise InputNotFoundError(f"variant {v.name!r}: init.{key} {path}: no such checkpoint directory")
            load_config(path)


def task_refs(cfg: StudyConfig) -> list[tuple[str, TaskRef]]:
    """(the study key that names it, the task) for every task the study reads, each once."""
    refs = [("tasks", t) for t in cfg.tasks]
    refs += [("prompt_tasks", task_ref(cfg, name)) for name in cfg.prompt_tasks]
    if cfg.robustness_task:
        refs.append(("robustness_task", task_ref(cfg, cfg.robustness_task)))
    seen, out = set(), []
    for where, ref in refs:
        if (ref.name, ref.data_dir) not in seen:
            seen.add((ref.name, ref.data_dir))
            out.append((where, ref))
    return out


def check_task_files(cfg: StudyConfig, data: dict) -> None:
    """Each task's spec loads, its folder is found, and its files read as fine-tuning reads them."""
    for where, ref in task_refs(cfg):
        try:
            spec, data_dir = task_spec(ref, data)
        except (TaskDataError, ValueError) as e:  # a spec file missing or malformed; demo without its corpus
            raise ConfigError(f"{where}: {ref.name!r}: {e}") from None
        if ref.name == DEMO_TASK:
            continue
        try:
            resolve_dir(spec, data_dir)
        except (TaskDataError, ValueError) as e:
            raise ConfigError(f"{where}: {ref.name!r}: {e} {FOLDER_HINT}") from None
        try:
            load_task(spec, data_dir)
        except (TaskDataError, ValueError) as e:
            raise ConfigError(f"{where}: {ref.name!r}: {e}") from None


def check_evaluation_files(cfg: StudyConfig) -> None:
    """The BLiMP folder and its paradigm files, a minimal-pairs file, a generation task's path."""
    if cfg.blimp:
        if not Path(cfg.blimp).is_dir():
            raise InputNotFoundError(f"blimp: {cfg.blimp}: no such folder (file not found)")
        try:
            blimp.load_pairs(cfg.blimp, cfg.blimp_pairs_per_paradigm)
        except (FileNotFoundError, ValueError) as e:
            raise ConfigError(f"blimp: {e}") from None
    if cfg.minimal_pairs not in (None, "off"):
        if not Path(cfg.minimal_pairs).is_file():
            raise InputNotFoundError(f"minimal_pairs: {cfg.minimal_pairs}: no such file (file not found)")
        read_minimal_pairs(cfg.minimal_pairs)
    if cfg.generation_task and not Path(cfg.generation_task).exists():
        raise InputNotFoundError(f"generation_task: {cfg.generation_task}: no such file or folder")
