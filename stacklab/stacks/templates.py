"""Config templates: Jinja2 with strict undefined, so a missing knob is an error, not ''.

Every path reaches a config through `| q`, which quotes it in the config language the
template declares on its first line (`{%- set syntax = "nginx" -%}`): a lab root with
a space, a quote or `;include /etc/passwd;` stays one argument. A path written without
`| q` is refused when the template renders, so a new template is safe by construction.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path, PurePath
from types import SimpleNamespace
from typing import Any

import jinja2

from ..errors import StackError


def _quoted(escape: str, refuse: str = "", trailing_backslash: bool = True):
    """A double-quoting function: `escape` characters get a backslash; characters in
    `refuse`, and control characters, cannot be written in that language at all."""
    def quote(text: str, syntax: str) -> str:
        bad = next((c for c in text if c in refuse or not c.isprintable()), None)
        if bad is None and not trailing_backslash and text.endswith("\\"):
            bad = "\\"
        if bad is not None:
            raise StackError(f"{text!r} cannot be written into a {syntax} config "
                             f"(it contains {bad!r})")
        return '"' + "".join("\\" + c if c in escape else c for c in text) + '"'
    return quote


# How each config language quotes a value, and what it cannot hold even quoted.
_QUOTE = {
    "nginx": _quoted('\\"', refuse="$"),        # $ starts a variable in root, access_log…
    "apache": _quoted('\\"', refuse="$"),       # ${NAME} is substituted on every line
    # lighttpd unescapes only \" (a backslash is kept), so a final \ would escape the ".
    "lighttpd": _quoted('"', trailing_backslash=False),
    "ini": _quoted('\\"$'),                     # php.ini: \$ keeps ${NAME} literal
    "php-fpm": _quoted('\\"', refuse="$"),      # php-fpm expands $pool in its paths
    "mycnf": _quoted('\\"\''),                  # MariaDB option files (my.cnf)
    "sql": lambda text, syntax: "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'",
    "sh": lambda text, syntax: shlex.quote(text),
    "vcl": _quoted("", refuse='"'),             # a VCL "string" has no escapes at all
    "haproxy": _quoted('\\"', refuse="$"),     # "${NAME}" is expanded in double quotes
    # squid.conf has no quoting (unless configuration_includes_quoted_values): a value
    # is one bare word, so whatever would end or comment it is refused.
    "squid": lambda text, syntax: _bare(text, syntax),
}


def _bare(text: str, syntax: str) -> str:
    bad = next((c for c in text if c.isspace() or c in '"#\'' or not c.isprintable()), None)
    if bad is not None or not text:
        raise StackError(f"{text!r} cannot be written into a {syntax} config "
                         f"(it contains {bad!r})")
    return text


def quote(value: Any, syntax: str) -> str:
    """`value` (a path, or a string holding one) as one quoted argument in `syntax`."""
    return _QUOTE[syntax](str(value), syntax)


@jinja2.pass_context
def _q(context: jinja2.runtime.Context, value: Any, *parts: str) -> str:
    """`{{ run_dir | q("nginx.pid") }}`: the path (joined with `parts`) quoted in the
    template's syntax."""
    syntax = context.get("syntax")
    if syntax not in _QUOTE:
        raise jinja2.TemplateError(f"`| q` needs the template to declare its syntax "
                                   f"({{%- set syntax = ... -%}}, one of {', '.join(_QUOTE)})")
    return quote(PurePath(value, *parts) if parts else value, syntax)


def _refuse_raw_path(value: Any) -> Any:
    if isinstance(value, PurePath):
        raise jinja2.TemplateError(f"the path {str(value)!r} is written without `| q`")
    return value


_env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                          trim_blocks=False, autoescape=False, finalize=_refuse_raw_path)
_env.filters["q"] = _q


def render_template(path: Path, ctx: Any, knobs: dict[str, Any], **extra: Any) -> str:
    """The template with the context's fields, its knobs as `k`, `upstream(need)` (the
    endpoint of the backend that provides `need`: `upstream("php")`) and `extra`."""
    template = _env.from_string(path.read_text())
    fields = {f.name: getattr(ctx, f.name) for f in dataclasses.fields(ctx)}
    if hasattr(ctx, "upstream"):
        fields["upstream"] = ctx.upstream
    try:
        return template.render(**fields, k=SimpleNamespace(**knobs), **extra)
    except jinja2.TemplateError as e:
        raise StackError(f"{path.name}: {e}") from e
