"""The prompting probe's study keys checked as a study loads (StudyConfig.validate): shot counts,
seeds, and that every prompt task is a classification task with a template and a verbalizer. Apart
from study/prompt.py, which runs the probe, so that loading a study imports none of its stages."""

from __future__ import annotations

from encoderlab.config import ConfigError
from encoderlab.eval.config import PromptConfig
from encoderlab.eval.tasks import BUILTIN, get_task


def check_prompt_fields(*, seeds: int, shots: tuple[int, ...], tasks: tuple[str, ...], prompt: PromptConfig) -> None:
    """Config errors of a study's prompt fields (prompt_seeds, prompt_shots, prompt_tasks, prompt), named
    by key and task; called by StudyConfig.validate, so a task with no pattern stops the study as it is
    loaded, before any compute."""
    if seeds < 1:
        raise ConfigError(f"prompt_seeds must be >= 1, got {seeds}")
    if any(k < 0 for k in shots) or len(set(shots)) != len(shots):
        raise ConfigError(f"prompt_shots must be distinct shot counts >= 0 (0: zero-shot), "
                          f"got {list(shots)}")
    if not tasks:
        return
    if not shots:
        raise ConfigError("prompt_shots is empty: give at least one k (0: zero-shot) for the prompt_tasks")
    dup = sorted({t for t in tasks if tasks.count(t) > 1})
    if dup:
        raise ConfigError(f"prompt_tasks repeats {dup}")
    if (prompt.template or prompt.verbalizer) and len(tasks) > 1:
        raise ConfigError("prompt.template and prompt.verbalizer replace a task's own pattern: with several "
                          f"prompt_tasks ({list(tasks)}) leave them unset, each task uses its own")
    for name in tasks:
        _check_task(name, prompt)


def _check_task(name: str, prompt: PromptConfig) -> None:
    with_pattern = sorted(n for n, s in BUILTIN.items() if s.template and s.verbalizer)
    try:
        spec = get_task(name)
    except ValueError as e:
        raise ConfigError(f"prompt_tasks: {name!r}: {e}; the built-in tasks with a prompt pattern are "
                          f"{with_pattern}") from None
    if spec.kind != "classification":
        raise ConfigError(f"prompt_tasks: {name!r} is a regression task: prompting scores label words, so it "
                          f"needs a classification task (with a pattern: {with_pattern})")
    if not (prompt.template or spec.template) or not (prompt.verbalizer or spec.verbalizer):
        raise ConfigError(f"prompt_tasks: {name!r} has no prompt template and verbalizer (eval/tasks.py): the "
                          f"built-in tasks with one are {with_pattern}, or a task-spec YAML may give its own")
