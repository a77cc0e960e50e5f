"""The scorer registry: the built-ins listed explicitly, scorers defined in code, and scorers of
other packages found through the ``agentlens.scorers`` entry-point group.

A name is looked up in that order of precedence: a scorer defined in code (``@scorer``,
``define_scorer``) replaces a built-in of the same name; then the built-ins; then the entry
points. A third-party package adds a scorer by declaring, in its ``pyproject.toml``::

    [project.entry-points."agentlens.scorers"]
    my_check = "my_package.scorers:my_check"     # a @scorer factory, a Scorer, or a function

Also here: :func:`resolve_scorer` (a scorer with an agent role's options from the settings
bound through its factory) and :func:`check_settings` (every configured option checked when the
configuration is loaded, with errors naming the file and the key).
"""

from __future__ import annotations

import importlib.metadata
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from agentlens.config import AgentSettings, Settings
from agentlens.errors import AgentlensError, ConfigError, ScorerError
from agentlens.eval._scorer import _DEFINED, Scorer, ScorerFactory, define_scorer
from agentlens.eval.detectors import (
    excessive_steps,
    faithful_synthesis,
    no_fabricated_refs,
    no_progress,
    parametric_leakage,
    repeated_tool_calls,
)

__all__ = [
    "BUILTINS",
    "ENTRY_POINT_GROUP",
    "check_settings",
    "get_factory",
    "get_scorer",
    "registered_scorers",
    "resolve_scorer",
]

logger = logging.getLogger("agentlens")

BUILTINS: Mapping[str, ScorerFactory] = {
    f.name: f
    for f in (
        no_fabricated_refs,
        parametric_leakage,
        faithful_synthesis,
        repeated_tool_calls,
        excessive_steps,
        no_progress,
    )
}
"""The built-in scorers (names are public interface)."""

ENTRY_POINT_GROUP = "agentlens.scorers"
"""The entry-point group other packages add scorers to."""

_plugins: dict[str, ScorerFactory] | None = None
_plugin_errors: dict[str, str] = {}
_lock = threading.Lock()


def _as_factory(name: str, obj: Any) -> ScorerFactory:
    if isinstance(obj, ScorerFactory):
        return obj
    if isinstance(obj, Scorer):
        if obj.factory is None:
            raise ScorerError(f"entry point {name!r}: the scorer has no factory")
        return obj.factory
    if callable(obj):
        fac = define_scorer(name, obj, register=False).factory
        assert fac is not None
        return fac
    raise ScorerError(f"entry point {name!r} is a {type(obj).__name__}, not a scorer")


def _entry_points() -> dict[str, ScorerFactory]:
    """The scorers of the ``agentlens.scorers`` entry points, loaded once per process. One that
    fails to load is left out (and named when asked for by name)."""
    global _plugins
    with _lock:
        if _plugins is not None:
            return _plugins
        found: dict[str, ScorerFactory] = {}
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                found[ep.name] = _as_factory(ep.name, ep.load())
            except Exception as exc:
                _plugin_errors[ep.name] = f"{ep.value}: {type(exc).__name__}: {exc}"
                logger.warning("agentlens: scorer entry point %r failed to load: %s", ep.name, exc)
        _plugins = found
        return found


def reload_entry_points() -> None:
    """Forget the loaded entry points (they are read again on next use)."""
    global _plugins
    with _lock:
        _plugins = None
        _plugin_errors.clear()


def get_factory(name: str) -> ScorerFactory:
    """The factory of scorer ``name``.

    Raises:
        ScorerError: no scorer has that name (the message lists the known ones).
    """
    found = _DEFINED.get(name) or BUILTINS.get(name)
    if found is not None:
        return found
    plugins = _entry_points()
    if name in plugins:
        return plugins[name]
    if name in _plugin_errors:
        raise ScorerError(
            f"scorer {name!r} failed to load from its entry point: {_plugin_errors[name]}"
        )
    known = ", ".join(sorted({*BUILTINS, *_DEFINED, *plugins}))
    raise ScorerError(f"unknown scorer {name!r}; known scorers: {known}")


def get_scorer(name: str) -> Scorer:
    """The scorer called ``name``, its options at their defaults.

    Raises:
        ScorerError: no scorer has that name (the message lists the known ones).
    """
    return get_factory(name).default


def registered_scorers() -> dict[str, Scorer]:
    """Every scorer by name: built-ins, those defined in code, and the entry points'."""
    factories = {**_entry_points(), **BUILTINS, **_DEFINED}
    return {name: factories[name].default for name in sorted(factories)}


def resolve_scorer(name_or_scorer: str | Scorer, agent: str | None, settings: Settings) -> Scorer:
    """The scorer with the options configured for ``agent`` bound through its factory; options
    already bound in code win over the file's.

    Raises:
        ScorerError: an unknown scorer or option.
        ConfigError: a bad option value (naming the file and key when it came from a file).
    """
    base = get_scorer(name_or_scorer) if isinstance(name_or_scorer, str) else name_or_scorer
    role = settings.for_agent(agent)
    file_options = role.scorer_options(base.name)
    if base.factory is None or (not file_options and not base.takes_settings):
        return base
    return _bind(base.factory, file_options, dict(base.options), role, settings)


def _bind(
    factory: ScorerFactory,
    file_options: Mapping[str, Any],
    code_options: Mapping[str, Any],
    role: AgentSettings,
    settings: Settings,
) -> Scorer:
    if "base_url" in file_options and "base_url" not in code_options:
        _check_file_base_url(factory.name, role, settings)
    merged = {**file_options, **code_options}
    try:
        return factory.bind(merged, settings)
    except (ConfigError, ScorerError) as exc:
        if not file_options or settings.source is None:
            raise
        raise _from_file(factory, exc, file_options, code_options, role, settings) from None


def _from_file(
    factory: ScorerFactory,
    exc: AgentlensError,
    file_options: Mapping[str, Any],
    code_options: Mapping[str, Any],
    role: AgentSettings,
    settings: Settings,
) -> ConfigError:
    """The error of a bad option from the file, naming the file and the key: the option that
    fails on its own (each is tried alone over the code's options)."""
    for key, value in file_options.items():
        if key in code_options:
            continue
        try:
            factory.bind({**code_options, key: value}, settings)
        except (ConfigError, ScorerError) as alone:
            return ConfigError(f"{role.option_key(factory.name, key)}: {alone}")
    return ConfigError(f"{settings.source}: scorers.{factory.name}: {exc}")


def _check_file_base_url(name: str, role: AgentSettings, settings: Settings) -> None:
    if settings.judge_allow_file_base_url:
        return
    raise ConfigError(
        f"{role.option_key(name, 'base_url')}: a judge endpoint set in a configuration file is "
        "used only with AGENTLENS_JUDGE_ALLOW_FILE_BASE_URL=1"
    )


def check_settings(settings: Settings, names: Iterable[str] | None = None) -> None:
    """Check every scorer option the settings configure (for every agent role) through the
    scorers' factories, and the judge configuration of the scorers that use one, before anything
    is scored.

    Args:
        settings: the loaded settings.
        names: also check these scorers (e.g. the ones a command will run), configured or not.

    Raises:
        ConfigError: a bad option or an unknown scorer in the file (naming the file and key).
        ScorerError: an unknown scorer in ``names``.
    """
    roles = [settings.default, *settings.agents.values()]
    configured: dict[str, AgentSettings] = {}
    for role in roles:
        for scorer_name in role.scorers:
            configured.setdefault(scorer_name, role)
    for scorer_name, role in configured.items():
        try:
            get_factory(scorer_name)
        except ScorerError as exc:
            where = role.option_key(scorer_name)
            raise ConfigError(f"{where}: {exc}") from None
    wanted = list(dict.fromkeys([*(names or ()), *configured]))
    for scorer_name in wanted:
        base = get_scorer(scorer_name)
        resolve_scorer(base, None, settings)
        for role_name in settings.agents:
            resolve_scorer(base, role_name, settings)
