"""Scorers as registered factories (issue 11 item 1) and judge options checked before scoring,
with everything that changes a verdict in the stored version (issue 12 item 12)."""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest

from agentlens.config import Settings, load_settings
from agentlens.errors import ConfigError, ScorerError
from agentlens.eval import (
    ENTRY_POINT_GROUP,
    ScoreResult,
    ScorerFactory,
    _registry,
    check_settings,
    excessive_steps,
    get_factory,
    get_scorer,
    registered_scorers,
    resolve_scorer,
    run_scorers,
    scorer,
)
from agentlens.model import Step, StepKind, Trace

SRC = Path(__file__).parents[2] / "src" / "agentlens"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _file(tmp_path: Path, text: str) -> Settings:
    (tmp_path / "agentlens.toml").write_text(textwrap.dedent(text), encoding="utf-8")
    return load_settings()


def _trace(agent: str | None = None) -> Trace:
    steps = [Step(id=f"s{i}", kind=StepKind.TOOL, name="t", output=i) for i in range(3)]
    return Trace(id="r1", agent=agent, steps=steps, output="done")


# --------------------------------------------------------------------------- versions


def test_an_option_at_its_default_is_the_same_version_written_out_or_left_out(
    tmp_path: Path,
) -> None:
    written = _file(tmp_path, "[scorers.excessive_steps]\nmax_steps = 15\n")
    left_out = Settings()
    for settings in (written, left_out):
        assert resolve_scorer("excessive_steps", None, settings).stored_version == "2"
    assert excessive_steps(max_steps=15).stored_version == "2"
    changed = _file(tmp_path, "[scorers.excessive_steps]\nmax_steps = 16\n")
    assert resolve_scorer("excessive_steps", None, changed).stored_version.startswith("2+")
    # a list written as the default, in another spelling, is the default too
    kinds = _file(tmp_path, '[scorers.no_progress]\nkinds = ["tool", "retrieval"]\n')
    assert resolve_scorer("no_progress", None, kinds).stored_version == "2"


def test_stored_versions_of_changed_options_are_those_of_before() -> None:
    # The hash of options that differ from the defaults is what it was: history stays valid.
    # (the values the previous implementation stored for these options)
    # (excessive_steps is at version 2 since issue 18; the hash of max_steps=30 is unchanged)
    assert excessive_steps(max_steps=30).stored_version == "2+0c75f5fa"
    refs = get_scorer("no_fabricated_refs").with_options(patterns=["CUST-\\d{5}"])
    assert refs.stored_version == "4+e9cdc0a0"
    # (the judged scorers name their judge's rules before the hash since the judge's
    # prompt_version is part of the version: the hash of their options is unchanged)
    synthesis = get_scorer("faithful_synthesis")
    assert synthesis.with_options(mode="strict").stored_version == "1+offline-6+425a1c54"
    strict = synthesis.with_options(judge="offline", mode="strict")
    assert strict.stored_version == "1+offline-6+425a1c54"
    assert synthesis.with_options(judge="openai", model="m1").stored_version == "1+llm-1+e2fbda8a"
    leakage = get_scorer("parametric_leakage").with_options(judge="offline")
    assert leakage.stored_version == "5+offline-6+fdc99cbe"


def test_a_stored_version_is_hashed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch asks every scorer's stored version for each run and each score: the hash of its
    options is computed once per scorer, and a scorer with other options has its own."""
    import hashlib

    from agentlens.eval import _scorer

    hashed: list[bytes] = []
    plain = hashlib.sha256

    def counted(data: bytes = b"") -> object:
        hashed.append(data)
        return plain(data)

    monkeypatch.setattr(_scorer.hashlib, "sha256", counted)
    budget = excessive_steps(max_steps=30)
    assert [budget.stored_version for _ in range(3)] == ["2+0c75f5fa"] * 3
    assert budget.with_options(max_steps=31).stored_version not in ("2", "2+0c75f5fa")
    assert len(hashed) == 2


def test_the_judges_mode_from_settings_is_part_of_the_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = resolve_scorer("faithful_synthesis", None, Settings()).stored_version
    assert plain == "1+offline-6"
    balanced = _file(tmp_path, '[judge]\nmode = "balanced"\n')
    assert resolve_scorer("faithful_synthesis", None, balanced).stored_version == plain
    strict = _file(tmp_path, '[judge]\nmode = "strict"\n')
    from_file = resolve_scorer("faithful_synthesis", None, strict).stored_version
    assert from_file != plain
    (tmp_path / "agentlens.toml").unlink()
    monkeypatch.setenv("AGENTLENS_JUDGE_MODE", "strict")
    assert resolve_scorer("faithful_synthesis", None, load_settings()).stored_version == from_file
    monkeypatch.setenv("AGENTLENS_JUDGE_MODE", "lenient")
    assert resolve_scorer("faithful_synthesis", None, load_settings()).stored_version not in (
        plain,
        from_file,
    )


def test_the_judges_backend_and_model_are_part_of_the_version(tmp_path: Path) -> None:
    one = _file(tmp_path, '[judge]\nbackend = "openai"\nmodel = "m1"\n')
    two = _file(tmp_path, '[judge]\nbackend = "openai"\nmodel = "m2"\n')
    v1 = resolve_scorer("faithful_synthesis", None, one).stored_version
    v2 = resolve_scorer("faithful_synthesis", None, two).stored_version
    assert "1" not in (v1, v2) and v1 != v2
    # the same judge given as options in code is the same version as from the settings
    coded = get_scorer("faithful_synthesis").with_options(judge="openai", model="m1")
    assert coded.stored_version == v1


def test_parametric_leakage_uses_the_judge_table_for_its_judged_half(tmp_path: Path) -> None:
    settings = _file(
        tmp_path,
        """
        [judge]
        model = "gpt-test"
        [scorers.parametric_leakage]
        judge = "openai"
        """,
    )
    bound = resolve_scorer("parametric_leakage", None, settings)  # no "needs a model" error
    assert bound.version_options == {"judge": "openai", "model": "gpt-test"}
    # without the judge option the [judge] table does not switch its judged half on
    only_table = _file(tmp_path, '[judge]\nbackend = "openai"\nmodel = "gpt-test"\n')
    assert resolve_scorer("parametric_leakage", None, only_table).stored_version == "5"
    missing = _file(tmp_path, '[scorers.parametric_leakage]\njudge = "anthropic"\n')
    with pytest.raises(
        ConfigError, match=r"agentlens.toml: scorers.parametric_leakage.judge: .*needs a model"
    ):
        resolve_scorer("parametric_leakage", None, missing)


def test_a_model_without_a_judge_does_not_change_parametric_leakage() -> None:
    assert get_scorer("parametric_leakage").with_options(model="m").stored_version == "5"


# --------------------------------------------------------------------------- checked when loaded


@pytest.mark.parametrize(
    ("table", "key", "message"),
    [
        ('[scorers.repeated_tool_calls]\nmax_repeats = "three"', "scorers.repeated_tool_calls.max_repeats", "must be an integer"),
        ("[scorers.no_fabricated_refs]\npatterns = ['(']", "scorers.no_fabricated_refs.patterns", "bad reference pattern"),
        ("[agents.support.scorers.excessive_steps]\nmax_steps = -1", "agents.support.scorers.excessive_steps.max_steps", ">= 0"),
        ("[scorers.no_progress]\nmin_strech = 3", "scorers.no_progress.min_strech", "has no option 'min_strech'"),
        ('[scorers.faithful_synthesis]\njudge = "nope"', "scorers.faithful_synthesis.judge", "unknown judge backend 'nope'"),
        ("[scorers.nope]\nx = 1", "scorers.nope", "unknown scorer 'nope'"),
    ],
)  # fmt: skip
def test_a_bad_option_in_the_file_names_the_file_and_the_key(
    tmp_path: Path, table: str, key: str, message: str
) -> None:
    settings = _file(tmp_path, table + "\n")
    with pytest.raises(ConfigError) as info:
        check_settings(settings)
    text = str(info.value)
    assert f"agentlens.toml: {key}" in text and message in text, text


def test_a_bad_option_stops_scoring_before_any_run_is_scored(tmp_path: Path) -> None:
    from agentlens.eval._runner import score_runs
    from agentlens.store import open_store

    settings = _file(tmp_path, "[agents.late.scorers.excessive_steps]\nmax_steps = 'x'\n")
    with open_store("sqlite:///:memory:") as store:  # type: ignore[attr-defined]
        store.put_traces([_trace(None), _trace("late").model_copy(update={"id": "r2"})])
        with pytest.raises(ConfigError, match=r"agents.late.scorers.excessive_steps.max_steps"):
            score_runs(store, ["excessive_steps"], settings=settings)
        assert store.get_scores("r1") == []  # not even the other role's run was scored
    with pytest.raises(ConfigError, match="max_steps"):
        run_scorers(["excessive_steps"], trace=_trace("late"), settings=settings)


def test_a_scorer_base_url_from_the_file_needs_the_opt_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _file(
        tmp_path,
        '[scorers.faithful_synthesis]\njudge = "openai"\nmodel = "m"\nbase_url = "https://evil.example/v1"\n',
    )
    with pytest.raises(
        ConfigError, match=r"scorers.faithful_synthesis.base_url: .*ALLOW_FILE_BASE_URL"
    ):
        resolve_scorer("faithful_synthesis", None, settings)
    monkeypatch.setenv("AGENTLENS_JUDGE_ALLOW_FILE_BASE_URL", "1")
    bound = resolve_scorer("faithful_synthesis", None, load_settings())
    assert bound.name == "faithful_synthesis"


# --------------------------------------------------------------------------- factories


def test_a_factory_with_keyword_only_typed_options() -> None:
    @scorer(name="t_max_calls", version="3")
    def max_calls(*, limit: int = 10, tools: list[str] | None = None):  # type: ignore[no-untyped-def]
        if limit < 1:
            raise ConfigError("limit must be at least 1")

        def score(*, trace: Trace) -> ScoreResult:
            n = sum(1 for s in trace.steps if tools is None or s.name in tools)
            return ScoreResult(passed=n <= limit, value=n)

        return score

    assert isinstance(max_calls, ScorerFactory) and get_factory("t_max_calls") is max_calls
    assert max_calls().stored_version == "3" and max_calls(limit=10).stored_version == "3"
    assert max_calls(limit=2).score(_trace()).passed is False
    with pytest.raises(ConfigError, match="'limit' must be an integer, got 'two'"):
        max_calls(limit="two")
    with pytest.raises(ConfigError, match="'tools' must be a list of strings or none"):
        max_calls(tools=[1])
    with pytest.raises(ConfigError, match="at least 1"):
        get_scorer("t_max_calls").with_options(limit=0)
    with pytest.raises(ScorerError, match="has no option 'limt'; its options are limit, tools"):
        max_calls(limt=1)


def test_factory_options_must_be_keyword_only() -> None:
    with pytest.raises(ScorerError, match="keyword-only"):

        @scorer(name="t_positional")
        def bad(limit: int = 3):  # type: ignore[no-untyped-def]
            return lambda *, trace: True


def test_the_builtins_are_listed_explicitly_without_an_import_cycle() -> None:
    assert set(_registry.BUILTINS) == {
        "no_fabricated_refs",
        "parametric_leakage",
        "faithful_synthesis",
        "repeated_tool_calls",
        "excessive_steps",
        "no_progress",
    }
    tree = ast.parse((SRC / "eval" / "_scorer.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert not any(
        m.startswith(("agentlens.eval.detectors", "agentlens.eval._registry")) for m in imported
    )
    for name in _registry.BUILTINS:
        assert get_scorer(name).factory is _registry.BUILTINS[name]


def test_an_entry_point_adds_a_third_party_scorer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "site"
    (pkg / "thirdparty_scorers").mkdir(parents=True)
    (pkg / "thirdparty_scorers" / "__init__.py").write_text(
        textwrap.dedent(
            """
            from agentlens.eval import ScoreResult, scorer

            @scorer(name="tp_has_output", version="7", register=False)
            def tp_has_output(*, min_chars: int = 1):
                def score(*, trace):
                    return ScoreResult(passed=len(str(trace.output or "")) >= min_chars)
                return score

            def broken():
                raise RuntimeError("nope")
            """
        )
    )
    info = pkg / "thirdparty_scorers-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: thirdparty-scorers\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\ntp_has_output = thirdparty_scorers:tp_has_output\n"
        "tp_broken = thirdparty_scorers:missing_name\n"
    )
    monkeypatch.syspath_prepend(str(pkg))
    _registry.reload_entry_points()
    try:
        found = get_scorer("tp_has_output")
        assert found.version == "7" and "tp_has_output" in registered_scorers()
        assert found.with_options(min_chars=100).score(_trace()).passed is False
        settings = _file(tmp_path, "[scorers.tp_has_output]\nmin_chars = 'x'\n")
        with pytest.raises(ConfigError, match=r"scorers.tp_has_output.min_chars"):
            check_settings(settings)
        with pytest.raises(ScorerError, match=r"tp_broken.*failed to load.*missing_name"):
            get_scorer("tp_broken")
    finally:
        sys.modules.pop("thirdparty_scorers", None)
        _registry.reload_entry_points()
