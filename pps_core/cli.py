"""The ``pps`` command: init, plugins, health, token, call <operation>, serve <transport>.

Operation commands are generated from the catalog (``pps call <name> '<json>'``), never hand-written.
Heavy plugin libraries load only when an entity is opened, so ``pps --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import PPSError

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from .memory import Memory
    from .settings import EntitySettings

#: A ``pps`` subcommand: parsed arguments in, exit code out.
Handler = Callable[[argparse.Namespace], int]


def _entity_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--entity", "-e", metavar="NAME", help="entity name (default: $PPS_ENTITY or 'default')")
    p.add_argument("--home", metavar="DIR", help="entity home directory (default: ~/.pps/<entity>, or $PPS_HOME)")


class CommandRegistry:
    """What ``pps_register_commands`` receives: plugins add ``pps`` subcommands through it."""

    def __init__(self, sub: argparse._SubParsersAction[argparse.ArgumentParser],
                 handlers: dict[str, Handler], *, prefix: str = "") -> None:
        self._sub = sub
        self._handlers = handlers
        self._prefix = prefix
        self._groups: dict[str, CommandRegistry] = {}

    def add(self, name: str, handler: Handler, *, help: str) -> argparse.ArgumentParser:
        """A new subcommand ``pps <name>``; returns its parser. ``handler(args) -> int`` runs it."""
        if name in self._handlers:
            raise ValueError(f"two plugins add a `pps {self._prefix}{name}` command")
        self._handlers[name] = handler
        return self._sub.add_parser(name, help=help)

    def group(self, name: str, *, help: str, metavar: str = "KIND") -> CommandRegistry:
        """A command several plugins share, each adding its own kind: ``cli.group("import", help=...)
        .add("chatgpt", handler, help=...)`` makes ``pps import chatgpt``. The first plugin's ``help`` names the
        group; two plugins adding the same kind is an error."""
        found = self._groups.get(name)
        if found is not None:
            return found
        if name in self._handlers:
            raise ValueError(f"two plugins add a `pps {self._prefix}{name}` command")
        parser = self._sub.add_parser(name, help=help)
        # `pps import --entity lyra claude-code FILE` (the options before the kind) works as it did before
        # `import` was a group: kept apart here, they fill the kind's own options when it leaves them unset.
        parser.add_argument("--entity", "-e", dest="_group_entity", metavar="NAME",
                            help="entity name (also after the kind)")
        parser.add_argument("--home", dest="_group_home", metavar="DIR", help="entity home directory (also after the kind)")
        dest = f"_pps_{name}_kind"
        handlers: dict[str, Handler] = {}
        group = CommandRegistry(parser.add_subparsers(dest=dest, metavar=metavar, required=True), handlers,
                                prefix=f"{self._prefix}{name} ")

        def run(args: argparse.Namespace) -> int:
            for option in ("entity", "home"):
                given = getattr(args, f"_group_{option}", None)
                if given is not None and getattr(args, option, None) is None:
                    setattr(args, option, given)
            return handlers[getattr(args, dest)](args)

        self._handlers[name] = run
        self._groups[name] = group
        return group

    @staticmethod
    def entity_args(parser: argparse.ArgumentParser) -> None:
        """Add the ``--entity``/``--home`` options every entity command takes."""
        _entity_args(parser)


def _plugin_commands(registry: CommandRegistry) -> None:
    """Commands of every installed plugin; one that cannot be imported is reported, not fatal."""
    import pluggy

    from . import hookspecs
    from .plugins import load_installed, register_builtins

    pm = pluggy.PluginManager("pps")
    pm.add_hookspecs(hookspecs)
    pm.hook.pps_addhooks.call_historic(kwargs={"pluginmanager": pm})
    register_builtins(pm)
    for name, error in load_installed(pm):
        print(f"pps: warning: plugin {name!r} could not be imported: {error}", file=sys.stderr)
    pm.hook.pps_register_commands(cli=registry)


def build_parser(plugin_commands: bool = True) -> argparse.ArgumentParser:
    """The ``pps`` parser; ``plugin_commands=False`` leaves out the commands plugins add (importing every
    installed plugin), for a built-in command or ``--version``."""
    parser = argparse.ArgumentParser(prog="pps", description="Pattern Persistence System: memory for AI entities.")
    parser.add_argument("--version", action="version", version="pps " + _version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("init", help="create an entity: home, pps.toml, token")
    _entity_args(p)
    p.add_argument("--plugins", help="comma-separated plugin names (default: the embedded defaults)")
    p.add_argument("--timezone", help="IANA zone, e.g. America/Chicago")
    p.add_argument("--force", action="store_true", help="rewrite pps.toml if it exists")

    p = sub.add_parser("plugins", help="list installed plugins and what the entity loads")
    _entity_args(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("health", help="health of every layer of the entity (text; --json for the data)")
    _entity_args(p)
    p.add_argument("--json", action="store_true", help="the whole answer as JSON")
    p.add_argument("--local", action="store_true", help="open the stores here even if a server runs")

    p = sub.add_parser("token", help="print the entity's bearer token")
    _entity_args(p)

    p = sub.add_parser("operations", help="list the entity's operations, or how to call one: pps operations NAME")
    _entity_args(p)
    p.add_argument("name", nargs="?", help="an operation: its parameters (type, default, limits, example)")
    p.add_argument("--json", action="store_true", help="as JSON (with each operation's input schema)")

    p = sub.add_parser("call", help="run an operation: pps call <operation> '<json params>'", add_help=False,
                       description="Run one operation of the entity. `pps call OPERATION --help` shows its "
                                   "parameters; `pps operations` lists the operations.")
    p.add_argument("-h", "--help", action="store_true", help="show this help, or the operation's parameters")
    _entity_args(p)
    p.add_argument("operation", nargs="?")
    p.add_argument("params", nargs="?", default="{}", help="JSON object (or '-' to read stdin)")
    p.add_argument("--text", action="store_true",
                   help="print the answer as text: its 'text' field (ambient_recall), else a readable listing")
    p.add_argument("--local", action="store_true", help="open the stores here even if a server runs")
    p.set_defaults(_pps_call_parser=p)

    p = sub.add_parser("serve", help="serve the entity over a transport plugin (mcp, http)")
    p.add_argument("transport", nargs="?", help="transport name, e.g. mcp or http")
    _entity_args(p)
    p.add_argument("args", nargs=argparse.REMAINDER, help="transport options (see pps serve <name> --help)")
    handlers: dict[str, Handler] = dict(COMMANDS)
    if plugin_commands:
        _plugin_commands(CommandRegistry(sub, handlers))
    parser.set_defaults(_pps_handlers=handlers)
    return parser


def _version() -> str:
    from . import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the command line (the console script, `python -m pps_core.cli`), not a caller in-process
        from .safepath import keep_cwd_off_path

        keep_cwd_off_path()
    given = sys.argv[1:] if argv is None else argv
    command = next((a for a in given if not a.startswith("-")), None)
    # A kernel command (or --version) needs no plugin's commands: no plugin manager of every installed plugin is
    # built for it (`pps serve` then starts with one, the entity's).
    parser = build_parser(plugin_commands=command not in COMMANDS and given[:1] not in (["--version"], ["-V"]))
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    handler: Handler = args._pps_handlers[args.command]
    try:
        return handler(args)
    except PPSError as exc:
        print(f"pps: error: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `pps call ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _settings(args: argparse.Namespace) -> EntitySettings:
    from .settings import load_settings

    return load_settings(args.entity, args.home, must_exist=True)


def _memory(args: argparse.Namespace, own: bool = True) -> Memory:
    from .memory import Memory

    return Memory(_settings(args), own=own)


def _private_dirs(path: Path) -> None:
    """Create ``path`` and every missing folder above it (the PPS root too) 0700: ``mkdir -p`` would give
    the folders above the umask's mode (0755), listing every entity's name to other users."""
    missing = []
    for folder in [path, *path.parents]:
        if folder.exists():
            break
        missing.append(folder)
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)


def _init_hints(plugins: list[str]) -> list[str]:
    """The chosen plugins' commented settings examples (``pps_init_hints``), each block after a blank line; a
    line that is not a comment is made one, so the file loads as written."""
    from .plugins import build_plugin_manager

    lines: list[str] = []
    for block in build_plugin_manager(plugins).hook.pps_init_hints():
        if block:
            lines += [""] + [ln if ln.lstrip().startswith("#") else f"# {ln}" for ln in map(str, block)]
    return lines


def cmd_init(args: argparse.Namespace) -> int:
    from . import auth
    from .plugins import default_plugins
    from .settings import entity_home

    home = entity_home(args.entity, args.home)
    toml = home / "pps.toml"
    name = args.entity or os.environ.get("PPS_ENTITY") or home.name
    if not toml.exists() and not (args.home or os.environ.get("PPS_HOME")):
        from .errors import Conflict
        from .settings import pps_root

        twins = [p.parent.name for p in pps_root().glob("*/pps.toml")
                 if p.parent.name.lower() == home.name.lower() and p.parent.name != home.name]
        if twins:  # one folder on a case-insensitive file system (macOS): never two entities
            raise Conflict(f"entity {twins[0]!r} exists; {home.name!r} differs only in case (one folder on a "
                           f"case-insensitive file system): use --entity {twins[0]} or another name")
    if toml.exists() and not args.force:
        print(f"{toml} exists (use --force to rewrite)")
    else:
        from .settings import validate_values

        plugins = args.plugins.split(",") if args.plugins else default_plugins()
        values = {"entity": name, "plugins": plugins, "timezone": args.timezone}
        values = {k: v for k, v in values.items() if v is not None}
        validate_values(values, home)  # a typo is refused before anything is written
        lines = [f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in values.items()]
        lines += _init_hints(plugins) + [""]
        from .atomic import atomic_write

        _private_dirs(home)
        atomic_write(toml, "\n".join(lines))
        print(f"wrote {toml}")
    _private_dirs(home)
    os.chmod(home, 0o700)
    auth.ensure_token(home)
    settings = _settings(args)  # validates what was written
    print(f"entity {settings.entity!r} at {home} (plugins: {', '.join(settings.plugins)})")
    return 0


def cmd_plugins(args: argparse.Namespace) -> int:
    from .plugins import build_plugin_manager, describe, installed_plugins
    from .settings import entity_home

    chosen = args.entity or args.home or os.environ.get("PPS_ENTITY") or os.environ.get("PPS_HOME")
    if not chosen and not (entity_home() / "pps.toml").exists():
        return _print_installed(args.json)  # a fresh install: what is there, before any `pps init`
    settings = _settings(args)
    pm = build_plugin_manager(settings.plugins)
    loaded = describe(pm)
    if args.json:
        print(json.dumps({"installed": installed_plugins(), "loaded": loaded}, indent=2))
        return 0
    print(f"entity {settings.entity!r} loads:")
    for p in loaded:
        print(f"  {p['name']:<12} {p['distribution'] or '-'} {p['version'] or ''}  hooks: {', '.join(p['hooks'])}")
    others = sorted(set(installed_plugins()) - {p["name"] for p in loaded})
    if others:
        print("installed, not loaded: " + ", ".join(others))
    return 0


def _print_installed(as_json: bool) -> int:
    """Installed plugins with their distributions and versions, read from metadata (nothing imported)."""
    from importlib.metadata import entry_points

    eps = entry_points(group="pps.plugins")
    found = sorted((ep.name, ep.dist.name if ep.dist else None, ep.dist.version if ep.dist else None)
                   for ep in eps)
    if as_json:  # the keys of the entity's listing, plus each plugin's distribution and version
        print(json.dumps({"installed": {ep.name: ep.value for ep in eps}, "loaded": [],
                          "distributions": {n: {"distribution": d, "version": v} for n, d, v in found}},
                         indent=2))
        return 0
    from .settings import pps_root

    root = pps_root()
    entities = sorted(p.parent.name for p in root.glob("*/pps.toml"))
    said = (f"entities in {root}: {', '.join(entities)}; `pps plugins --entity NAME` shows what one loads"
            if entities else "no entity yet: `pps init --entity NAME` creates one")
    print(f"installed plugins (pps {_version()}; {said}):")
    for name, dist, ver in found:
        print(f"  {name:<12} {dist or '-'} {ver or ''}")
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    from . import auth

    settings = _settings(args)
    token = auth.read_token(settings.home)
    if not token:
        print(f"pps: error: no token for entity {settings.entity!r}; run `pps init` first", file=sys.stderr)
        return 2
    print(token)
    return 0


def _run_call(args: argparse.Namespace, operation: str, params: dict[str, Any]) -> Any:
    from .client import run_call

    return run_call(args, operation, params)


def cmd_call(args: argparse.Namespace) -> int:
    if args.help or not args.operation:
        if args.operation:
            return _describe(args, args.operation, as_json=False)
        args._pps_call_parser.print_help()
        return 0 if args.help else 2
    raw = sys.stdin.read() if args.params == "-" else args.params
    try:
        params = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        print(f"pps: error: params are not valid JSON: {exc} (e.g. pps call {args.operation} "
              f"'{{\"limit\": 5}}'; `pps call {args.operation} --help` shows the parameters)", file=sys.stderr)
        return 2
    result = _run_call(args, args.operation, params)
    if args.text:
        from zoneinfo import ZoneInfo

        from .cli_text import readable

        try:
            tz = ZoneInfo(_settings(args).timezone)
        except Exception:  # a listing in UTC rather than none
            tz = None
        print(readable(result, tz))
    else:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


def cmd_health(args: argparse.Namespace) -> int:
    result = _run_call(args, "pps_health", {})
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        from .cli_text import health_text

        print(health_text(result))
    return 0 if result.get("ok") else 1


def _catalog(args: argparse.Namespace) -> Any:
    """The entity's catalog, loaded without opening a store or taking the owner lock."""
    memory = _memory(args, own=False)
    memory.load_catalog()
    return memory.catalog


def _describe(args: argparse.Namespace, name: str, *, as_json: bool) -> int:
    from . import describe
    from .errors import UnknownOperation, did_you_mean

    catalog = _catalog(args)
    op = catalog.get(name)
    if op is None:
        raise UnknownOperation(f"unknown operation {name!r}{did_you_mean(name, catalog.names())} "
                               "(`pps operations` lists them)")
    if as_json:
        print(json.dumps({"name": op.name, "group": op.group, "description": op.description,
                          "read_only": op.read_only, "destructive": op.destructive,
                          "parameters": describe.parameters(op), "input_schema": op.input_schema()}, indent=2))
    else:
        print(describe.render(op))
    return 0


def cmd_operations(args: argparse.Namespace) -> int:
    if args.name:
        return _describe(args, args.name, as_json=args.json)
    ops = list(_catalog(args))
    if args.json:
        print(json.dumps([{"name": op.name, "group": op.group, "description": op.description} for op in ops],
                         indent=2))
        return 0
    for op in ops:
        print(f"{op.name:<28} {op.group:<11} {op.description.split('. ')[0]}")
    print("`pps operations NAME` shows how to call one (parameters, defaults, limits, an example).", file=sys.stderr)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from .serving import serve_command

    if not args.transport:
        print("pps: error: pps serve needs a transport: `pps serve mcp --entity NAME` (stdio, as an MCP client "
              "starts it) or `pps serve http --entity NAME` (REST, MCP over HTTP, the explorer); "
              "`pps serve NAME --help` shows its options", file=sys.stderr)
        return 2

    return serve_command(args.transport, list(args.args), args.entity, args.home)


COMMANDS: dict[str, Handler] = {
    "init": cmd_init,
    "plugins": cmd_plugins,
    "health": cmd_health,
    "token": cmd_token,
    "operations": cmd_operations,
    "call": cmd_call,
    "serve": cmd_serve,
}

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
