"""Every condenser command as a function: `condenser.train_biencoder(init=..., train=...,
loss="mnr", out=...)`. The keywords are the command's long flags with underscores, read from the
CLI's own definitions at import (a new flag needs no change here); each function runs the command
as the binary runs it and returns its summary as a dict: `command`, `argv`, `seconds`, `outputs`
(paths by flag), `printed` (what the binary prints, also written to sys.stdout) and the figures
its command records (`training`, `results`, `rows`, ...). show_progress_bar=False hides its bars."""
import json
import sys

from . import _condenser

__all__ = []


def _make(path, about, args):
    name = "_".join(p.replace("-", "_") for p in path)
    keys = [a[0] for a in args]

    def command(*, show_progress_bar=True, **kwargs):
        summary = json.loads(_condenser.run_command(name, list(path), kwargs, show_progress_bar is not False))
        if summary.get("printed"):
            sys.stdout.write(summary["printed"])
            sys.stdout.flush()
        return summary

    lines = [about.strip() or f"condenser {' '.join(path)}", "",
             f"Runs `condenser {' '.join(path)}`; returns its summary as a dict.", "", "Keywords:"]
    for key, flag, takes, many, required, help_, default in args:
        what = "switch (True/False)" if not takes else ("one or more values" if many else "a value")
        extra = "; required" if required else (f"; default {default}" if default else "")
        lines.append(f"    {key}: {what}{extra}. {help_}".rstrip())
    command.__name__ = command.__qualname__ = name
    command.__doc__ = "\n".join(lines)
    command.__signature_keys__ = keys
    return name, command


# commands whose Python API is a function of its own (`condenser.domain_overlap` takes texts or
# files and returns numpy), not the command's flags
_OWN_API = {"domain_overlap"}


def _install(namespace):
    for path, about, args in _condenser.commands():
        name, f = _make(path, about, args)
        if name in _OWN_API:
            continue
        namespace[name] = f
        __all__.append(name)
    # the recipe runner under the name the issue gives it: run_recipe(path, set={...}, dry_run=False)
    run = namespace.get("run")
    if run is not None:
        def run_recipe(recipe, set=None, dry_run=False, **kwargs):
            """Run a TOML recipe (`condenser run`): `set` as {NAME: VALUE} for its variables."""
            return run(recipe=recipe, set=set, dry_run=dry_run, **kwargs)
        namespace["run_recipe"] = run_recipe
        __all__.append("run_recipe")


_install(globals())
