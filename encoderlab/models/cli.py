"""CLI: ``encoderlab models`` (placeholder until presets land in this module)."""


def register(sub) -> None:
    pass
