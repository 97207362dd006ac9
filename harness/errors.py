"""Errors the user can fix. Each message names the problem and what to do about it."""


class HarnessError(Exception):
    """Base class: the CLI prints these as one line, without a traceback."""


class ConfigError(HarnessError, ValueError):
    """Bad input (a study file, a preset name, an override): nothing has been started."""


def unknown_name(kind: str, name: str, valid) -> ConfigError:
    """The standard 'unknown X' error, listing the valid choices."""
    return ConfigError(f"unknown {kind} {name!r}; valid: {', '.join(sorted(valid))}")


class NonFiniteError(HarnessError):
    """A loss or metric became NaN or infinite: the trial fails with this as its reason."""
