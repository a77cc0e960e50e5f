"""The online loop guard: notice, while a run is being captured, that a tool keeps returning the
same result for the same arguments, and (only when asked) stop the next identical call.

Detection after the fact (``repeated_tool_calls``) tells a team what a stuck run cost; the guard
stops it. It applies the rule of ``repeated_tool_calls`` as the calls happen: once a call (tool
+ normalised arguments) has returned the same normalised result ``repeats`` times in a run,

- it logs a warning, calls the ``on_loop`` callback with a :class:`LoopEvent`, and records the
  finding on the run (``metadata["loop_guard"]``), whatever the mode;
- with mode ``raise``, every later call with the same arguments raises
  :class:`~agentlens.errors.LoopDetected` from the decorated tool *before the tool runs* (the
  call is recorded as a step with that error), so the agent can change course. This is the only
  error capture raises into an agent, and only when the user asked for it.

How calls and results are compared (the normalisation of ``repeated_tool_calls``, with the
role's volatile parts and bookkeeping events) is given by the layer above
(:func:`agentlens.configure`), as the :class:`RoleGuard`'s ``call_key`` and ``result_key``.
What a guarded step costs (``benchmarks/bench_capture.py``): its call key (the tool and the
arguments' canonical JSON text, read off one ``orjson`` call when nothing in that text needs
normalising, the common case) and one atomic ``dict.setdefault`` that files the step under it. A call made once
in the run, the usual case, keeps nothing else: no lock, no state object, no copy of its result
(the step holds it). Only a call that comes back takes the lock and gets a state; its result is
compared with the ones seen for those arguments, exactly first (``==``), normalised (the volatile
parts masked) only when not equal. A call that already looped is not compared again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentlens.errors import LoopDetected
from agentlens.model import StepKind

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.capture._run import ActiveStep, Run

__all__ = ["LoopEvent", "LoopGuard", "RoleGuard", "RunGuard"]

logger = logging.getLogger("agentlens")

BLOCKED = object()
"""The call key of a step the guard stopped (it is not a result to count)."""


@dataclass(frozen=True, slots=True)
class LoopEvent:
    """What the ``on_loop`` callback receives when the guard sees a loop."""

    run_id: str
    agent: str | None
    tool: str
    args: Any
    """The call's arguments, as recorded."""
    count: int
    """How many times the call returned the same result."""
    step_ids: tuple[str, ...]
    """The steps of those calls."""
    mode: str
    """``warn`` or ``raise`` (then the next identical call raises ``LoopDetected``)."""


@dataclass(frozen=True, slots=True)
class RoleGuard:
    """The guard of one agent role: its mode and the rule it applies."""

    mode: str
    """``warn`` or ``raise``."""
    repeats: int
    """The same result this many times is a loop (``repeated_tool_calls``' ``max_repeats``)."""
    skip: frozenset[str]
    """Tool names (lower case) never guarded: exempt tools and bookkeeping events."""
    call_key: Callable[[str, Any], Hashable]
    """``call_key(tool, arguments)``: equal for calls that are the same call."""
    result_key: Callable[[Any, Any], Hashable]
    """``result_key(output, error)``: equal for results that are the same observation."""


@dataclass(frozen=True, slots=True)
class LoopGuard:
    """The loop guard of a capture pipeline: a :class:`RoleGuard` per agent role (``None``:
    off for that role) and the callback."""

    default: RoleGuard | None
    """For roles without their own entry in :attr:`roles`."""
    roles: Mapping[str, RoleGuard | None] = field(default_factory=dict)
    on_loop: Callable[[LoopEvent], object] | None = None

    def for_agent(self, agent: str | None) -> RoleGuard | None:
        if agent is not None and agent in self.roles:
            return self.roles[agent]
        return self.default


class _Result:
    """One distinct result of a call: the first raw value, its key when it was needed, and the
    steps that returned it."""

    __slots__ = ("error", "key", "output", "step_ids")

    def __init__(self, output: Any, error: Any, step_id: str) -> None:
        self.output = output
        self.error = error
        self.key: Hashable | None = None
        self.step_ids = [step_id]


class _CallState:
    """A call (tool and arguments) made more than once in the run: its distinct results."""

    __slots__ = ("finding", "results")

    def __init__(self, first: ActiveStep) -> None:
        self.results: list[_Result] = [_Result(first._output, first._error, first.id)]
        self.finding: dict[str, Any] | None = None
        """Set once the call looped: the finding recorded on the run."""


_LOCK = threading.Lock()
"""Taken only when a call comes back (its arguments were seen before in the run): the first
call with some arguments is one atomic ``dict.setdefault``, with no lock."""


class RunGuard:
    """The guard's state for one run being captured (made by the run; internal).

    ``_calls`` maps a call key to the *step* of the first call with those arguments (a call made
    once, the common case: nothing else is kept, its result is the step's own), and to a
    :class:`_CallState` once the call came back.
    """

    __slots__ = ("_call_key", "_calls", "_raise", "_skip", "guard", "role", "run")

    def __init__(self, run: Run, guard: LoopGuard, role: RoleGuard) -> None:
        self.run = run
        self.guard = guard
        self.role = role
        self._calls: dict[Hashable, Any] = {}
        self._raise = role.mode == "raise"
        self._skip = role.skip
        self._call_key = role.call_key

    def _key(self, step: ActiveStep) -> Hashable | None:
        kind = step.kind
        if kind is not StepKind.TOOL and kind is not StepKind.RETRIEVAL:
            return None
        name = step.name or str(kind)
        if name.lower() in self._skip:
            return None
        return self._call_key(name, step._input)

    def before(self, step: ActiveStep) -> LoopDetected | None:
        """The error to raise instead of running the call, when the role's mode is ``raise``
        and this call already looped (the step is then marked as stopped)."""
        if not self._raise:
            return None
        key = self._key(step)
        step._guard_key = key
        state = self._calls.get(key) if key is not None else None
        if type(state) is not _CallState or state.finding is None:
            return None
        step._guard_key = BLOCKED
        finding = state.finding
        with _LOCK:
            finding["blocked_step_ids"].append(step.id)
            finding["action"] = "raised"
        return LoopDetected(finding["tool"], finding["args"], finding["count"], self.run.id)

    def after(self, step: ActiveStep) -> None:
        """Count the call's result; at the role's ``repeats``-th identical one, warn, call back
        and record the finding."""
        if self._raise:  # the key was computed before the call
            key = step._guard_key
            if key is None or key is BLOCKED:
                return
        else:  # self._key(step), written out: this runs for every step of a guarded run
            kind = step.kind
            if kind is not StepKind.TOOL and kind is not StepKind.RETRIEVAL:
                return
            name = step.name or str(kind)
            if name.lower() in self._skip:
                return
            key = self._call_key(name, step._input)
        calls = self._calls
        state = calls.setdefault(key, step)
        if state is step:  # the first call with these arguments in the run
            return
        if type(state) is _CallState and state.finding is not None:
            return  # looped already: warned once, and in mode raise its repeats are stopped
        with _LOCK:
            state = calls[key]
            if type(state) is not _CallState:
                state = calls[key] = _CallState(state)
            elif state.finding is not None:
                return
            result = self._same(state, step._output, step._error)
            if result is None:
                state.results.append(_Result(step._output, step._error, step.id))
                return
            result.step_ids.append(step.id)
            if len(result.step_ids) < self.role.repeats:
                return
            state.finding = finding = self._record(step, result)
        self._announce(finding)

    def _same(self, state: _CallState, output: Any, error: Any) -> _Result | None:
        """The result already seen that this one is the same observation as, if any: exactly
        equal first; normalised only when not."""
        results = state.results
        for result in results:
            if result.output == output and result.error == error:
                return result
        key = self.role.result_key(output, error)
        for result in results:
            if result.key is None:
                result.key = self.role.result_key(result.output, result.error)
            if result.key == key:
                return result
        return None

    def _record(self, step: ActiveStep, result: _Result) -> dict[str, Any]:
        finding: dict[str, Any] = {
            "failure_mode": "error_loop" if result.error is not None else "repeated_tool_call",
            "tool": step.name or str(step.kind),
            "args": step._input,
            "count": len(result.step_ids),
            "step_ids": list(result.step_ids),
            "mode": self.role.mode,
            "action": "warned",
            "blocked_step_ids": [],
        }
        if not self.run._closed:
            self.run.metadata.setdefault("loop_guard", []).append(finding)
        return finding

    def _announce(self, finding: dict[str, Any]) -> None:
        run = self.run
        then = "; its next identical call raises LoopDetected" if self.role.mode == "raise" else ""
        logger.warning(
            "agentlens: loop guard: %s returned the same result %d times for the same "
            "arguments in run %s%s",
            finding["tool"],
            finding["count"],
            run.id,
            then,
        )
        callback = self.guard.on_loop
        if callback is None:
            return
        event = LoopEvent(
            run_id=run.id,
            agent=run.agent,
            tool=finding["tool"],
            args=finding["args"],
            count=finding["count"],
            step_ids=tuple(finding["step_ids"]),
            mode=self.role.mode,
        )
        try:
            callback(event)
        except Exception as exc:  # the user's callback: never raise into the agent
            logger.warning("agentlens: loop guard: the on_loop callback failed: %s", exc)
