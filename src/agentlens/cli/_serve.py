"""``agentlens serve`` and ``agentlens keys create|list|revoke``."""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Annotated, cast

import typer

from agentlens.cli._app import app, fail, out_console, state
from agentlens.cli._util import command, command_store, json_line

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.store import ServerStore

__all__ = ["keys_app", "serve"]

keys_app = typer.Typer(
    name="keys", help="API keys: each belongs to one project.", no_args_is_help=True
)
app.add_typer(keys_app, name="keys")


def _seconds(value: float) -> float:
    """A positive, finite number of seconds (``nan`` and ``inf`` parse as floats)."""
    if not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"{value:g} is not a number of seconds greater than 0")
    return value


@command(app)
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 6660,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Store URL (default: the global --db, then AGENTLENS_DB...).",
                     metavar="URL"),
    ] = None,
    max_body: Annotated[
        int, typer.Option("--max-body", help="Largest request body in bytes, after gzip.", min=1)
    ] = 16 << 20,
    idle_timeout: Annotated[
        float,
        typer.Option("--idle-timeout", help="Seconds after which a trace whose root span never "
                     "arrived is stored as incomplete.", callback=_seconds),
    ] = 300.0,
    no_review: Annotated[
        bool, typer.Option("--no-review", help="Do not review runs as they arrive.")
    ] = False,
) -> None:  # fmt: skip
    """Receive traces over OTLP/HTTP and the JSON API; review every run that completes.

    SIGINT or SIGTERM, to the server or to its whole process group, stops it after the
    accepted writes (and stops its background process)."""
    from agentlens.config import load_settings
    from agentlens.server import serve as run_server

    url = load_settings(db=db).db if db is not None else state.settings().db
    if port < 0 or port > 65535:
        raise fail(f"--port {port}: not a port number")
    out_console.print(f"agentlens serving on http://{host}:{port} (store {url})", markup=False)
    run_server(
        host=host, port=port, db=url, max_body_bytes=max_body, idle_timeout_s=idle_timeout,
        review=not no_review,
    )  # fmt: skip


@command(keys_app, "create")
def keys_create(
    project: Annotated[str, typer.Option("--project", help="The project the key reads and writes.")],
    name: Annotated[str | None, typer.Option("--name", help="A note to recognise the key.")] = None,
) -> None:  # fmt: skip
    """Create a key; it is printed once, alone on the last line, and never shown again."""
    from agentlens.server._keys import create_key

    with command_store() as store:
        created = create_key(store, project, name)
    out_console.print(
        f"created key {created.id} for project {created.project}; "
        "store it now, it is not shown again:",
        markup=False,
    )
    sys.stdout.flush()
    sys.stdout.write(created.key + "\n")


@command(keys_app, "list")
def keys_list(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """List keys (ids and projects; never the keys themselves)."""
    from agentlens.server._keys import format_us

    with command_store() as store:
        records = cast("ServerStore", store).list_api_keys()
    for r in records:
        row = {
            "id": r.id,
            "project": r.project,
            "name": r.name,
            "created_at": format_us(r.created_at),
            "revoked_at": format_us(r.revoked_at),
        }
        if as_json:
            sys.stdout.write(json_line(row, ensure_ascii=True) + "\n")
        else:
            status = "revoked " + str(row["revoked_at"]) if r.revoked_at else "active"
            out_console.print(
                f"{r.id}  {r.project}  {status}  created {row['created_at']}"
                + (f"  {r.name}" if r.name else ""),
                markup=False,
            )
    if not records and not as_json:
        out_console.print("no keys", markup=False)


@command(keys_app, "revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="The key's id (or the key).")]) -> None:
    """Revoke a key: requests with it are refused (within a few seconds on a running server)."""
    from agentlens.server._keys import revoke_key

    with command_store() as store:
        done = revoke_key(store, key_id)
    if not done:
        raise fail(f"no active key with id {key_id!r}")
    out_console.print(f"revoked {key_id}", markup=False)
