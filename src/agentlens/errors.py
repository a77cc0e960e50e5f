"""Errors raised by agentlens.

Every error the package raises on purpose derives from :class:`AgentlensError`::

    AgentlensError
    ├── ConfigError (also ValueError)        bad agentlens.toml, option or environment variable
    ├── MissingExtraError (also ImportError) an optional dependency is not installed
    ├── FormatError (also ValueError)        a trace file or record that cannot be read
    ├── StoreError                           the store could not do what was asked
    │   ├── RunNotFoundError (also KeyError) no run with that id
    │   ├── UnreadableRunError               a stored run this agentlens cannot read back
    │   └── SchemaVersionError               a store or file written by a newer agentlens
    ├── ScorerError                          an unknown scorer or a bad scorer definition
    └── LoopDetected                         the loop guard stopped a call (loop_guard="raise")

The capture SDK never raises any of these into the host agent: it logs them through
``logging.getLogger("agentlens")`` and counts what it dropped. The one exception is
:class:`LoopDetected`, raised from a decorated tool only when the user asked for it
(``agentlens.configure(loop_guard="raise")``), so that the agent can change course.
"""

from __future__ import annotations

__all__ = [
    "AgentlensError",
    "ConfigError",
    "FormatError",
    "LoopDetected",
    "MissingExtraError",
    "RunNotFoundError",
    "SchemaVersionError",
    "ScorerError",
    "StoreError",
    "UnreadableRunError",
]


class AgentlensError(Exception):
    """The root of every error agentlens raises on purpose."""


class ConfigError(AgentlensError, ValueError):
    """A configuration value (argument, environment variable or file) is invalid."""


class MissingExtraError(AgentlensError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package} is not installed; install it with: pip install 'agentlens[{extra}]'"
        )
        self.package = package
        self.extra = extra


class FormatError(AgentlensError, ValueError):
    """A trace file or record cannot be read.

    Attributes:
        source: the file name (or ``"<stdin>"``), when known.
        line: the 1-based line number in the file, when known.
        field: the dotted path of the offending field, when known.
        reason: what was wrong, without the location.
    """

    def __init__(
        self,
        reason: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.reason = reason
        self.source = source
        self.line = line
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.source is not None:
            where = self.source
            if self.line is not None:
                where += f":{self.line}"
        elif self.line is not None:
            where = f"line {self.line}"
        parts = [p for p in (where, f"field {self.field!r}" if self.field else "") if p]
        prefix = ", ".join(parts)
        return f"{prefix}: {self.reason}" if prefix else self.reason


class StoreError(AgentlensError):
    """The store could not do what was asked (cannot open, corrupt, locked...)."""


class RunNotFoundError(StoreError, KeyError):
    """No run with the given id is stored."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id

    def __str__(self) -> str:
        return f"no run with id {self.run_id!r}"


class UnreadableRunError(StoreError):
    """A stored run cannot be read back (its stored form is damaged or not understood).

    Commands that read many runs (``score``, ``export``) report it and go on with the others;
    ``agentlens delete RUN_ID`` removes it.

    Attributes:
        run_id: the run's id.
        reason: why it cannot be read, without the store's name.
    """

    def __init__(self, message: str, *, run_id: str, reason: str) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.reason = reason


class SchemaVersionError(StoreError):
    """A store or file was written by a newer agentlens than this one."""


class ScorerError(AgentlensError):
    """An unknown scorer name, or a scorer defined wrongly."""


class LoopDetected(AgentlensError):
    """Raised from a decorated tool, before the tool runs, when the loop guard is set to
    ``"raise"`` and this call (tool + normalised arguments) already returned the same result
    ``count`` times in the run: the agent is going round in circles. The only error capture
    raises into an agent, and only when asked to (``agentlens.configure(loop_guard="raise")``).

    Attributes:
        tool: the tool's name.
        arguments: the call's arguments, as recorded.
        count: how many times the call returned the same result before it was stopped.
        run_id: the run being captured.
    """

    def __init__(self, tool: str, args: object, count: int, run_id: str) -> None:
        super().__init__(
            f"loop detected: {tool} already returned the same result {count} times for these "
            f"arguments in run {run_id}; not called again (agentlens loop_guard='raise')"
        )
        self.tool = tool
        self.arguments = args
        self.count = count
        self.run_id = run_id
