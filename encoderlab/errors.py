"""The project's error types: every problem with user input is an :class:`EncoderlabError`.

They subclass ``ValueError`` so that callers written before this module (``except ValueError``)
keep working, and the command line prints them as one line with no traceback. Each message names
the file, and the line or key where there is one: the reader of the message should not have to
guess which of a hundred files was bad.

- :class:`encoderlab.config.ConfigError`          recipes, studies, task specs, ``key=value`` overrides
- :class:`encoderlab.checkpoint.CheckpointError`  checkpoint directories (ours and transformers')
- :class:`encoderlab.eval.tasks.TaskDataError`    fine-tuning / evaluation data files
- :class:`DataError`                              corpora, tokenizers and token stores
- :class:`InputNotFoundError`                     a path that does not exist (also a ``FileNotFoundError``)
"""

from __future__ import annotations


class EncoderlabError(ValueError):
    """Bad user input (a file, a config, a checkpoint); the message says what and where."""


class DataError(EncoderlabError):
    """A corpus, tokenizer or token store cannot be used; the message names the file."""


class InputNotFoundError(EncoderlabError, FileNotFoundError):
    """A path given by the user does not exist (both an EncoderlabError and a FileNotFoundError)."""
