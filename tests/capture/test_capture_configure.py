"""Configuration: no-op by default, AGENTLENS_DB, AGENTLENS_DISABLED, configure() arguments."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

import agentlens
from agentlens import config
from agentlens.capture import (
    InMemoryExporter,
    Processor,
    SimpleProcessor,
    StoreExporter,
    _state,
    is_enabled,
    reset,
    stats,
)
from agentlens.errors import ConfigError
from agentlens.store import _api, default_url, set_default_url


@agentlens.tool
def double(x: int) -> int:
    return 2 * x


def _export_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "agentlens-export" and t.is_alive())


def test_nothing_configured_is_a_no_op(fresh_capture: None) -> None:
    threads_before = _export_threads()
    with agentlens.run(agent="a", input="q") as run:
        assert double(2) == 4
        step = run.step("tool", "manual", output="x")
        run.output = "answer"
        assert agentlens.current_run() is run
    assert run.recording is False and is_enabled() is False
    assert run.steps == [] and step.output is None
    assert run.output == "answer" and run.status == "ok"
    assert agentlens.flush(1) is True
    assert stats() == agentlens.capture.CaptureStats()
    assert _export_threads() == threads_before


def test_agentlens_db_turns_capture_on(
    fresh_capture: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGENTLENS_DB", f"sqlite:///{tmp_path}/env.db")
    assert is_enabled() is True
    pipeline = _state.current()
    assert pipeline.processor is not None
    exporter = pipeline.processor.exporter
    assert isinstance(exporter, StoreExporter)
    assert exporter.url == f"sqlite:///{tmp_path}/env.db"


def test_agentlens_disabled_wins_over_agentlens_db(
    fresh_capture: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGENTLENS_DB", f"sqlite:///{tmp_path}/env.db")
    monkeypatch.setenv("AGENTLENS_DISABLED", "1")
    assert is_enabled() is False


def test_agentlens_disabled_wins_over_configure_but_not_over_enabled_true(
    fresh_capture: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTLENS_DISABLED", "true")
    agentlens.configure(exporter=InMemoryExporter())
    assert is_enabled() is False
    exporter = InMemoryExporter()
    agentlens.configure(exporter=exporter, enabled=True)
    with agentlens.run():
        double(1)
    agentlens.flush(10)
    assert len(exporter.traces) == 1


def test_configure_db_sets_the_configured_store_url(fresh_capture: None, tmp_path: Path) -> None:
    agentlens.configure(db=str(tmp_path / "bare.db"), project="billing")
    assert default_url() == f"sqlite:///{tmp_path}/bare.db"  # what get_trace() reads
    assert config.load_settings(use_file=False).db == "sqlite:///agentlens.db"  # no global
    with agentlens.run() as run:
        pass
    assert run.project == "billing"


def test_configure_without_db_uses_the_environment(
    fresh_capture: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGENTLENS_DB", f"sqlite:///{tmp_path}/env.db")
    agentlens.configure()
    processor = _state.current().processor
    assert processor is not None and isinstance(processor.exporter, StoreExporter)
    assert processor.exporter.url == f"sqlite:///{tmp_path}/env.db"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"db": "sqlite:///x.db", "exporter": InMemoryExporter()},
            "one of db, exporter, processor and endpoint",
        ),
        (
            {"exporter": InMemoryExporter(), "processor": SimpleProcessor(InMemoryExporter())},
            r"not \['exporter', 'processor'\]",
        ),
        ({"processor": InMemoryExporter()}, r"no on_end\(\) method"),
        ({"clock": 12}, "clock must be callable"),
        ({"id_generator": "run-1"}, "id_generator must be callable"),
        ({"max_queue": 0}, "max_queue"),
        ({"batch_size": -1}, "batch_size"),
        ({"flush_interval": 0}, "flush_interval"),
        ({"exporter": object()}, r"no export\(\) method"),
        ({"db": "mysql://host/db"}, "unknown store URL scheme 'mysql'"),
        ({"db": "sqlite://host/x.db"}, "has no host"),
        ({"db": "sqlite:///x.db?mode=ro"}, "query parameters"),
        ({"db": " "}, "empty"),
    ],
)
def test_configure_rejects_bad_arguments(
    fresh_capture: None, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        agentlens.configure(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [{"max_queue": 0}, {"batch_size": -1}, {"flush_interval": 0}, {"clock": 12},
     {"id_generator": "run-1"}],
)  # fmt: skip
def test_a_bad_argument_leaves_no_reviewer_and_no_store_behind(
    fresh_capture: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kwargs: dict
) -> None:
    # the default store is ./agentlens.db: a reviewer started before the check opened it
    monkeypatch.chdir(tmp_path)
    before = {t for t in threading.enumerate() if t.name == "agentlens-reviewer"}
    with pytest.raises(ConfigError):
        agentlens.configure(**kwargs)
    after = {t for t in threading.enumerate() if t.name == "agentlens-reviewer" and t.is_alive()}
    assert after <= before
    assert list(tmp_path.iterdir()) == []


def test_reconfiguring_exports_pending_runs_to_the_old_destination(fresh_capture: None) -> None:
    first, second = InMemoryExporter(), InMemoryExporter()
    agentlens.configure(exporter=first, flush_interval=60)
    with agentlens.run(agent="one"):
        double(1)
    agentlens.configure(exporter=second, flush_interval=60)
    with agentlens.run(agent="two"):
        double(2)
    agentlens.flush(10)
    assert [t.agent for t in first.traces] == ["one"]
    assert [t.agent for t in second.traces] == ["two"]


def test_configure_with_an_open_store(fresh_capture: None) -> None:
    class FakeStore:
        url = "fake://store"

        def __init__(self) -> None:
            self.written: list[str] = []

        def put_traces(self, traces: list[agentlens.Trace]) -> int:
            self.written.extend(t.id for t in traces)
            return len(traces)

    store = FakeStore()
    agentlens.configure(db=store, flush_interval=60)  # type: ignore[arg-type]
    with agentlens.run(run_id="r1"):
        pass
    agentlens.flush(10)
    assert store.written == ["r1"]
    assert stats().exported == 1


def test_runs_left_at_exit_are_exported_by_the_atexit_hook(tmp_path: Path) -> None:
    out = tmp_path / "exported.txt"
    script = f"""
import agentlens
from agentlens.capture import Exporter, ExportResult

class FileExporter(Exporter):
    def export(self, traces):
        with open({str(out)!r}, "a") as f:
            for t in traces:
                f.write(t.id + " " + t.status + "\\n")
        return ExportResult.success(len(traces))

agentlens.configure(exporter=FileExporter(), flush_interval=3600)
for i in range(3):
    with agentlens.run(run_id=f"r{{i}}") as run:
        run.output = i
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert out.read_text().split("\n") == ["r0 ok", "r1 ok", "r2 ok", ""]


def test_importing_capture_is_light() -> None:
    code = (
        "import sys, agentlens.capture, agentlens.testing; "
        "print([m for m in ('sqlite3', 'httpx', 'agentlens.store._sqlite', 'opentelemetry')"
        " if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_configure_enabled_false_is_a_no_op_and_leaves_the_store_url(fresh_capture: None) -> None:
    set_default_url(None)
    agentlens.configure(enabled=False)
    assert is_enabled() is False
    assert _api._default is None
    with agentlens.run() as run:
        assert double(3) == 6
    assert run.steps == []


def test_the_public_test_hooks_processor_clock_and_ids(fresh_capture: None) -> None:
    ticks = iter(range(1_000_000, 10_000_000, 1_000))
    ids = iter(["first", "second"])
    ended: list[str] = []

    class Recording(Processor):
        def on_end(self, run: agentlens.capture.Run) -> None:
            ended.append(run.to_trace().id)

    agentlens.configure(
        processor=Recording(), clock=lambda: next(ticks), id_generator=lambda: next(ids)
    )
    with agentlens.run() as run:
        double(1)
    assert ended == ["first"]  # on_end ran as the block ended, with the run's final state
    trace = run.to_trace()
    assert (trace.started_at, trace.steps[0].started_at, trace.ended_at) == (
        agentlens.model.from_epoch_us(1_000),
        agentlens.model.from_epoch_us(1_001),
        agentlens.model.from_epoch_us(1_003),
    )
    with agentlens.run(run_id="given"):
        pass
    with agentlens.run():
        pass
    assert ended == ["first", "given", "second"]
    assert stats() == agentlens.capture.CaptureStats()  # a processor that keeps no counters


def test_a_run_keeps_the_configuration_it_started_with(fresh_capture: None) -> None:
    old, new = InMemoryExporter(), InMemoryExporter()
    agentlens.configure(processor=SimpleProcessor(old), id_generator=lambda: "old-id")
    with agentlens.run() as run:
        agentlens.configure(processor=SimpleProcessor(new), id_generator=lambda: "new-id")
        double(2)
    # the old processor was shut down by the second configure(): the run is dropped, counted
    assert old.traces == [] and new.traces == [] and run.id == "old-id"


def test_reset_returns_to_the_unconfigured_state(
    fresh_capture: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    exporter = InMemoryExporter()
    agentlens.configure(exporter=exporter, flush_interval=60)
    with agentlens.run(run_id="queued"):
        pass
    reset()
    assert [t.id for t in exporter.traces] == ["queued"]  # what was queued went out first
    assert stats() == agentlens.capture.CaptureStats()
    assert _api._default is None
    monkeypatch.setenv("AGENTLENS_DB", f"sqlite:///{tmp_path}/after-reset.db")
    assert is_enabled() is True  # the environment is read again


def test_configure_accepts_exactly_the_schemes_the_store_accepts(fresh_capture: None) -> None:
    from agentlens.config import STORE_SCHEMES
    from agentlens.store import open_store

    for scheme in STORE_SCHEMES:
        url = f"{scheme}:///:memory:" if scheme == "sqlite" else f"{scheme}://u:pw@127.0.0.1:9/db"
        agentlens.configure(db=url, enabled=False)  # no error: the scheme is the store's
        try:
            open_store(url).close()
        except ConfigError as exc:  # the store may say its backend is unavailable, not unknown
            assert "unknown store URL scheme" not in str(exc)
        except Exception:  # a driver or connection error: the store's to report
            pass
